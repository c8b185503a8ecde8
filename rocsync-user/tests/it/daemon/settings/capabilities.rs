//! The daemon needs only the capabilities its systemd unit grants: run as uid 0 with the
//! unit's `CapabilityBoundingSet` alone (read from `dist/rocsync.service`, so unit and
//! test cannot drift apart), it finds a process of another user, counts exactly the calls
//! its log holds, records a trace on request, and gives its socket to a group. Needs
//! root, `setpriv`, and `ROCSYNC_HTA_PYTHON` (`cargo xtask test` sets it).

use std::{path::Path, process::Command};

use crate::common::{daemon::*, *};

/// The unit's capabilities, as `setpriv --bounding-set` names them (`+bpf,+perfmon,…`).
fn unit_capabilities() -> String {
    let unit = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../dist/rocsync.service"),
    )
    .unwrap();
    let line = unit
        .lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .expect("the unit bounds its capabilities");
    line.split_whitespace()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn the_units_capabilities_are_enough() {
    let name = "the_units_capabilities_are_enough";
    let Some((dir, exe, python)) = metrics_test(name) else {
        return;
    };
    // The test's files readable by the target's user (nobody).
    std::fs::set_permissions(
        dir.path(""),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let caps = format!("-all,{}", unit_capabilities());
    let daemon = daemon_command(&dir, &exe, &["--group", "65534"]);
    let mut daemon = Daemon(spawn_piped(
        Command::new("setpriv")
            .args(["--bounding-set", &caps, "--inh-caps", "-all", "--"])
            .arg(daemon.get_program())
            .args(daemon.get_args()),
    ));
    let mut lines = Lines::of(daemon.stderr.take().unwrap());
    lines.wait_for("SIGTERM stops");
    // Running with the unit's set and nothing else: no CAP_DAC_OVERRIDE (1), CAP_KILL (5).
    let status = std::fs::read_to_string(format!("/proc/{}/status", daemon.id())).unwrap();
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .unwrap()
        .trim();
    assert_eq!(
        u64::from_str_radix(eff, 16).unwrap() & (1 << 1 | 1 << 5),
        0,
        "{eff}"
    );
    assert!(
        !lines.1.iter().any(|l| l.contains("warning")),
        "{:#?}",
        lines.1
    );

    let home = dir.path("nobody");
    std::fs::create_dir(&home).unwrap();
    std::os::unix::fs::chown(&home, Some(65534), Some(65534)).unwrap();
    let log = home.join("s.log");
    let mut target = Gated::start(
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(&exe)
            .args(["gated", "loop", "5000"])
            .env("SCENARIO_LOG", &log),
    );
    target.open_when_tracked(&mut lines);
    target.said.wait_for("looping");
    let traced = ask_daemon(
        &dir.path("rocsync.sock"),
        &["trace", "--duration", "300ms", "--all"],
    );
    assert!(target.child.wait().unwrap().success());
    let m = Metrics::scrape(&python, &metrics_addr(&lines));
    stop(daemon);

    let logged = probed(&rocsync_tests::read_log(&log));
    let syncs = logged
        .iter()
        .filter(|l| l.api == "hipStreamSynchronize")
        .count();
    assert!(syncs > 100);
    assert_eq!(
        m.sum("rocsync_sync_calls_total", "hipStreamSynchronize"),
        syncs
    );
    let file = traced.trim().to_string();
    let t = read_json(Path::new(&file));
    assert!(
        t["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "hipStreamSynchronize")
    );
    let sock = std::fs::metadata(dir.path("rocsync.sock"));
    assert!(sock.is_err(), "the socket is removed at exit");
}
