//! The HSA write path in the daemon: packets counted per agent and kind while nothing
//! records, against the simulated runtime's own account of what it published; a trace on
//! request holds the packets a `rocsync run` of the same scenario holds; a queue made
//! before a trace began still places the trace's packets; under `HIP_VISIBLE_DEVICES`,
//! packets are counted on the HIP device the scenario's threads chose; the flight
//! recorder holds every packet published. Needs root.

use std::{
    collections::BTreeMap,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use rocsync_tests::sim_hip_over_hsa;
use serde_json::Value;

use crate::common::{daemon::*, *};

/// `cmd` over the simulated HSA runtime, its logs in `dir`.
fn over_hsa<'a>(cmd: &'a mut Command, dir: &TempDir) -> &'a mut Command {
    cmd.env("SCENARIO_HIP", sim_hip_over_hsa())
        .env("SCENARIO_LOG", dir.path("s.log"))
        .env("HIP_SIM_PACKET_LOG", dir.path("packets.log"))
        .env("HIP_SIM_KERNEL_COUNT", dir.path("kernels"))
}

/// A daemon counting the scenario `mode` over HSA (its own copy, its logs in `dir`), the
/// scenario loaded and held until the daemon tracks it and has its HSA runtime probed
/// (its queues and packets are seen from its first); the metrics address.
fn tracked_over_hsa(dir: &TempDir, mode: &[&str]) -> (Daemon, Lines, Gated, String) {
    tracked_over_hsa_with(dir, mode, &[], &[])
}

/// [`tracked_over_hsa`] with more environment, and more daemon flags.
fn tracked_over_hsa_with(
    dir: &TempDir,
    mode: &[&str],
    env: &[(&str, &str)],
    flags: &[&str],
) -> (Daemon, Lines, Gated, String) {
    let exe = own_copy_dlopen(dir);
    let (daemon, mut lines) = start_daemon(dir, &exe, flags);
    let addr = metrics_addr(&lines);
    let target = Gated::start_at(
        over_hsa(Command::new(&exe).arg("loaded").args(mode), dir).envs(env.iter().copied()),
        "loaded",
    );
    let pid = target.child.id();
    lines.wait_for_all(&[&format!("tracking pid {pid}"), "(HSA queues and doorbells)"]);
    (daemon, lines, target, addr)
}

/// What the simulated runtime says it published: its barriers' (queue, write index), and
/// how many kernels.
fn published(dir: &TempDir) -> (Vec<(u64, u64)>, usize) {
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    let barriers = std::fs::read_to_string(dir.path("packets.log"))
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (hex(f[1]), f[2].parse().unwrap())
        })
        .collect();
    // Written once a kernel was published: a scenario that launches none has no file.
    let kernels =
        std::fs::read_to_string(dir.path("kernels")).map_or(0, |n| n.trim().parse().unwrap());
    (barriers, kernels)
}

/// A trace's packet rows: (kind, agent) → how many.
fn packet_rows(t: &Value) -> BTreeMap<(String, String), usize> {
    let mut rows = BTreeMap::new();
    for e in t["traceEvents"].as_array().unwrap() {
        if e["cat"] == "hsa_packet" {
            let key = (e["name"].to_string(), e["args"]["agent"].to_string());
            *rows.entry(key).or_default() += 1;
        }
    }
    rows
}

/// The `aql_packets_total` samples of one kind, summed over agents, and the agents seen.
fn counted(m: &Metrics, kind: &str) -> (usize, Vec<String>) {
    let samples: Vec<_> = m
        .samples
        .iter()
        .filter(|(n, l, _)| n == "rocsync_aql_packets_total" && l["kind"] == kind)
        .collect();
    let devices = samples
        .iter()
        .map(|(_, l, _)| l["device"].as_str().unwrap().to_string())
        .collect();
    (samples.iter().map(|s| s.2 as usize).sum(), devices)
}

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

#[test]
fn a_trace_on_request_has_the_packets_a_capture_has() {
    let name = "a_trace_on_request_has_the_packets_a_capture_has";
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
    assert!(asked.status.success());
    stop(daemon);
    // The capture's: `rocsync run` of the scenario, the daemon gone.
    let ran = TempDir::new();
    let run_trace = ran.path("run.json");
    run_ok(
        over_hsa(rocsync().args(["run", "--no-status", "-o"]), &ran)
            .arg(&run_trace)
            .arg("--")
            .arg(rocsync_tests::scenario_dlopen())
            .args(["cross", "20"]),
    );
    let daemon_trace = read_json(std::path::Path::new(
        String::from_utf8(asked.stdout).unwrap().trim(),
    ));
    let run_trace = read_json(&run_trace);
    // The same packets by kind and agent, the same barrier links and counts — and what
    // the runtime says it published.
    let rows = packet_rows(&daemon_trace);
    assert_eq!(rows, packet_rows(&run_trace));
    let flows = |t: &Value| {
        t["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["cat"] == "hip_barrier" && e["ph"] == "s")
            .count()
    };
    assert_eq!(flows(&daemon_trace), flows(&run_trace));
    assert_eq!(
        daemon_trace["rocsync"]["packets"],
        run_trace["rocsync"]["packets"]
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
    assert_eq!(flows(&daemon_trace), barriers.len() / 2, "one per wait");
}

#[test]
fn a_queue_made_before_a_trace_places_its_packets() {
    let name = "a_queue_made_before_a_trace_places_its_packets";
    let Some((dir, _, python)) = metrics_test(name) else {
        return;
    };
    let (daemon, _, mut target, addr) = tracked_over_hsa(&dir, &["loop", "4000"]);
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
