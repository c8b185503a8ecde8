//! Each `hipStreamWaitEvent` over HSA is linked to the very barrier it submitted, and that
//! barrier waits on the completion signal of the barrier its resolved record submitted —
//! checked against the runtime's own log of the packets it published, not against
//! rocsync's view. Needs root (eBPF).

use std::collections::BTreeMap;

use crate::common::*;
use rocsync_tests::{read_log, scenario_dlopen, sim_hip_over_hsa};

/// (tid, queue, write index, completion signal, dependency signal), as the runtime logs.
type Barrier = (u32, u64, u64, u64, u64);

#[test]
fn each_wait_links_to_the_barrier_the_runtime_says_it_submitted() {
    let name = "each_wait_links_to_the_barrier_the_runtime_says_it_submitted";
    if can_trace(name) {
        check_links(false, false);
    }
}

/// The same on MI200/MI300's form: CLR publishes AMD's vendor barrier-value packets.
#[test]
fn each_wait_links_to_the_barrier_value_packet_it_submitted() {
    if can_trace("each_wait_links_to_the_barrier_value_packet_it_submitted") {
        check_links(true, false);
    }
}

/// `convert` of the raw capture holds the same links and resolutions, checked against the
/// runtime's and the scenario's logs again (not against the live trace).
#[test]
fn convert_keeps_each_wait_linked_to_its_barrier() {
    if can_trace("convert_keeps_each_wait_linked_to_its_barrier") {
        check_links(false, true);
    }
}

/// Runs the cross scenario over HSA and checks the trace (or, with `convert`, the trace
/// `rocsync convert` makes of the raw capture) against the logs.
fn check_links(barrier_value: bool, convert: bool) {
    let dir = TempDir::new();
    let (trace, raw, log, packets) = (
        dir.path("t.json"),
        dir.path("r.jsonl"),
        dir.path("s.log"),
        dir.path("packets.log"),
    );
    let mut cmd = rocsync();
    cmd.args(["run", "--no-status", "-o"])
        .arg(&trace)
        .arg("--raw")
        .arg(&raw)
        .arg("--")
        .arg(scenario_dlopen())
        .args(["cross", "20"])
        .env("SCENARIO_HIP", sim_hip_over_hsa())
        .env("SCENARIO_LOG", &log)
        .env("HIP_SIM_PACKET_LOG", &packets);
    if barrier_value {
        cmd.env("HIP_SIM_BARRIER_VALUE", "1");
    }
    run_ok(&mut cmd);
    let trace = if convert {
        let converted = dir.path("converted.json");
        run_ok(rocsync().arg("convert").arg(&raw).arg("-o").arg(&converted));
        converted
    } else {
        trace
    };
    let logged = read_log(&log);
    let (_, calls) = read_raw(&raw);
    let corr = seq_to_correlation(&logged, &calls);
    let barriers: Vec<Barrier> = std::fs::read_to_string(&packets)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (
                f[0].parse().unwrap(),
                hex(f[1]),
                f[2].parse().unwrap(),
                hex(f[3]),
                hex(f[4]),
            )
        })
        .collect();
    // Per thread, in order: a successful record submits a barrier with no dependency, a
    // successful wait on a recorded event one with a dependency (tests/c/hip_sim.c).
    let mut by_call: BTreeMap<u64, Barrier> = BTreeMap::new();
    let mut sorted = logged.clone();
    sorted.sort_by_key(|l| l.seq);
    for tid in sorted
        .iter()
        .map(|l| l.tid)
        .collect::<std::collections::BTreeSet<_>>()
    {
        let mut records = barriers.iter().filter(|b| b.0 == tid && b.4 == 0);
        let mut waits = barriers.iter().filter(|b| b.0 == tid && b.4 != 0);
        for l in sorted.iter().filter(|l| l.tid == tid && l.ret == 0) {
            let b = match l.api.as_str() {
                "hipEventRecord" => records.next(),
                "hipStreamWaitEvent" => waits.next(),
                _ => continue,
            };
            by_call.insert(corr[&l.seq], *b.expect("a barrier for each call"));
        }
    }
    let t = read_json(&trace);
    // Every wait resolves as the scenario's log says.
    let want: BTreeMap<u64, i64> = expected_edges(&logged)
        .into_iter()
        .map(|(w, r)| (corr[&w], r.map_or(-1, |r| corr[&r] as i64)))
        .collect();
    assert_eq!(trace_edges(&t), want);
    let events = t["traceEvents"].as_array().unwrap();
    // Follow each hip_barrier arrow from its wait's runtime row to its packet row.
    let at = |e: &serde_json::Value, cat: &str| {
        let ts = e["ts"].as_f64().unwrap();
        events
            .iter()
            .find(|r| {
                r["ph"] == "X"
                    && r["cat"] == cat
                    && r["pid"] == e["pid"]
                    && r["tid"] == e["tid"]
                    && r["ts"].as_f64().unwrap() - 0.0005 <= ts
                    && ts <= r["ts"].as_f64().unwrap() + r["dur"].as_f64().unwrap() + 0.0005
            })
            .unwrap_or_else(|| panic!("no {cat} row under {e}"))
            .clone()
    };
    let mut links = 0;
    for s in events
        .iter()
        .filter(|e| e["cat"] == "hip_barrier" && e["ph"] == "s")
    {
        let f = events
            .iter()
            .find(|e| e["cat"] == "hip_barrier" && e["ph"] == "f" && e["id"] == s["id"])
            .expect("both ends");
        let wait = at(s, "cuda_runtime");
        let packet = at(f, "hsa_packet");
        let kind = if barrier_value {
            "barrier_value"
        } else {
            "barrier_and"
        };
        assert_eq!(packet["name"], kind);
        let w = wait["args"]["correlation"].as_u64().unwrap();
        let (_, queue, index, _, dep) = by_call[&w];
        assert_eq!(
            hex(packet["args"]["queue"].as_str().unwrap()),
            queue,
            "wait {w}"
        );
        assert_eq!(
            packet["args"]["write_index"].as_u64().unwrap(),
            index,
            "wait {w}"
        );
        // Its dependency: the completion signal of the resolved record's own barrier.
        let r = wait["args"]["wait_on_hip_event_record_corr_id"]
            .as_u64()
            .unwrap();
        assert_eq!(dep, by_call[&r].3, "wait {w} on record {r}");
        assert_eq!(
            hex(packet["args"]["dep_signals"][0].as_str().unwrap()),
            by_call[&r].3
        );
        links += 1;
    }
    let waits = logged
        .iter()
        .filter(|l| l.api == "hipStreamWaitEvent" && l.ret == 0)
        .count();
    assert_eq!(links, waits, "one link per stream wait");
}
