//! A daemon trace with `--agents 0` of a process on two GPUs, against the simulated
//! runtime's log of every packet: every packet of agent 0 and none of agent 1, with or
//! without the flight recorder (which keeps every agent in the kernel); the packets it
//! leaves out still counted in `/metrics` on their device, exactly as logged; and its
//! account (`packets`, `filtered_by_agents`) as a `rocsync run --agents 0` of the same
//! scenario gives. Needs root.

use std::{collections::BTreeMap, path::Path, process::Stdio};

use crate::common::{daemon::*, daemon_hsa::*, packets::*, *};

/// Device 0's thread launches and records; a thread on device 1 waits on that record,
/// then records its own. The runtime enumerated its agents when it was loaded, before the
/// daemon tracked it: the daemon numbers agents by their first queue (as `attach` does,
/// docs/how-it-works.md), and device 0's queue is made first here.
const MODE: [&str; 1] = ["agents"];

#[test]
fn a_trace_of_agent_0_has_its_packets_and_none_of_agent_1() {
    check_agent_0(
        "a_trace_of_agent_0_has_its_packets_and_none_of_agent_1",
        &[],
    );
}

#[test]
fn a_trace_of_agent_0_beside_the_flight_recorder_has_none_of_agent_1() {
    check_agent_0(
        "a_trace_of_agent_0_beside_the_flight_recorder_has_none_of_agent_1",
        &["--flight-recorder", "10s"],
    );
}

fn check_agent_0(name: &str, flags: &[&str]) {
    let Some((dir, _, python)) = metrics_test(name) else {
        return;
    };
    let (daemon, mut lines, mut target, addr) = tracked_over_hsa_with(&dir, &MODE, &[], flags);
    let pid = target.child.id().to_string();
    let asked = rocsync()
        .args([
            "trace",
            "--pid",
            &pid,
            "--agents",
            "0",
            "--duration",
            "1500ms",
        ])
        .arg("--socket")
        .arg(dir.path("rocsync.sock"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    lines.wait_for(&format!("recording pid(s) [{pid}]"));
    target.open();
    assert!(target.child.wait().unwrap().success());
    let asked = asked.wait_with_output().unwrap();
    assert_ok(&asked);
    // The log says the span asked, and whose summary it prints.
    lines.wait_for_all(&[": captured "]);
    let said = |needle: &str| lines.1.iter().find(|l| l.contains(needle)).cloned();
    let recording = said(&format!("recording pid(s) [{pid}]")).unwrap();
    assert!(recording.ends_with(" for 1500ms"), "{recording}");
    let summary = said(": captured ").unwrap();
    assert!(summary.contains("rocsync daemon: trace "), "{summary}");
    let m = Metrics::scrape(&python, &addr);
    stop(daemon);
    let t = read_json(Path::new(String::from_utf8(asked.stdout).unwrap().trim()));
    let logged = read_every_packet_log(&dir.path("every.log"));
    let on = |d: u64| logged.iter().filter(|p| p.device == d).count();
    assert!(on(0) > 0 && on(1) > 0, "both devices publish");
    // The whole run lies in the trace: every packet of agent 0, none of agent 1.
    let rows = assert_packets_of_log(&t, &logged, (i64::MIN, i64::MAX), Agents::Known, |d| d == 0);
    assert_eq!(rows.len(), on(0));
    // Those it left out are counted all the same, on their device.
    let want: BTreeMap<String, usize> = [("0".to_string(), on(0)), ("1".to_string(), on(1))]
        .into_iter()
        .collect();
    assert_eq!(counted_by_device(&m), want);
    // Its account is a capture's of the same scenario on the same agent (a capture does
    // not count the packets it filters: neither does the trace).
    let ran = TempDir::new();
    let out = ran.path("run.json");
    run_ok(
        over_hsa(
            rocsync().args(["run", "--no-status", "--agents", "0", "-o"]),
            &ran,
        )
        .arg(&out)
        .arg("--")
        .arg(rocsync_tests::scenario_dlopen())
        .args(MODE),
    );
    let run = read_json(&out);
    for key in ["packets", "filtered_by_agents", "calls_per_api"] {
        assert_eq!(t["rocsync"][key], run["rocsync"][key], "{key}");
    }
    assert_eq!(packet_rows(&t), packet_rows(&run));
}
