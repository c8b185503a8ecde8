//! Nothing lost or replaced by surprise (issue 36): an output that exists is refused
//! unless `--force`, before anything is traced; rocsync does not trace itself nor the
//! shell waiting for it; a capture of nothing says so.

use std::process::{Command, Stdio};

use crate::common::*;

const RAW: &str = concat!(
    r#"{"rocsync_raw":{"version":"0.1.0","clock_offset_ns":1700000000000000000,"command":["app"]}}"#,
    "\n",
    r#"{"api":"hipDeviceSynchronize","pid":9,"tid":9,"correlation":1,"enter_ns":1000,"exit_ns":2000,"ret":0,"args":{}}"#,
    "\n",
    r#"{"rocsync_raw_end":{}}"#,
    "\n"
);

/// `-o`/`--raw` naming a file that exists: refused, the file untouched, and — for `run`
/// — the command never started; with `--force` (`-f`) replaced.
#[test]
fn an_existing_output_is_refused_unless_forced() {
    let dir = TempDir::new();
    let raw = dir.path("c.jsonl");
    std::fs::write(&raw, RAW).unwrap();
    let old = dir.path("old.json");
    std::fs::write(&old, "keep me").unwrap();
    let says = "exists: add --force (-f) to replace it";
    // convert, named and default output.
    let out = rocsync()
        .arg("convert")
        .arg(&raw)
        .arg("-o")
        .arg(&old)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(tool_stderr(&out).contains(says), "{}", tool_stderr(&out));
    assert_eq!(std::fs::read_to_string(&old).unwrap(), "keep me");
    run_ok(rocsync().arg("convert").arg(&raw));
    let out = rocsync().arg("convert").arg(&raw).output().unwrap();
    assert!(
        tool_stderr(&out).contains(says),
        "the default name too: {}",
        tool_stderr(&out)
    );
    run_ok(
        rocsync()
            .arg("convert")
            .arg(&raw)
            .arg("-f")
            .arg("-o")
            .arg(&old),
    );
    assert_eq!(read_json(&old)["rocsync"]["calls"], 1);
    // trace: refused before the daemon is asked (none listens there).
    std::fs::write(&old, "keep me").unwrap();
    let out = rocsync()
        .args(["trace", "--all", "--socket", "/nonexistent/r.sock", "-o"])
        .arg(&old)
        .output()
        .unwrap();
    assert!(tool_stderr(&out).contains(says), "{}", tool_stderr(&out));
    if !can_trace("an_existing_output_is_refused_unless_forced") {
        return;
    }
    // run: -o or --raw existing; the command is not started.
    let marker = dir.path("started");
    let touch = format!("touch {}", marker.display());
    for flag in ["-o", "--raw"] {
        let out = rocsync()
            .args(["run", "--no-status", flag])
            .arg(&old)
            .args(["sh", "-c", &touch])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{flag}");
        assert!(
            tool_stderr(&out).contains(says),
            "{flag}: {}",
            tool_stderr(&out)
        );
        assert!(!marker.exists(), "{flag}: the command ran");
        assert_eq!(std::fs::read_to_string(&old).unwrap(), "keep me");
    }
    run_ok(
        rocsync()
            .args(["run", "--no-status", "--force", "-o"])
            .arg(&old)
            .args(["sh", "-c", &touch]),
    );
    assert!(marker.exists());
    // Replaced by this run's trace (of a command that calls no runtime).
    assert_eq!(read_json(&old)["rocsync"]["calls"], 0);
    // attach: refused before the process is looked at for a runtime.
    let sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let out = rocsync()
        .args(["attach", "-p", &sleeper.id().to_string(), "-o"])
        .arg(&old)
        .output()
        .unwrap();
    assert!(tool_stderr(&out).contains(says), "{}", tool_stderr(&out));
    // Several processes write <stem>_<pid>: one there already is refused too.
    let other = Command::new("sleep").arg("30").spawn().unwrap();
    let sibling = dir.path(&format!("multi_{}.json", other.id()));
    std::fs::write(&sibling, "keep me").unwrap();
    let out = rocsync()
        .args([
            "attach",
            "-p",
            &format!("{},{}", sleeper.id(), other.id()),
            "-o",
        ])
        .arg(dir.path("multi.json"))
        .output()
        .unwrap();
    let err = tool_stderr(&out);
    assert!(
        err.contains(says) && err.contains(sibling.to_str().unwrap()),
        "{err}"
    );
    for mut p in [sleeper, other] {
        p.end();
    }
}

/// `rocsync attach -p $$` from a shell: the shell waits for rocsync and can make no GPU
/// call, so the trace would be empty (with `--wait`, rocsync would never end). Refused,
/// as rocsync's own pid is (strace refuses its own).
#[test]
fn attaching_to_itself_or_the_shell_waiting_for_it_is_refused() {
    let exe = env!("CARGO_BIN_EXE_rocsync");
    let out = Command::new("sh")
        .args(["-c", &format!("{exe} attach --wait -p $$; echo $?")])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = tool_stderr(&out);
    assert!(
        err.contains("started this rocsync and is waiting for it to end"),
        "{err}"
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1", "{err}");
    let out = Command::new("sh")
        .args(["-c", &format!("exec {exe} attach -p $$")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        tool_stderr(&out).contains("is this rocsync: it cannot trace itself"),
        "{}",
        tool_stderr(&out)
    );
}

/// A capture of a process that maps a runtime but makes no call says nothing was
/// captured, and exits 0 as `perf record` does with 0 samples (the trace is written).
#[test]
fn a_capture_of_nothing_says_so() {
    if !can_trace("a_capture_of_nothing_says_so") {
        return;
    }
    let dir = TempDir::new();
    // A scenario at its gate: its runtime loaded, no call until it reads a line.
    let mut idle = spawn_ready(
        Command::new(rocsync_tests::scenario())
            .args(["gated", "basic"])
            .env("SCENARIO_LOG", dir.path("s.log"))
            .env("SCENARIO_HIP", rocsync_tests::sim_hip())
            .stdin(Stdio::piped()),
    );
    let trace = dir.path("t.json");
    let out = rocsync()
        .args([
            "attach",
            "--no-status",
            "-d",
            "500ms",
            "-p",
            &idle.id().to_string(),
            "-o",
        ])
        .arg(&trace)
        .output()
        .unwrap();
    idle.end();
    assert_eq!(out.status.code(), Some(0), "{}", tool_stderr(&out));
    assert!(
        tool_stderr(&out).contains("nothing was captured"),
        "{}",
        tool_stderr(&out)
    );
    assert_eq!(read_json(&trace)["rocsync"]["calls"], 0);
}
