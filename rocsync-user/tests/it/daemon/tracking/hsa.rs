//! The HSA write path in the daemon: packets counted per agent and kind while nothing
//! records, against the simulated runtime's own account of what it published; a trace on
//! request holds the packets and barrier links `rocsync attach` of the same scenario
//! holds, wait by wait as the runtime's log says; a queue made before a trace began still
//! places the trace's packets; under `HIP_VISIBLE_DEVICES`, packets are counted on the
//! HIP device the scenario's threads chose; the flight recorder holds every packet
//! published. Needs root.

use std::{
    collections::BTreeMap,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::Value;

use crate::common::{daemon::*, daemon_hsa::*, *};

#[test]
fn the_daemon_counts_every_packet_the_runtime_published() {
    let name = "the_daemon_counts_every_packet_the_runtime_published";
    let Some((dir, _, python)) = metrics_test(name) else {
        return;
    };
    let (daemon, _, mut target, addr) = tracked_over_hsa(&dir, &["cross", "20"]);
    target.open();
    assert!(target.child.wait().unwrap().success());
    let m = Metrics::scrape(&python, &addr);
    stop(daemon);
    let (barriers, kernels) = published(&dir);
    assert!(!barriers.is_empty() && kernels > 0);
    assert_eq!(m.types["rocsync_aql_packets"], "counter");
    // Every packet, by kind, on the one agent the scenario's streams use.
    assert_eq!(
        counted(&m, "barrier_and"),
        (barriers.len(), vec!["0".to_string()])
    );
    assert_eq!(
        counted(&m, "kernel_dispatch"),
        (kernels, vec!["0".to_string()])
    );
    assert_eq!(counted(&m, "other").0 + counted(&m, "barrier_or").0, 0);
}

#[test]
fn packets_are_counted_on_hip_devices_under_hip_visible_devices() {
    let name = "packets_are_counted_on_hip_devices_under_hip_visible_devices";
    let Some((dir, _, python)) = metrics_test(name) else {
        return;
    };
    // HIP device 0 is the agent the runtime enumerates second, device 1 the first.
    let env = [("HIP_VISIBLE_DEVICES", "1,0")];
    let (daemon, _, mut target, addr) =
        tracked_over_hsa_with(&dir, &["threads", "4", "20"], &env, &[]);
    target.open();
    assert!(target.child.wait().unwrap().success());
    let m = Metrics::scrape(&python, &addr);
    stop(daemon);
    // Each thread's HIP device by the scenario's log; each barrier by the runtime's.
    let device_of: BTreeMap<u32, u64> = rocsync_tests::read_log(&dir.path("s.log"))
        .iter()
        .filter(|l| l.api == "hipSetDevice" && l.ret == 0)
        .map(|l| (l.tid, l.args[0]))
        .collect();
    let mut expected: BTreeMap<String, usize> = BTreeMap::new();
    for line in std::fs::read_to_string(dir.path("packets.log"))
        .unwrap()
        .lines()
    {
        let tid: u32 = line.split(' ').next().unwrap().parse().unwrap();
        *expected.entry(device_of[&tid].to_string()).or_default() += 1;
    }
    assert_eq!(expected.len(), 2, "both devices publish: {expected:?}");
    let counted: BTreeMap<String, usize> = m
        .samples
        .iter()
        .filter(|(n, l, _)| n == "rocsync_aql_packets_total" && l["kind"] == "barrier_and")
        .map(|(_, l, v)| (l["device"].as_str().unwrap().to_string(), *v as usize))
        .collect();
    assert_eq!(counted, expected);
}

#[test]
fn the_flight_recorder_holds_every_packet_the_runtime_published() {
    let name = "the_flight_recorder_holds_every_packet_the_runtime_published";
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    let flags = ["--flight-recorder", "10s"];
    let (daemon, _, mut target, _) = tracked_over_hsa_with(&dir, &["cross", "20"], &[], &flags);
    let pid = target.child.id();
    target.open();
    assert!(target.child.wait().unwrap().success());
    let out = ask_daemon(&dir.path("rocsync.sock"), &["trace", "--flight"]);
    stop(daemon);
    let files: Vec<&str> = out.lines().collect();
    assert_eq!(files.len(), 1, "{out}");
    let t = read_json(std::path::Path::new(files[0]));
    assert_eq!(t["rocsync"]["pid"], pid, "{}", t["rocsync"]);
    // Exactly the barriers the runtime published, each by (queue, write index), and as
    // many kernel dispatches.
    let (barriers, kernels) = published(&dir);
    let hex = |v: &Value| u64::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16);
    let mut traced: Vec<(u64, u64)> = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "hsa_packet" && e["name"] == "barrier_and")
        .map(|e| {
            let a = &e["args"];
            (
                hex(&a["queue"]).unwrap(),
                a["write_index"].as_u64().unwrap(),
            )
        })
        .collect();
    let mut barriers = barriers;
    traced.sort_unstable();
    barriers.sort_unstable();
    assert!(!barriers.is_empty() && kernels > 0);
    assert_eq!(traced, barriers);
    let rows = packet_rows(&t);
    let dispatches: usize = rows
        .iter()
        .filter(|((kind, _), _)| kind == "\"kernel_dispatch\"")
        .map(|(_, n)| n)
        .sum();
    assert_eq!(dispatches, kernels, "{rows:?}");
}

/// Each stream wait's barrier link in a trace: the `k`-th wait (in call order) → the
/// (queue, write index) of the barrier packet its link ends on.
fn wait_links(t: &Value) -> Vec<(u64, u64)> {
    let events = t["traceEvents"].as_array().unwrap();
    let hex = |v: &Value| u64::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16);
    let mut ends: BTreeMap<u64, (Option<&Value>, Option<&Value>)> = BTreeMap::new();
    for e in events.iter().filter(|e| e["cat"] == "hip_barrier") {
        let end = ends.entry(e["id"].as_u64().unwrap()).or_default();
        match e["ph"].as_str() {
            Some("s") => assert!(end.0.replace(e).is_none(), "{e}"),
            Some("f") => assert!(end.1.replace(e).is_none(), "{e}"),
            _ => panic!("{e}"),
        }
    }
    let mut links: Vec<(u64, (u64, u64))> = ends
        .values()
        .map(|(s, f)| {
            let (s, f) = (s.expect("a link's start"), f.expect("a link's end"));
            // It starts inside a wait's runtime row, and ends on a barrier's packet row.
            let wait = events
                .iter()
                .find(|e| {
                    e["cat"] == "cuda_runtime"
                        && e["name"] == "hipStreamWaitEvent"
                        && e["pid"] == s["pid"]
                        && e["tid"] == s["tid"]
                        && e["ts"].as_f64() <= s["ts"].as_f64()
                        && s["ts"].as_f64().unwrap()
                            <= e["ts"].as_f64().unwrap() + e["dur"].as_f64().unwrap()
                })
                .unwrap_or_else(|| panic!("no wait row under {s}"));
            let barrier = events
                .iter()
                .find(|e| {
                    e["cat"] == "hsa_packet"
                        && e["pid"] == f["pid"]
                        && e["tid"] == f["tid"]
                        && e["ts"] == f["ts"]
                })
                .unwrap_or_else(|| panic!("no packet row under {f}"));
            assert_eq!(barrier["name"], "barrier_and", "{barrier}");
            let a = &barrier["args"];
            let slot = (
                hex(&a["queue"]).unwrap(),
                a["write_index"].as_u64().unwrap(),
            );
            (wait["args"]["correlation"].as_u64().unwrap(), slot)
        })
        .collect();
    links.sort();
    links.into_iter().map(|(_, slot)| slot).collect()
}

/// What the runtime's log says each stream wait submitted, in order: its barriers that
/// wait on a signal (a record's barrier waits on none), (queue, write index).
fn logged_wait_barriers(dir: &TempDir) -> Vec<(u64, u64)> {
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    std::fs::read_to_string(dir.path("packets.log"))
        .unwrap()
        .lines()
        .map(|l| l.split(' ').collect::<Vec<_>>())
        .filter(|f| hex(f[4]) != 0)
        .map(|f| (hex(f[1]), f[2].parse().unwrap()))
        .collect()
}

#[test]
fn a_trace_on_request_has_the_packets_an_attach_has() {
    let name = "a_trace_on_request_has_the_packets_an_attach_has";
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    // The daemon's: a trace asked for the process before it calls.
    let (daemon, mut lines, mut target, _) = tracked_over_hsa(&dir, &["cross", "20"]);
    let pid = target.child.id().to_string();
    let asked = rocsync()
        .args(["trace", "--pid", &pid, "--duration", "1500ms", "--socket"])
        .arg(dir.path("rocsync.sock"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    lines.wait_for(&format!("recording pid(s) [{pid}]"));
    target.open();
    assert!(target.child.wait().unwrap().success());
    let asked = asked.wait_with_output().unwrap();
    assert_ok(&asked);
    stop(daemon);
    // `attach`'s: the same scenario, loaded and held until attach traces it, the daemon
    // gone.
    let ran = TempDir::new();
    let attach_trace = ran.path("attach.json");
    let mut held = Gated::start_at(
        over_hsa(
            Command::new(rocsync_tests::scenario_dlopen()).args(["loaded", "cross", "20"]),
            &ran,
        ),
        "loaded",
    );
    let mut tracer = spawn_piped(
        rocsync()
            .args(["attach", "--no-status", "-o"])
            .arg(&attach_trace)
            .arg("--pid")
            .arg(held.child.id().to_string()),
    );
    let mut said = Lines::of(tracer.stderr.take().unwrap());
    said.wait_for("tracing pid");
    held.open();
    assert!(held.child.wait().unwrap().success());
    assert!(tracer.wait().unwrap().success(), "{:?}", said.all());
    let daemon_trace = read_json(std::path::Path::new(
        String::from_utf8(asked.stdout).unwrap().trim(),
    ));
    let attach_trace = read_json(&attach_trace);
    // The same packets by kind and agent, and counts — and what the runtime says it
    // published.
    let rows = packet_rows(&daemon_trace);
    assert_eq!(rows, packet_rows(&attach_trace));
    assert_eq!(
        daemon_trace["rocsync"]["packets"],
        attach_trace["rocsync"]["packets"]
    );
    let (barriers, kernels) = published(&dir);
    let of = |kind: &str| -> usize {
        rows.iter()
            .filter(|((k, _), _)| k == &format!("\"{kind}\""))
            .map(|(_, n)| n)
            .sum()
    };
    assert_eq!(
        (of("barrier_and"), of("kernel_dispatch")),
        (barriers.len(), kernels)
    );
    // The same barrier links, pair by pair: the k-th wait links to the barrier the
    // runtime says the k-th wait submitted, in each run (queues are heap addresses of
    // their run; write indexes are the same in both).
    let (by_daemon, by_attach) = (wait_links(&daemon_trace), wait_links(&attach_trace));
    assert_eq!(by_daemon.len(), 20, "one link per wait: {by_daemon:?}");
    assert_eq!(by_daemon, logged_wait_barriers(&dir));
    assert_eq!(by_attach, logged_wait_barriers(&ran));
    let index = |links: &[(u64, u64)]| links.iter().map(|l| l.1).collect::<Vec<_>>();
    assert_eq!(index(&by_daemon), index(&by_attach));
}

#[test]
fn a_queue_made_before_a_trace_places_its_packets() {
    let name = "a_queue_made_before_a_trace_places_its_packets";
    let Some((dir, _, python)) = metrics_test(name) else {
        return;
    };
    // Long enough that the trace is asked while it loops, however slowly the scrapes
    // below come on a loaded machine (4 s was not, once, under load on 4 test threads).
    let (daemon, _, mut target, addr) = tracked_over_hsa(&dir, &["loop", "12000"]);
    target.open();
    target.said.wait_for("looping");
    // Packets counted: the loop's queue exists, made while nothing recorded.
    let start = Instant::now();
    while counted(&Metrics::scrape(&python, &addr), "barrier_and").0 == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no packet counted"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = target.child.id().to_string();
    let file = ask_daemon(
        &dir.path("rocsync.sock"),
        &["trace", "--pid", &pid, "--duration", "300ms"],
    );
    assert!(target.child.wait().unwrap().success());
    stop(daemon);
    let t = read_json(std::path::Path::new(file.trim()));
    assert_eq!(
        t["rocsync"]["drops"]["packets_unknown_queue"], 0,
        "{}",
        t["rocsync"]
    );
    let packets: Vec<&Value> = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "hsa_packet")
        .collect();
    assert!(!packets.is_empty());
    // Each on the queue's agent, and one the runtime published.
    let (barriers, _) = published(&dir);
    for p in &packets {
        assert_eq!(p["args"]["agent"], 0, "{p}");
        if p["name"] == "barrier_and" {
            let queue = u64::from_str_radix(
                p["args"]["queue"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches("0x"),
                16,
            )
            .unwrap();
            let index = p["args"]["write_index"].as_u64().unwrap();
            assert!(barriers.contains(&(queue, index)), "{p}");
        }
    }
}
