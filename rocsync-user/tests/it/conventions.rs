//! The command line follows its neighbours (issue 36): one duration syntax everywhere,
//! `-p 1,2` pid lists (perf), `run CMD ARGS…` with or without `--` (perf, strace, nsys),
//! the help naming HIP or CUDA and every target of `trace`, TOML keys named as the flags,
//! and a readable `daemon --check`.

use std::{
    io::Write as _,
    process::{Child, Command, Output, Stdio},
    time::Duration,
};

use crate::common::*;
use rocsync_tests::{read_log, scenario, sim_hip};

fn check(args: &[&str]) -> Output {
    rocsync()
        .args(["daemon", "--check"])
        .args(args)
        .output()
        .unwrap()
}

/// The value `daemon --check` prints for `key`.
fn checked(out: &Output, key: &str) -> String {
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix(key).filter(|v| v.starts_with(' ')))
        .unwrap_or_else(|| panic!("{key} in {text}"))
        .trim()
        .to_string()
}

#[test]
fn one_duration_syntax_for_attach_trace_daemon_flags_and_keys() {
    // attach: every form parses (the missing process is the error, not the duration).
    for d in ["10", "10s", "500ms", "1.5s", "2m", "1h"] {
        let out = rocsync()
            .args(["attach", "-p", "999999999", "--duration", d])
            .output()
            .unwrap();
        assert!(
            tool_stderr(&out).contains("no process with id"),
            "{d}: {}",
            tool_stderr(&out)
        );
    }
    // trace: parsed before the daemon is asked (none listens at this socket).
    for d in ["10", "1.5s", "500ms"] {
        let out = rocsync()
            .args(["trace", "--all", "--socket", "/nonexistent/r.sock", "-d", d])
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert!(
            !tool_stderr(&out).contains("invalid value"),
            "{d}: {}",
            tool_stderr(&out)
        );
    }
    // The old flag is kept, hidden, and said to be deprecated.
    let out = rocsync()
        .args(["trace", "--all", "--socket", "/nonexistent/r.sock"])
        .args(["--duration-ms", "500"])
        .output()
        .unwrap();
    assert!(
        tool_stderr(&out).contains("--duration-ms is deprecated"),
        "{}",
        tool_stderr(&out)
    );
    // daemon flags and TOML keys: seconds without a unit, fractions.
    let out = check(&["--flight-recorder", "10", "--capture-on-stall", "1.5s"]);
    assert_ok(&out);
    assert_eq!(checked(&out, "flight_recorder"), "10s");
    assert_eq!(checked(&out, "capture_on_stall"), "1500ms");
    let dir = TempDir::new();
    let toml = dir.path("d.toml");
    std::fs::write(
        &toml,
        "hang_bound = \"2m\"\nstall_interval = 90\nflight_recorder = 1.5\nretention_max_age = \"1h\"\n",
    )
    .unwrap();
    let out = check(&["--config", toml.to_str().unwrap()]);
    assert_ok(&out);
    assert_eq!(checked(&out, "hang_bound"), "2m");
    assert_eq!(checked(&out, "stall_interval"), "90s");
    assert_eq!(checked(&out, "flight_recorder"), "1500ms");
    for (key, says) in [("true", "a duration: seconds"), ("-1", "positive number")] {
        std::fs::write(&toml, format!("hang_bound = {key}\n")).unwrap();
        let out = check(&["--config", toml.to_str().unwrap()]);
        assert!(!out.status.success(), "{key}");
        assert!(
            tool_stderr(&out).contains(says),
            "{key}: {}",
            tool_stderr(&out)
        );
    }
    assert_eq!(checked(&out, "retention_max_age"), "1h");
    // Bad forms: a clear error naming the value, everywhere, never a panic.
    for (bad, says) in [
        ("10x", "unknown unit \"x\""),
        ("-1", "positive number of seconds"),
        ("", "expected a duration"),
    ] {
        for args in [
            vec!["attach", "-p", "1", "--duration", bad],
            vec!["trace", "--all", "--duration", bad],
            vec!["daemon", "--check", "--flight-recorder", bad],
        ] {
            let out = rocsync().args(&args).output().unwrap();
            assert!(!out.status.success(), "{args:?}");
            assert!(
                tool_stderr(&out).contains(says),
                "{args:?}: {}",
                tool_stderr(&out)
            );
        }
    }
}

/// A scenario waiting at its gate (it prints "ready", then waits for a line).
fn gated(dir: &TempDir, name: &str) -> Child {
    spawn_ready(
        Command::new(scenario())
            .args(["gated", "basic"])
            .env("SCENARIO_LOG", dir.path(&format!("{name}.log")))
            .env("SCENARIO_HIP", sim_hip())
            .stdin(Stdio::piped()),
    )
}

/// `-p A,B` (as perf) and `-p A -p B` trace both processes in one capture: one trace
/// per process, every call of each.
#[test]
fn attach_takes_a_comma_separated_pid_list() {
    if !can_trace("attach_takes_a_comma_separated_pid_list") {
        return;
    }
    for (round, comma) in [("list", true), ("repeated", false)] {
        let dir = TempDir::new();
        let (mut a, mut b) = (gated(&dir, "a"), gated(&dir, "b"));
        let (pa, pb) = (a.id().to_string(), b.id().to_string());
        let pids = match comma {
            true => vec!["-p".to_string(), format!("{pa},{pb}")],
            false => vec!["-p".to_string(), pa, "-p".to_string(), pb],
        };
        let mut t = spawn_piped(
            rocsync()
                .args(["attach", "--wait", "--no-status", "--raw"])
                .arg(dir.path("t.jsonl"))
                .arg("-o")
                .arg(dir.path("t.json"))
                .args(&pids),
        );
        wait_for_line(&mut t, "tracing pid", Duration::from_secs(20));
        for p in [&mut a, &mut b] {
            p.stdin.take().unwrap().write_all(b"go\n").unwrap();
            assert!(p.wait().unwrap().success());
        }
        assert!(t.wait().unwrap().success(), "{round}");
        let (_, calls) = read_raw(&dir.path("t.jsonl"));
        for (name, target) in [("a", &a), ("b", &b)] {
            let own: Vec<_> = calls
                .iter()
                .filter(|c| c.pid == target.id() && c.api != "hipGetDevice")
                .cloned()
                .collect();
            assert_same_calls(&read_log(&dir.path(&format!("{name}.log"))), own);
            assert!(
                dir.path(&format!("t_{}.json", target.id())).exists(),
                "{round}"
            );
        }
    }
}

#[test]
fn trace_takes_p_and_pid_lists_and_names_every_target() {
    // Parsed (then refused for want of a daemon, not of a flag).
    let out = rocsync()
        .args([
            "trace",
            "-p",
            "1,2",
            "-p",
            "3",
            "--socket",
            "/nonexistent/r.sock",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        !tool_stderr(&out).contains("unexpected argument"),
        "{}",
        tool_stderr(&out)
    );
    // No target: every way to name one is listed, not `--pid` alone.
    let out = rocsync().arg("trace").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    for t in ["--pid", "--all", "--cgroup", "--pod", "--flight"] {
        assert!(tool_stderr(&out).contains(t), "{t}: {}", tool_stderr(&out));
    }
}

/// `rocsync run CMD ARGS…` as perf/strace/nsys take it; what follows the command is its
/// own, `-o` included; `--` still works.
#[test]
fn run_takes_the_command_with_or_without_a_separator() {
    if !can_trace("run_takes_the_command_with_or_without_a_separator") {
        return;
    }
    let dir = TempDir::new();
    let trace = dir.path("x.json");
    let out = rocsync()
        .args(["run", "--no-status", "-o"])
        .arg(&trace)
        .args(["sh", "-c", "echo \"$0 $1\"; exit 3", "-o", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", tool_stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "-o x");
    assert!(trace.exists());
    for args in [&["/bin/true"][..], &["--", "/bin/true"]] {
        run_ok(rocsync().args(["run", "--no-status", "-o", "-"]).args(args));
    }
}

#[test]
fn the_help_says_hip_or_cuda() {
    for cmd in [&["--help"][..], &["run", "--help"], &["attach", "--help"]] {
        let out = run_ok(rocsync().args(cmd));
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(
            help.contains("HIP or CUDA") || help.contains("HIP and CUDA"),
            "{cmd:?}: {help}"
        );
    }
}

/// The TOML key is the flag's name (`user`, as `--user`); the old `users` still works,
/// with a warning; `--check` prints `key  value` lines, not a Rust Debug dump.
#[test]
fn config_keys_are_the_flags_names_and_check_is_readable() {
    let dir = TempDir::new();
    let toml = dir.path("u.toml");
    std::fs::write(&toml, "user = [\"root\"]\n").unwrap();
    let out = check(&["--config", toml.to_str().unwrap()]);
    assert_ok(&out);
    assert_eq!(checked(&out, "user"), "root");
    assert!(!tool_stderr(&out).contains("deprecated"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains('{') && !text.contains("DaemonConfig"),
        "{text}"
    );
    assert_eq!(checked(&out, "metrics_addr"), "127.0.0.1:9464");
    std::fs::write(&toml, "users = [\"root\"]\n").unwrap();
    let out = check(&["--config", toml.to_str().unwrap()]);
    assert_ok(&out);
    assert_eq!(checked(&out, "user"), "root");
    assert!(
        tool_stderr(&out).contains("`users` is deprecated: name it `user`"),
        "{}",
        tool_stderr(&out)
    );
    std::fs::write(&toml, "users = [\"root\"]\nuser = [\"root\"]\n").unwrap();
    assert!(
        !check(&["--config", toml.to_str().unwrap()])
            .status
            .success()
    );
}
