//! Bad input gets a clear message and a non-zero exit, never a panic.

use std::process::Command;

use crate::common::*;
use rocsync_tests::read_log;

fn fails_with(cmd: &mut Command, needle: &str) {
    let out = cmd.output().unwrap();
    let stderr = stderr_of(&out);
    assert!(!out.status.success(), "{cmd:?} succeeded");
    assert!(
        stderr.contains(needle),
        "{cmd:?}: expected {needle:?} in {stderr}"
    );
    assert!(
        !stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"),
        "{stderr}"
    );
}

#[test]
fn attach_to_a_missing_process() {
    fails_with(
        rocsync().args(["attach", "--pid", "999999999"]),
        "no process with id 999999999",
    );
}

/// A process that has ended but is not yet reaped (a zombie: its `/proc` entry stays) is
/// said to have exited — not "has no runtime mapped", nor waited for with `--wait`.
#[test]
fn attach_to_a_process_that_has_exited() {
    let mut zombie = Command::new("true").spawn().unwrap();
    let pid = zombie.id().to_string();
    rocsync_tests::wait_until_zombie(zombie.id());
    for wait in [&[][..], &["--wait"]] {
        fails_with(
            rocsync().args(["attach", "--pid", &pid]).args(wait),
            &format!("process {pid} has exited"),
        );
    }
    zombie.wait().unwrap();
}

#[test]
fn unknown_flags_and_missing_commands() {
    fails_with(rocsync().args(["attach"]), "--pid");
    fails_with(rocsync().args(["run"]), "CMD");
    fails_with(
        rocsync().args(["attach", "--pid", "1", "--duration", "soon"]),
        "expected a positive number of seconds",
    );
}

#[test]
fn a_command_that_does_not_exist() {
    fails_with(
        rocsync().args(["run", "--", "/nonexistent/app"]),
        "/nonexistent/app",
    );
}

#[test]
fn unwritable_output_fails_before_capturing() {
    if !can_trace("unwritable_output_fails_before_capturing") {
        return;
    }
    fails_with(
        rocsync().args(["run", "--raw", "/nonexistent-dir/x.jsonl", "--", "true"]),
        "cannot open the directory of output",
    );
}

#[test]
fn hip_lib_that_is_not_elf() {
    fails_with(
        rocsync().args(["run", "--hip-lib", "/etc/hostname", "--", "true"]),
        "not an ELF",
    );
}

/// The cause was printed twice ("…: No such file or directory (os error 2): No such
/// file or directory (os error 2)").
#[test]
fn a_missing_hip_lib_says_its_cause_once() {
    let out = rocsync()
        .args(["run", "--hip-lib", "/nonexistent.so", "/bin/true"])
        .output()
        .unwrap();
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot read /nonexistent.so"), "{stderr}");
    assert_eq!(
        stderr.matches("No such file or directory").count(),
        1,
        "{stderr}"
    );
}

#[test]
fn hip_lib_without_any_hooked_symbol() {
    if !can_trace("hip_lib_without_any_hooked_symbol") {
        return;
    }
    let libc = std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .find_map(|l| {
            l.split_whitespace()
                .nth(5)
                .filter(|p| p.contains("libc.so"))
                .map(String::from)
        })
        .expect("libc mapped");
    fails_with(
        rocsync().args(["run", "--hip-lib", &libc, "--", "true"]),
        "exports none of the hooked libamdhip64 functions",
    );
}

#[test]
fn attach_to_a_process_without_hip_suggests_wait() {
    if !can_trace("attach_to_a_process_without_hip_suggests_wait") {
        return;
    }
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    fails_with(
        rocsync().args(["attach", "--pid", &sleeper.id().to_string()]),
        "--wait",
    );
    // Its claim on the process went with it: no lock file is left behind.
    let claim = std::path::PathBuf::from(format!("/run/rocsync/pid-{}.lock", sleeper.id()));
    assert!(!claim.exists(), "{} left behind", claim.display());
    sleeper.end();
}

/// What attach needs, measured on this kernel (see preflight.rs): an unprivileged user
/// with exactly CAP_BPF and CAP_PERFMON is refused at once, the message naming the
/// missing CAP_SYS_ADMIN, before any probe is tried (no perf_event_open error); with
/// CAP_SYS_ADMIN (and CAP_DAC_OVERRIDE for root's /run/rocsync) instead, the same user
/// traces a command end to end, so the advice is enough.
#[test]
fn without_privileges_says_what_is_needed() {
    if !can_trace("without_privileges_says_what_is_needed") {
        return;
    }
    let as_nobody = |caps: &str| {
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
        if !caps.is_empty() {
            cmd.arg(format!("--inh-caps={caps}"))
                .arg(format!("--ambient-caps={caps}"));
        }
        cmd.arg("--").arg(env!("CARGO_BIN_EXE_rocsync"));
        cmd
    };
    let pid = std::process::id().to_string();
    fails_with(
        as_nobody("").args(["attach", "--pid", &pid]),
        "rocsync needs root (CAP_SYS_ADMIN, missing) to load eBPF programs",
    );
    let out = as_nobody("+bpf,+perfmon")
        .args(["attach", "--pid", &pid])
        .output()
        .unwrap();
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("CAP_SYS_ADMIN, missing")
            && stderr.contains("has CAP_BPF and CAP_PERFMON")
            && !stderr.contains("perf_event_open failed"),
        "{stderr}"
    );
    let dir = TempDir::new();
    std::fs::set_permissions(
        dir.0.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    // A socket no daemon on the host answers, as every standalone capture in the tests.
    let out = as_nobody("+sys_admin,+dac_override")
        .args(["run", "--no-status", "--daemon-socket"])
        .arg(dir.path("none.sock"))
        .arg("-o")
        .arg(dir.path("t.json"))
        .arg(rocsync_tests::scenario())
        .args(["cross", "3"])
        .env("SCENARIO_LOG", dir.path("s.log"))
        .output()
        .unwrap();
    let stderr = stderr_of(&out);
    assert!(out.status.success(), "with CAP_SYS_ADMIN: {stderr}");
    // Traced end to end: every call the scenario logged is its row.
    let logged = read_log(&dir.path("s.log"));
    assert!(!logged.is_empty(), "the scenario logged nothing");
    assert_rows_match_log(&read_json(&dir.path("t.json")), None, &logged);
}

#[test]
fn skipping_an_unknown_function() {
    fails_with(
        rocsync().args(["run", "--skip", "hipFoo", "--", "true"]),
        "\"hipFoo\" is not a hooked function",
    );
}

#[test]
fn a_bad_agent_list() {
    fails_with(
        rocsync().args(["run", "--agents", "1,gpu", "--", "true"]),
        "\"gpu\" is not an agent ordinal",
    );
    fails_with(
        rocsync().args(["run", "--agents", "64", "--", "true"]),
        "from 0 to 63",
    );
}

#[test]
fn run_as_another_user_with_sigpipe_restored() {
    if !can_trace("run_as_another_user_with_sigpipe_restored") {
        return;
    }
    let out = run_ok(rocsync().args([
        "run",
        "--no-status",
        "-u",
        "nobody",
        "--",
        "sh",
        "-c",
        "id -u; id -g; yes | head -1 >/dev/null",
    ]));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let ids: Vec<&str> = stdout.lines().collect();
    assert_eq!(ids[0], "65534", "{stdout}");
    // rocsync ignores SIGPIPE; the command must not inherit that (yes would complain).
    let stderr = stderr_of(&out);
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
    fails_with(
        rocsync().args(["run", "-u", "no-such-user-here", "--", "true"]),
        "no user named",
    );
}
