//! `HIP_VISIBLE_DEVICES` reorders GPUs: with "1,0", HIP device 0 is the GPU agent the
//! runtime enumerates second. `--agents 0` must then select one GPU on both paths: device
//! 0's calls, and exactly the packets its threads published, on agent "GPU 0". Checked on
//! HIP over the simulated HSA runtime, against the scenario's own log. Needs root.

mod common;

use std::{collections::BTreeSet, io::BufReader};

use common::*;
use rocsync::emit::raw::{Item, Reader};
use rocsync_tests::{read_log, scenario_dlopen, sim_hip_over_hsa};

#[test]
fn agents_select_the_same_gpu_on_both_paths_under_hip_visible_devices() {
    if !can_trace("agents_select_the_same_gpu_on_both_paths_under_hip_visible_devices") {
        return;
    }
    let dir = TempDir::new();
    let (out, raw, log) = (dir.path("t.json"), dir.path("r.jsonl"), dir.path("s.log"));
    run_ok(
        rocsync()
            .args(["run", "--no-status", "--agents", "0", "-o"])
            .arg(&out)
            .arg("--raw")
            .arg(&raw)
            .arg("--")
            .arg(scenario_dlopen())
            .args(["threads", "4", "20"])
            .env("SCENARIO_HIP", sim_hip_over_hsa())
            .env("SCENARIO_LOG", &log)
            .env("HIP_VISIBLE_DEVICES", "1,0"),
    );
    // Threads of HIP device 0, by the scenario's own log.
    let logged = read_log(&log);
    let on = |d: u64| -> BTreeSet<u32> {
        logged
            .iter()
            .filter(|l| l.api == "hipSetDevice" && l.args[0] == d && l.ret == 0)
            .map(|l| l.tid)
            .collect()
    };
    let (device0, device1) = (on(0), on(1));
    assert!(!device0.is_empty() && !device1.is_empty());

    let mut reader = Reader::new(BufReader::new(std::fs::File::open(&raw).unwrap())).unwrap();
    let (mut queues, mut packets) = (Vec::new(), Vec::new());
    while let Some(item) = reader.next_item().unwrap() {
        match item {
            Item::Queue(q) if q.created => queues.push(q),
            Item::Packet(p) => packets.push(p),
            _ => {}
        }
    }
    // Queues are numbered as HIP devices: device 0's is the agent enumerated second (the
    // simulated runtime's agents lie in enumeration order in memory).
    let agent_of = |d: u32| -> BTreeSet<u64> {
        queues
            .iter()
            .filter(|q| q.ordinal == d)
            .map(|q| q.agent)
            .collect()
    };
    let (a0, a1) = (agent_of(0), agent_of(1));
    assert_eq!((a0.len(), a1.len()), (1, 1), "{queues:?}");
    assert!(a0.first() > a1.first(), "HIP device 0 is the second agent");
    // Exactly device 0's packets are kept: every one published by a device-0 thread.
    assert!(!packets.is_empty());
    assert!(
        packets
            .iter()
            .all(|p| p.ordinal == 0 && device0.contains(&p.tid))
    );
    let t = read_json(&out);
    let events = t["traceEvents"].as_array().unwrap();
    let rows = |cat: &'static str| {
        events
            .iter()
            .filter(move |e| e["ph"] == "X" && e["cat"] == cat)
    };
    assert!(rows("hsa_packet").all(|e| e["pid"] == 0 && e["args"]["agent"] == 0));
    assert_eq!(rows("hsa_packet").count(), packets.len());
    // The records and synchronisations kept are device 0's threads', and all of theirs.
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
    assert!(kept.iter().all(|t| device0.contains(t)), "{kept:?}");
    let want = logged
        .iter()
        .filter(|l| device0.contains(&l.tid) && filtered.contains(&l.api.as_str()))
        .count();
    assert_eq!(kept.len(), want);
    assert!(rows("cuda_sync").all(|e| e["pid"] == 0));
    assert!(rows("cuda_sync").count() > 0);
}
