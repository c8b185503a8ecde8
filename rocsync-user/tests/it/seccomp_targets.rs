//! A target under a seccomp filter that kills at the `uretprobe` system call (as a
//! container's default profile may): where this kernel lets a probed return through
//! (doctor: "returns under seccomp  safe"), it is traced exactly and lives; where it
//! does not, rocsync refuses to probe it. Needs root.

use std::process::Command;

use crate::common::*;
use rocsync_tests::{read_log, scenario, seccomp_run, sim_hip};

/// doctor's answer: whether a probed return is safe under seccomp on this kernel.
fn returns_safe() -> bool {
    let out = rocsync().args(["doctor", "--json"]).output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["what"] == "returns under seccomp")
        .unwrap_or_else(|| panic!("no seccomp row: {report:#}"))
        .clone();
    assert_ne!(row["status"], "unknown", "the check was not made: {row}");
    row["found"] == "safe"
}

#[test]
fn a_target_under_seccomp_lives_through_its_probed_returns() {
    let name = "a_target_under_seccomp_lives_through_its_probed_returns";
    if !can_trace(name) {
        return;
    }
    let dir = TempDir::new();
    let (log, raw) = (dir.path("scenario.log"), dir.path("calls.jsonl"));
    let out = rocsync()
        .args(["run", "--raw"])
        .arg(&raw)
        .arg("--")
        .arg(seccomp_run())
        .arg(scenario())
        .arg("basic")
        .env("SCENARIO_LOG", &log)
        .env("SCENARIO_HIP", sim_hip())
        .output()
        .unwrap();
    let stderr = stderr_of(&out);
    if returns_safe() {
        // Every call's return was probed, and the target returned from each.
        assert_ok(&out);
        let (_, calls) = read_raw(&raw);
        assert_same_calls(&read_log(&log), calls);
    } else {
        assert!(stderr.contains("runs under a seccomp filter"), "{stderr}");
        assert!(out.status.success(), "the target ran unprobed: {stderr}");
    }
}

#[test]
fn attach_to_a_target_under_seccomp_probes_it_only_where_it_lives() {
    let name = "attach_to_a_target_under_seccomp_probes_it_only_where_it_lives";
    if !can_trace(name) {
        return;
    }
    let dir = TempDir::new();
    let mut target = spawn_ready(
        Command::new(seccomp_run())
            .arg(scenario())
            .args(["gated", "basic"])
            .env("SCENARIO_LOG", dir.path("scenario.log"))
            .env("SCENARIO_HIP", sim_hip())
            .stdin(std::process::Stdio::piped()),
    );
    let status = std::fs::read_to_string(format!("/proc/{}/status", target.id())).unwrap();
    assert!(status.contains("Seccomp:\t2"), "{status}");
    if returns_safe() {
        let raw = dir.path("calls.jsonl");
        let mut tracer = attach_and_start(&mut target, &raw);
        assert!(target.wait().unwrap().success(), "the target died");
        assert!(tracer.wait().unwrap().success());
        let (_, mut calls) = read_raw(&raw);
        // attach probes hipGetDevice for a while to learn devices; the default set does not.
        calls.retain(|c| c.api != "hipGetDevice");
        assert_same_calls(&read_log(&dir.path("scenario.log")), calls);
    } else {
        let out = rocsync()
            .args(["attach", "-p", &target.id().to_string()])
            .output()
            .unwrap();
        assert!(!out.status.success());
        let stderr = stderr_of(&out);
        assert!(stderr.contains("runs under a seccomp filter"), "{stderr}");
        let _ = target.kill();
        let _ = target.wait();
    }
}
