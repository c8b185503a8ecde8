//! The HSA queue write path: a program that drives the (simulated) HSA runtime directly is
//! traced packet by packet (kernel and agent dispatches, barrier-AND/OR, AMD's
//! barrier-value), and every barrier gets an arrow from the packet it waits on.
//! Needs root (eBPF); skips with a reason otherwise.

use std::collections::{BTreeMap, BTreeSet};

use crate::common::*;
use rocsync_tests::hsa_scenario;

/// One packet: (agent, queue, write index, type, completion signal, dependencies).
type PacketKey = (i64, u64, u64, u64, u64, Vec<u64>);

#[test]
fn every_published_packet_and_barrier_dependency_is_traced() {
    if !can_trace("every_published_packet_and_barrier_dependency_is_traced") {
        return;
    }
    let dir = TempDir::new();
    let log = dir.path("packets.log");
    let out = dir.path("trace.json");
    let (iterations, queue_size) = (20, 8);
    run_ok(
        rocsync()
            .args(["run", "-o"])
            .arg(&out)
            .arg("--")
            .arg(hsa_scenario())
            .args([iterations.to_string(), queue_size.to_string()])
            .env("SCENARIO_LOG", &log),
    );
    // The scenario's own log of what it published.
    let text = std::fs::read_to_string(&log).unwrap();
    let logged: Vec<PacketKey> = text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let deps = [hex(f[5]), hex(f[6])]
                .into_iter()
                .filter(|&d| d != 0)
                .collect();
            (
                f[0].parse().unwrap(),
                hex(f[1]),
                f[2].parse().unwrap(),
                f[3].parse().unwrap(),
                hex(f[4]),
                deps,
            )
        })
        .collect();
    // Three packets per iteration, an agent dispatch every fourth.
    assert_eq!(logged.len(), iterations * 3 + iterations / 4);
    for t in [0, 2, 3, 4, 5] {
        assert!(logged.iter().any(|p| p.3 == t), "packet type {t} published");
    }
    assert!(
        logged.iter().any(|p| p.2 >= 2 * queue_size as u64),
        "the ring wraps around"
    );

    let trace = read_json(&out);
    let events = trace["traceEvents"].as_array().unwrap();
    let type_code = |name: &str| match name {
        "barrier_value" => 0,
        "kernel_dispatch" => 2,
        "barrier_and" => 3,
        "agent_dispatch" => 4,
        "barrier_or" => 5,
        other => panic!("unexpected packet type {other}"),
    };
    let mut rows: Vec<PacketKey> = Vec::new();
    let mut at: BTreeMap<(i64, i64, String), (u64, u64)> = BTreeMap::new();
    for e in events.iter().filter(|e| e["cat"] == "hsa_packet") {
        let a = &e["args"];
        let deps = a["dep_signals"]
            .as_array()
            .map(|d| d.iter().map(|s| hex(s.as_str().unwrap())).collect())
            .unwrap_or_default();
        let key = (
            a["agent"].as_i64().unwrap(),
            hex(a["queue"].as_str().unwrap()),
            a["write_index"].as_u64().unwrap(),
            type_code(e["name"].as_str().unwrap()),
            a["completion_signal"].as_str().map_or(0, hex),
            deps,
        );
        assert_eq!(e["pid"].as_i64(), Some(key.0), "one GPU process per agent");
        at.insert(
            (
                e["pid"].as_i64().unwrap(),
                e["tid"].as_i64().unwrap(),
                e["ts"].to_string(),
            ),
            (key.1, key.2),
        );
        match key.3 {
            0 => assert_eq!(
                (&a["condition"], &a["value"]),
                (&serde_json::json!("lt"), &serde_json::json!(1)),
                "barrier-value condition"
            ),
            4 => assert_eq!(a["function"], 7, "agent dispatch function"),
            _ => {}
        }
        rows.push(key);
    }
    let mut want = logged.clone();
    want.sort();
    rows.sort();
    assert_eq!(
        rows, want,
        "each published packet exactly once, as published"
    );

    // Arrows: from the packet whose completion signal a barrier waits on, to the barrier.
    let mut producer = BTreeMap::new();
    let mut want_edges = BTreeSet::new();
    for p in &logged {
        for d in &p.5 {
            want_edges.insert((producer[d], (p.1, p.2)));
        }
        producer.insert(p.4, (p.1, p.2));
    }
    let mut ends: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
    for e in events.iter().filter(|e| e["cat"] == "hsa_dep") {
        let pos = (
            e["pid"].as_i64().unwrap(),
            e["tid"].as_i64().unwrap(),
            e["ts"].to_string(),
        );
        ends.entry(e["id"].as_u64().unwrap())
            .or_default()
            .push(at[&pos]);
    }
    let got_edges: BTreeSet<_> = ends.values().map(|v| (v[0], v[1])).collect();
    assert_eq!(got_edges, want_edges);
}

#[test]
fn every_hsa_probe_attaches_to_the_real_debian_runtime() {
    if !can_trace("every_hsa_probe_attaches_to_the_real_debian_runtime") {
        return;
    }
    let lib = std::path::Path::new("/usr/lib/x86_64-linux-gnu/libhsa-runtime64.so.1");
    if !lib.exists() {
        rocsync_tests::skip(
            "every_hsa_probe_attaches_to_the_real_debian_runtime",
            "libhsa-runtime64-1 is not installed (scripts/setup installs it)",
        );
        return;
    }
    // Its functions cannot run without a GPU: attaching is the honest check.
    let mut probes = rocsync::calls::probes::Probes::load(Default::default()).unwrap();
    let report = probes.attach_hsa(lib, std::process::id()).unwrap();
    let names: BTreeSet<&str> = report
        .probed
        .iter()
        .flat_map(|(_, n)| n.iter().copied())
        .collect();
    let want = [
        "hsa_agent_get_info",
        "hsa_iterate_agents",
        "hsa_queue_create",
        "hsa_queue_destroy",
        "hsa_signal_store_relaxed",
        "hsa_signal_store_screlease",
    ];
    assert_eq!(names, want.into_iter().collect());
    assert!(report.missing.is_empty());
}

#[test]
fn an_agent_filter_keeps_only_that_agents_packets() {
    if !can_trace("an_agent_filter_keeps_only_that_agents_packets") {
        return;
    }
    let dir = TempDir::new();
    let log = dir.path("packets.log");
    let out = dir.path("trace.json");
    run_ok(
        rocsync()
            .args(["run", "--agents", "1", "-o"])
            .arg(&out)
            .arg("--")
            .arg(hsa_scenario())
            .args(["10", "16"])
            .env("SCENARIO_LOG", &log),
    );
    let text = std::fs::read_to_string(&log).unwrap();
    let agent1 = text.lines().filter(|l| l.starts_with("1 ")).count();
    assert!(agent1 > 0 && agent1 < text.lines().count());
    let trace = read_json(&out);
    let packets: Vec<_> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "hsa_packet")
        .collect();
    assert_eq!(packets.len(), agent1, "agent 1's packets, and only those");
    assert!(
        packets
            .iter()
            .all(|p| p["args"]["agent"] == 1 && p["pid"] == 1)
    );
}

#[test]
fn stopping_mid_run_keeps_every_packet_published_before_the_stop() {
    if !can_trace("stopping_mid_run_keeps_every_packet_published_before_the_stop") {
        return;
    }
    let dir = TempDir::new();
    let log = dir.path("packets.log");
    let out = dir.path("trace.json");
    // Held at its gate after 1000 of its 3000 iterations, its log flushed: the stop
    // comes mid-run, every packet before it published and logged.
    let mut tracer = spawn_piped(
        rocsync()
            .args(["run", "-o"])
            .arg(&out)
            .arg("--")
            .arg(hsa_scenario())
            .args(["3000", "64"])
            .env("SCENARIO_LOG", &log)
            .env("SCENARIO_GATE", "1000"),
    );
    let mut gate = tracer.stdin.take().unwrap();
    Lines::of(tracer.stdout.take().unwrap()).wait_for("ready");
    let logged = std::fs::read_to_string(&log).unwrap().lines().count();
    // SAFETY: signals the tracer this test started.
    unsafe { libc::kill(tracer.id() as i32, libc::SIGINT) };
    // Once the trace is written, the scenario runs on to its end (run waits for it).
    Lines::of(tracer.stderr.take().unwrap()).wait_for("trace: ");
    std::io::Write::write_all(&mut gate, b"go\n").unwrap();
    assert!(tracer.wait().unwrap().success());
    let trace = read_json(&out);
    let mut per_queue: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for e in trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "hsa_packet")
    {
        per_queue
            .entry(e["args"]["queue"].as_str().unwrap().to_string())
            .or_default()
            .push(e["args"]["write_index"].as_u64().unwrap());
    }
    let captured: usize = per_queue.values().map(Vec::len).sum();
    assert!(
        logged > 3000,
        "1000 iterations of three or four packets: {logged}"
    );
    assert_eq!(captured, logged, "every packet published before the stop");
    // Every queue's packets up to the stop, with no gap.
    for (queue, mut idx) in per_queue {
        idx.sort();
        assert_eq!(
            idx,
            (0..idx.len() as u64).collect::<Vec<_>>(),
            "queue {queue}"
        );
    }
}

/// A HIP program on a runtime that submits through HSA, as CLR does.
fn hip_over_hsa(dir: &TempDir, flags: &[&str], args: &[&str]) -> serde_json::Value {
    let out = dir.path("trace.json");
    run_ok(
        rocsync()
            .arg("run")
            .args(flags)
            .arg("-o")
            .arg(&out)
            .arg("--")
            .arg(rocsync_tests::scenario_dlopen())
            .args(args)
            .env("SCENARIO_HIP", rocsync_tests::sim_hip_over_hsa())
            .env("SCENARIO_LOG", dir.path("calls.log")),
    );
    read_json(&out)
}

#[test]
fn each_stream_wait_is_linked_to_the_barrier_it_submitted() {
    if !can_trace("each_stream_wait_is_linked_to_the_barrier_it_submitted") {
        return;
    }
    let dir = TempDir::new();
    let trace = hip_over_hsa(&dir, &[], &["cross", "20"]);
    let events = trace["traceEvents"].as_array().unwrap();
    let waits: Vec<_> = events
        .iter()
        .filter(|e| e["cat"] == "cuda_runtime" && e["name"] == "hipStreamWaitEvent")
        .collect();
    assert_eq!(waits.len(), 20);
    // Each link: from a wait's runtime row to a barrier-AND row waiting on a signal.
    let mut links: BTreeMap<u64, Vec<&serde_json::Value>> = BTreeMap::new();
    for e in events.iter().filter(|e| e["cat"] == "hip_barrier") {
        links.entry(e["id"].as_u64().unwrap()).or_default().push(e);
    }
    assert_eq!(links.len(), waits.len(), "one link per stream wait");
    let row_at = |pid: &serde_json::Value, tid: &serde_json::Value, ts: &serde_json::Value| {
        events
            .iter()
            .find(|e| e["ph"] == "X" && &e["pid"] == pid && &e["tid"] == tid && &e["ts"] == ts)
            .cloned()
    };
    for ends in links.values() {
        let end = ends.iter().find(|e| e["ph"] == "f").unwrap();
        let barrier =
            row_at(&end["pid"], &end["tid"], &end["ts"]).expect("the link ends on a packet row");
        assert_eq!(barrier["name"], "barrier_and");
        let dep = barrier["args"]["dep_signals"][0]
            .as_str()
            .expect("the barrier waits on a signal");
        // ...the completion signal of the barrier the producing record submitted.
        let producer = events
            .iter()
            .find(|e| {
                e["cat"] == "hsa_packet" && e["args"]["completion_signal"].as_str() == Some(dep)
            })
            .expect("the signal's producer is traced");
        assert_eq!(producer["name"], "barrier_and");
    }
}

#[test]
fn a_doorbell_over_sixteen_packets_writes_sixteen_and_counts_the_rest() {
    if !can_trace("a_doorbell_over_sixteen_packets_writes_sixteen_and_counts_the_rest") {
        return;
    }
    let dir = TempDir::new();
    let out = dir.path("trace.json");
    let run = run_ok(
        rocsync()
            .args(["run", "--no-status", "-o"])
            .arg(&out)
            .arg("--")
            .arg(hsa_scenario())
            .args(["1", "32"])
            .env("SCENARIO_BURST", "20")
            .env("SCENARIO_LOG", dir.path("packets.log")),
    );
    let t = read_json(&out);
    let rows = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "hsa_packet" && e["args"]["agent"] == 0)
        .count();
    // Agent 0: the iteration's kernel, then 16 of the burst's 20; 4 counted as truncated.
    assert_eq!(rows, 1 + 16);
    assert_eq!(t["rocsync"]["drops"]["packets_truncated"], 4);
    let stderr = stderr_of(&run);
    assert!(stderr.contains("packets_truncated 4"), "{stderr}");
}
