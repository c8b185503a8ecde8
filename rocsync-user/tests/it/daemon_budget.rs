//! The daemon's budget: a process polling `hipEventQuery` flat out has that probe shed
//! (metrics, the log and an overlapping trace say so), its records and waits are counted
//! exactly all along (against the scenario's log), and the probe comes back once the
//! polling stops. Needs root.

use std::{path::Path, process::Command};

use rocsync_tests::read_log;

use crate::common::{daemon::*, *};

const SHED: &str = "rocsync_probes_shed{api=\"hipEventQuery\"}";

#[test]
fn polling_is_shed_over_the_budget_and_records_and_waits_are_never() {
    let name = "polling_is_shed_over_the_budget_and_records_and_waits_are_never";
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    let exe = own_copy(&dir);
    let (daemon, mut lines) = start_daemon(&dir, &exe, &["--budget", "1%"]);
    let addr = metrics_addr(&lines);
    lines.wait_for_all(&["a probed call costs "]);
    // `/` links what the daemon serves and says what it is (as `rocsync --version`).
    let index = get(&addr, "/");
    assert!(index.contains("href=\"/metrics\"") && index.contains("href=\"/healthz\""));
    let version = rocsync().arg("--version").output().unwrap().stdout;
    let version = String::from_utf8(version).unwrap();
    let commit = version
        .split("(commit ")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap();
    assert!(index.contains(commit), "{index}");
    assert_eq!(
        metric(
            &addr,
            &format!(
                "rocsync_build_info{{version=\"{}\",commit=\"{commit}\"}}",
                env!("CARGO_PKG_VERSION")
            )
        ),
        1.0
    );
    assert_eq!(metric(&addr, "rocsync_budget_ratio"), 0.01);

    let log = dir.path("poll.log");
    let mut target = Gated::start(Command::new(&exe).arg("poll").env("SCENARIO_LOG", &log));
    let pid = target.child.id();
    target.open_when_tracked(&mut lines);
    assert_eq!(metric(&addr, SHED), 0.0, "shed before any polling");

    // Polling: the probe comes off, and the daemon says why.
    until(30, "hipEventQuery was never shed", || {
        metric(&addr, SHED) == 1.0
    });
    lines.wait_for_all(&[
        &format!("budget: pid {pid}'s probes cost "),
        "budget: hipEventQuery not probed in ",
    ]);
    assert!(metric(&addr, "rocsync_probe_cost_ratio") >= 0.0);

    // A trace now says what it does not hold, and from when.
    let sock = dir.path("rocsync.sock");
    let pid_arg = pid.to_string();
    let files = ask_daemon(&sock, &["trace", "--pid", &pid_arg, "--duration", "300ms"]);
    let t = read_json(Path::new(files.lines().next().unwrap()));
    let not = t["rocsync"]["parameters"]["not_recorded"]
        .as_array()
        .unwrap();
    assert!(
        not.iter()
            .any(|s| s["api"] == "hipEventQuery" && s["reason"] == "budget"),
        "{not:?}"
    );
    // No query row of the trace lies in the span it says was not probed.
    let span = not.iter().find(|s| s["api"] == "hipEventQuery").unwrap();
    let from = span["from_unix_us"].as_f64().unwrap();
    let to = span["until_unix_us"].as_f64().unwrap_or(f64::INFINITY);
    let base_us = t["baseTimeNanoseconds"].as_f64().unwrap() / 1e3;
    let inside: Vec<f64> = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "hipEventQuery")
        .map(|e| base_us + e["ts"].as_f64().unwrap())
        .filter(|&ts| ts > from + 1.0 && ts + 1.0 < to)
        .collect();
    assert!(inside.is_empty(), "query rows while not probed: {inside:?}");

    // The polling stops: the probe comes back (after its wait, doubled while it polled).
    target.open();
    target.said.wait_for("polled ");
    until(
        90,
        "hipEventQuery was not probed again after the polling stopped",
        || metric(&addr, SHED) == 0.0,
    );
    lines.wait_for_all(&["budget: hipEventQuery probed again in "]);
    target.open();
    assert!(target.child.wait().unwrap().success());

    // Records and waits were counted exactly, however the polls were shed.
    let logged = read_log(&log);
    for api in ["hipEventRecord", "hipStreamWaitEvent"] {
        let n = logged.iter().filter(|c| c.api == api).count();
        assert!(n > 0, "{api} never called");
        let counted = calls_counted(&addr, api);
        assert_eq!(counted, n as u64, "{api}: counted {counted}, logged {n}");
    }
    stop(daemon);
}
