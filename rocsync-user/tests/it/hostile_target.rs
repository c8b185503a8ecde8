//! A hostile target: in its own mount namespace (a container's root), it bind-mounts a
//! FIFO over the runtime library it has mapped. rocsync must not open the FIFO (which
//! would block it forever) nor anything else at that path: it reads and probes the file
//! actually mapped, through /proc/PID/map_files. Needs root (eBPF, namespaces).

use std::{
    io::{BufRead as _, BufReader, Write as _},
    process::{Command, Stdio},
    time::Duration,
};

use crate::common::*;

#[test]
fn a_fifo_mounted_over_the_mapped_library_is_never_opened() {
    if !can_trace("a_fifo_mounted_over_the_mapped_library_is_never_opened") {
        return;
    }
    let dir = TempDir::new();
    let lib = dir.path("libamdhip64.so");
    std::fs::copy(rocsync_tests::sim_hip(), &lib).unwrap();
    let fifo = dir.path("fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let mut target = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "--"])
        .arg(rocsync_tests::scenario_dlopen())
        .arg("gated_device")
        .env("SCENARIO_HIP", &lib)
        .env("SCENARIO_LOG", dir.path("s.log"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(target.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    // unshare execs the scenario: same pid. Inside its namespace, the FIFO now sits at the
    // library's path; the mapping is still the real file.
    let pid = target.id().to_string();
    let mounted = Command::new("nsenter")
        .args(["-t", &pid, "-m", "mount", "--bind"])
        .arg(&fifo)
        .arg(&lib)
        .status()
        .unwrap();
    assert!(mounted.success());
    let trace = dir.path("t.json");
    let mut tracer = spawn_piped(
        rocsync()
            .args(["attach", "--no-status", "-o"])
            .arg(&trace)
            .args(["--pid", &pid]),
    );
    let lines = wait_for_line(&mut tracer, "tracing pid", Duration::from_secs(20));
    assert!(
        lines
            .iter()
            .any(|l| l.contains("attached to") && l.contains("libamdhip64.so")),
        "{lines:#?}"
    );
    let mut gate = target.stdin.take().unwrap();
    gate.write_all(b"go\n").unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    gate.write_all(b"go\n").unwrap();
    assert!(target.wait().unwrap().success());
    assert!(tracer.wait().unwrap().success());
    // Traced through the real file: every call logged after the attach is its row (the
    // device set and the stream made before it are not).
    let logged = rocsync_tests::read_log(&dir.path("s.log"));
    let before: Vec<&str> = logged[..2].iter().map(|l| l.api.as_str()).collect();
    assert_eq!(before, ["hipSetDevice", "hipStreamCreate"]);
    assert_rows_match_log(&read_json(&trace), None, &logged[2..]);
}
