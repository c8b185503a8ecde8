//! What `run` and `attach` say matches what happened (issue 64, "messages"): a runtime
//! `--backend` left out is named (by both), a collective library with a symbol table is not called
//! stripped, `attach --wait` on a process that never loads a runtime fails with no trace,
//! and bash completes a pid option with process ids. Tracing needs root.

use std::{
    io::Write as _,
    process::{Command, Stdio},
    time::Duration,
};

use crate::common::*;
use rocsync_tests::{nccl_ranks_cuda, scenario, sim_hip};

#[test]
fn a_runtime_the_backend_left_out_is_named() {
    if !can_trace("a_runtime_the_backend_left_out_is_named") {
        return;
    }
    let dir = TempDir::new();
    let out = run_ok(
        rocsync()
            .args(["run", "--no-status", "--backend", "cuda", "-o"])
            .arg(dir.path("t.json"))
            .arg("--")
            .arg(scenario())
            .arg("basic")
            .env("SCENARIO_LOG", dir.path("s.log"))
            .env("SCENARIO_HIP", sim_hip()),
    );
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains("mapped libamdhip64 (--backend hip), which --backend cuda left out"),
        "{stderr}"
    );
    assert!(!stderr.contains("never mapped"), "{stderr}");
}

/// `attach` says it too, of a live process that mapped the HIP runtime alone: no trace,
/// and what to do (not "has no libcudart mapped").
#[test]
fn attach_names_the_runtime_the_backend_left_out() {
    if !can_trace("attach_names_the_runtime_the_backend_left_out") {
        return;
    }
    let dir = TempDir::new();
    // The simulated HIP runtime loaded, nothing called until its input ends.
    let mut target = Gated::start_at(
        Command::new(scenario())
            .args(["loaded", "basic"])
            .env("SCENARIO_LOG", dir.path("s.log"))
            .env("SCENARIO_HIP", sim_hip()),
        "loaded",
    );
    let pid = target.child.id();
    let trace = dir.path("t.json");
    let out = rocsync()
        .args(["attach", "--no-status", "--backend", "cuda", "-p"])
        .arg(pid.to_string())
        .arg("-o")
        .arg(&trace)
        .output()
        .unwrap();
    target.child.end();
    let stderr = tool_stderr(&out);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "process {pid} maps libamdhip64 (--backend hip), which --backend cuda left out"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("drop --backend"), "{stderr}");
    assert!(!stderr.contains("no libcudart"), "{stderr}");
    assert!(!trace.exists(), "{stderr}");
}

#[test]
fn a_collective_library_with_a_symbol_table_is_not_called_stripped() {
    if !can_trace("a_collective_library_with_a_symbol_table_is_not_called_stripped") {
        return;
    }
    let dir = TempDir::new();
    // One rank, two all-reduces, over a libnccl.so.2 of nccl.h's exports alone (built
    // with its symbol table): it carries no libcudart.
    let out = run_ok(
        rocsync()
            .args(["run", "--no-status", "-o"])
            .arg(dir.path("t.json"))
            .arg("--")
            .arg(nccl_ranks_cuda())
            .args(["1", "2", "0", "99", "0"]),
    );
    let stderr = stderr_of(&out);
    assert!(stderr.contains("libnccl.so.2"), "{stderr}");
    assert!(!stderr.contains("stripped"), "{stderr}");
}

#[test]
fn attach_wait_on_a_process_that_never_loads_a_runtime_fails_with_no_trace() {
    if !can_trace("attach_wait_on_a_process_that_never_loads_a_runtime_fails_with_no_trace") {
        return;
    }
    let dir = TempDir::new();
    // A process that maps no runtime and ends when its input does.
    let mut target = Reaped(
        Command::new("sh")
            .args(["-c", "read line"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let trace = dir.path("t.json");
    let logs = TempDir::new();
    let log = logs.path("stderr");
    let mut tracer = Reaped(
        rocsync()
            .args(["attach", "--no-status", "--wait", "-p"])
            .arg(target.id().to_string())
            .arg("-o")
            .arg(&trace)
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let said = || std::fs::read_to_string(&log).unwrap_or_default();
    let start = std::time::Instant::now();
    while !said().contains("tracing pid") {
        assert!(start.elapsed() < Duration::from_secs(30), "{}", said());
        std::thread::sleep(Duration::from_millis(20));
    }
    target.stdin.take().unwrap().write_all(b"done\n").unwrap();
    let status = wait_within(&mut tracer, Duration::from_secs(30), "rocsync attach");
    let said = said();
    assert!(!status.success(), "{said}");
    assert!(said.contains("never loaded"), "{said}");
    assert!(said.contains("no trace was written"), "{said}");
    assert!(!trace.exists(), "{said}");
    let left: Vec<_> = std::fs::read_dir(dir.0.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn bash_completes_a_pid_option_with_process_ids() {
    let dir = TempDir::new();
    run_ok(
        Command::new(env!("CARGO_BIN_EXE_rocsync"))
            .args(["generate", "completions"])
            .arg(dir.path("completions")),
    );
    // A file where the completion runs: offering it would be offering files.
    std::fs::write(dir.path("a-file"), "").unwrap();
    let me = std::process::id().to_string();
    for words in [
        "rocsync attach -p",
        "rocsync attach --pid",
        "rocsync trace -p",
    ] {
        let script = format!(
            "source completions/rocsync.bash; COMP_WORDS=({words} ''); \
             COMP_CWORD=${{#COMP_WORDS[@]}}; COMP_CWORD=$((COMP_CWORD-1)); \
             _rocsync rocsync '' \"${{COMP_WORDS[COMP_CWORD-1]}}\" 2>/dev/null; \
             printf '%s\\n' \"${{COMPREPLY[@]}}\""
        );
        let out = run_ok(
            Command::new("bash")
                .args(["--norc", "-c", &script])
                .current_dir(dir.0.path()),
        );
        let offered = String::from_utf8_lossy(&out.stdout);
        let offered: Vec<&str> = offered.lines().collect();
        assert!(offered.contains(&me.as_str()), "{words}: {offered:?}");
        assert!(!offered.contains(&"a-file"), "{words}: {offered:?}");
        assert!(
            offered.iter().all(|w| w.parse::<u32>().is_ok()),
            "{words}: {offered:?}"
        );
    }
}
