//! `run --duration D`: the trace ends after D while the command goes on, untraced, to its
//! end; rocsync exits with its status. What the trace holds is the start of each thread's
//! log, in order, and none of the rest. `--learn-devices` is `attach`'s alone.

use std::time::{Duration, Instant};

use crate::common::*;

#[test]
fn run_traces_for_its_duration_and_the_command_goes_on() {
    if !can_trace("run_traces_for_its_duration_and_the_command_goes_on") {
        return;
    }
    let dir = TempDir::new();
    let (trace, raw, log) = (dir.path("t.json"), dir.path("c.jsonl"), dir.path("s.log"));
    let start = Instant::now();
    let out = rocsync()
        .args(["run", "--no-status", "--duration", "500ms", "-o"])
        .arg(&trace)
        .arg("--raw")
        .arg(&raw)
        .arg("--")
        .arg(rocsync_tests::scenario())
        .args(["loop", "2500"])
        .env("SCENARIO_LOG", &log)
        .output()
        .unwrap();
    let took = start.elapsed();
    let stderr = stderr_of(&out);
    assert_ok(&out);
    assert!(stderr.contains("goes on untraced"), "{stderr}");
    // The command ran its 2.5 s: rocsync waited for it.
    assert!(took >= Duration::from_millis(2500), "{took:?}");
    let logged = rocsync_tests::read_log(&log);
    let (_, captured) = read_raw(&raw);
    let held = assert_calls_within(&logged, captured);
    assert!(
        held > 0 && held < logged.len() / 2,
        "{held} of {}",
        logged.len()
    );
    let t = read_json(&trace);
    assert_eq!(t["rocsync"]["parameters"]["duration_s"], 0.5);
}

#[test]
fn learn_devices_is_an_attach_option_only() {
    let help = |cmd: &str| {
        let out = run_ok(rocsync().args([cmd, "--help"]));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(help("attach").contains("--learn-devices"));
    assert!(!help("run").contains("--learn-devices"));
    assert!(help("run").contains("--duration"));
}
