//! `--agents N` selects one GPU on both paths: device N's records and synchronisations,
//! and exactly the packets its threads published, on "GPU N" — also when
//! `HIP_VISIBLE_DEVICES` reorders GPUs (with "1,0", HIP device 0 is the agent the runtime
//! enumerates second). Checked on HIP over the simulated HSA runtime against the
//! scenario's own log, never against another rocsync run. Needs root.

use std::collections::BTreeSet;

use crate::common::*;
use rocsync_tests::{read_log, scenario_dlopen, sim_hip_over_hsa};

#[test]
fn an_agent_filter_applies_to_calls_and_packets_alike() {
    if can_trace("an_agent_filter_applies_to_calls_and_packets_alike") {
        // Device 1 is the agent enumerated second.
        check_filter(None, 1, true);
    }
}

#[test]
fn agents_select_the_same_gpu_on_both_paths_under_hip_visible_devices() {
    if can_trace("agents_select_the_same_gpu_on_both_paths_under_hip_visible_devices") {
        // Device 0 is the agent enumerated second.
        check_filter(Some("1,0"), 0, true);
    }
}

/// Traces `threads 4 20` with `--agents device` (and `HIP_VISIBLE_DEVICES=visible`);
/// `second`: the device is the GPU agent the runtime enumerates second.
fn check_filter(visible: Option<&str>, device: u64, second: bool) {
    let dir = TempDir::new();
    let (out, raw, log) = (dir.path("t.json"), dir.path("r.jsonl"), dir.path("s.log"));
    let mut cmd = rocsync();
    cmd.args(["run", "--no-status", "--agents", &device.to_string(), "-o"])
        .arg(&out)
        .arg("--raw")
        .arg(&raw)
        .arg("--")
        .arg(scenario_dlopen())
        .args(["threads", "4", "20"])
        .env("SCENARIO_HIP", sim_hip_over_hsa())
        .env("SCENARIO_LOG", &log);
    if let Some(v) = visible {
        cmd.env("HIP_VISIBLE_DEVICES", v);
    }
    run_ok(&mut cmd);
    // Threads of HIP device 0, by the scenario's own log.
    let logged = read_log(&log);
    let on = |d: u64| -> BTreeSet<u32> {
        logged
            .iter()
            .filter(|l| l.api == "hipSetDevice" && l.args[0] == d && l.ret == 0)
            .map(|l| l.tid)
            .collect()
    };
    let (kept_tids, other_tids) = (on(device), on(1 - device));
    assert!(!kept_tids.is_empty() && !other_tids.is_empty());

    // The raw capture read as plain JSON (common/raw.rs), not through rocsync's reader.
    let (queues, packets) = read_hsa(&raw);
    // Queues are numbered as HIP devices (the simulated runtime's agents lie in
    // enumeration order in memory).
    let agent_of = |d: u32| -> BTreeSet<u64> {
        queues
            .iter()
            .filter(|q| q.ordinal == d)
            .filter_map(|q| q.agent)
            .collect()
    };
    let (a, other) = (agent_of(device as u32), agent_of(1 - device as u32));
    assert_eq!((a.len(), other.len()), (1, 1), "{queues:?}");
    assert_eq!(
        a.first() > other.first(),
        second,
        "which agent HIP device {device} is"
    );
    // Exactly the device's packets are kept: every one published by one of its threads.
    assert!(!packets.is_empty());
    assert!(
        packets
            .iter()
            .all(|p| p.ordinal == device as u32 && kept_tids.contains(&p.tid))
    );
    let t = read_json(&out);
    let events = t["traceEvents"].as_array().unwrap();
    let rows = |cat: &'static str| {
        events
            .iter()
            .filter(move |e| e["ph"] == "X" && e["cat"] == cat)
    };
    assert!(rows("hsa_packet").all(|e| e["pid"] == device && e["args"]["agent"] == device));
    assert_eq!(rows("hsa_packet").count(), packets.len());
    // The records and synchronisations kept are the device's threads', and all of theirs.
    let filtered = [
        "hipEventRecord",
        "hipStreamWaitEvent",
        "hipEventSynchronize",
        "hipEventQuery",
        "hipStreamSynchronize",
        "hipDeviceSynchronize",
    ];
    let kept: Vec<u32> = rows("cuda_runtime")
        .filter(|e| filtered.iter().any(|n| e["name"] == *n))
        .map(|e| e["tid"].as_u64().unwrap() as u32)
        .collect();
    assert!(kept.iter().all(|t| kept_tids.contains(t)), "{kept:?}");
    let want = logged
        .iter()
        .filter(|l| kept_tids.contains(&l.tid) && filtered.contains(&l.api.as_str()))
        .count();
    assert_eq!(kept.len(), want);
    assert!(rows("cuda_sync").all(|e| e["pid"] == device));
    assert!(rows("cuda_sync").count() > 0);
}
