//! Doorbells as they ring in real programs: out of order and before the packet is written
//! (several producers on one queue), and on queues created before rocsync attached. Needs
//! root (eBPF).

use std::collections::BTreeSet;

use crate::common::*;
use rocsync_tests::hsa_scenario;

/// Doorbells out of order and before their packet is written (tests/c/hsa_scenario.c,
/// `out_of_order`): a packet still unwritten at a doorbell is read at the next one, a
/// packet consumed before any doorbell let it be read is counted, and the probes say so
/// under `-v` (aya-log) — and only under `-v`.
#[test]
fn unwritten_and_consumed_packets_are_read_later_or_counted_and_reported() {
    if !can_trace("unwritten_and_consumed_packets_are_read_later_or_counted_and_reported") {
        return;
    }
    for verbose in [true, false] {
        let dir = TempDir::new();
        let (log, out) = (dir.path("packets.log"), dir.path("trace.json"));
        let mut cmd = rocsync();
        cmd.args(["run", "--no-status", "-o"]).arg(&out);
        if verbose {
            cmd.arg("-v");
        }
        let run = run_ok(
            cmd.arg("--")
                .arg(hsa_scenario())
                .args(["2", "16"])
                .env("SCENARIO_OUT_OF_ORDER", "1")
                .env("SCENARIO_LOG", &log),
        );
        let logged: Vec<(u64, u64)> = std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("0 "))
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                (hex(f[1]), f[2].parse().unwrap())
            })
            .collect();
        // The last four agent-0 packets: B, A (both consumed unread), D, C.
        let n = logged.len();
        let (b, a) = (logged[n - 4], logged[n - 3]);
        let t = read_json(&out);
        let mut rows: Vec<(u64, u64)> = t["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["cat"] == "hsa_packet" && e["args"]["agent"] == 0)
            .map(|e| {
                let a = &e["args"];
                let q = hex(a["queue"].as_str().unwrap());
                (q, a["write_index"].as_u64().unwrap())
            })
            .collect();
        rows.sort();
        let mut want: Vec<_> = logged
            .iter()
            .filter(|p| **p != a && **p != b)
            .copied()
            .collect();
        want.sort();
        assert_eq!(rows, want, "C read at its second doorbell; A and B never");
        assert_eq!(t["rocsync"]["drops"]["packets_unread"], 2);
        let stderr = stderr_of(&run);
        let reported = stderr
            .lines()
            .filter(|l| l.starts_with("rocsync: probe warn:") && l.contains("not written when"))
            .count();
        if verbose {
            assert_eq!(reported, 2, "A at B's doorbell, C at its first: {stderr}");
            assert!(
                stderr.contains(&format!("packet {} not written", a.1)),
                "{stderr}"
            );
        } else {
            assert!(!stderr.contains("rocsync: probe"), "{stderr}");
        }
        assert!(stderr.contains("packets_unread 2"), "{stderr}");
    }
}

/// `attach` to a process whose queues exist already: each is found at its first doorbell
/// (its `amd_signal_t` is a doorbell leading to the queue), and every packet published
/// after the attach is traced, on a GPU process that says its agent is unknown.
#[test]
fn queues_created_before_attach_are_found_at_their_doorbells() {
    if !can_trace("queues_created_before_attach_are_found_at_their_doorbells") {
        return;
    }
    let dir = TempDir::new();
    let (log, out) = (dir.path("packets.log"), dir.path("trace.json"));
    let mut target = std::process::Command::new(hsa_scenario())
        .args(["12", "16"])
        .env("SCENARIO_GATE", "2")
        .env("SCENARIO_LOG", &log)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    Lines::of(target.stdout.take().unwrap()).wait_for("ready");
    let before = std::fs::read_to_string(&log).unwrap().lines().count();
    assert_eq!(before, 6, "two iterations published before the attach");
    let mut tracer = spawn_piped(
        rocsync()
            .args(["attach", "--no-status", "-o"])
            .arg(&out)
            .arg("--pid")
            .arg(target.id().to_string()),
    );
    let mut lines = Lines::of(tracer.stderr.take().unwrap());
    lines.wait_for("tracing pid");
    use std::io::Write as _;
    target.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(target.wait().unwrap().success());
    assert!(tracer.wait().unwrap().success());
    let stderr = lines.all().join("\n");
    let logged: BTreeSet<(u64, u64)> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .skip(before)
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (hex(f[1]), f[2].parse().unwrap())
        })
        .collect();
    let t = read_json(&out);
    let rows: Vec<&serde_json::Value> = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "hsa_packet")
        .collect();
    let got: BTreeSet<(u64, u64)> = rows
        .iter()
        .map(|e| {
            let a = &e["args"];
            (
                hex(a["queue"].as_str().unwrap()),
                a["write_index"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(rows.len(), got.len(), "each packet once");
    assert_eq!(
        got, logged,
        "every packet published after the attach: {stderr}"
    );
    assert_eq!(t["rocsync"]["queues_discovered"], 2);
    assert!(rows.iter().all(|e| e["args"]["agent"].is_null()));
    let unknown = rows[0]["pid"].clone();
    assert!(rows.iter().all(|e| e["pid"] == unknown));
    assert!(
        names_process(&t, &unknown, "GPU (agent unknown)"),
        "the GPU process says its agent is unknown"
    );
}

/// An attach in the middle of the agents' enumeration (held after its first GPU agent):
/// the enumeration was not seen from its start, so it numbers nothing (the second GPU
/// would be numbered 0); the agents are numbered by first queue, as the scenario made
/// them, and every packet row names the agent the scenario published it on.
#[test]
fn an_enumeration_caught_midway_numbers_no_agent() {
    if !can_trace("an_enumeration_caught_midway_numbers_no_agent") {
        return;
    }
    let dir = TempDir::new();
    let (log, out) = (dir.path("packets.log"), dir.path("trace.json"));
    let mut target = Gated::start_at(
        std::process::Command::new(hsa_scenario())
            .args(["6", "16"])
            .env("SCENARIO_ENUM_GATE", "1")
            .env("SCENARIO_LOG", &log),
        "enumerating",
    );
    let mut tracer = spawn_piped(
        rocsync()
            .args(["attach", "--no-status", "-o"])
            .arg(&out)
            .arg("--pid")
            .arg(target.child.id().to_string()),
    );
    let mut lines = Lines::of(tracer.stderr.take().unwrap());
    lines.wait_for("tracing pid");
    target.open();
    assert!(target.child.wait().unwrap().success());
    assert!(tracer.wait().unwrap().success(), "{:?}", lines.all());
    // The scenario's log: agent queue index … per packet.
    let logged: BTreeSet<(i64, u64, u64)> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[0].parse().unwrap(), hex(f[1]), f[2].parse().unwrap())
        })
        .collect();
    let t = read_json(&out);
    let got: BTreeSet<(i64, u64, u64)> = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "hsa_packet")
        .map(|e| {
            let a = &e["args"];
            (
                a["agent"].as_i64().expect("an agent numbered"),
                hex(a["queue"].as_str().unwrap()),
                a["write_index"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, logged);
}
