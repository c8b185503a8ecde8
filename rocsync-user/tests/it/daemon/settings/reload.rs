//! SIGHUP reloads the daemon's configuration, checked whole before it replaces the one
//! in effect: sampling turned off or on never crashes it (its schedule follows), a new
//! state directory is made private as at start, and an unknown user is refused — at
//! start, at `--check` and at reload, where the old configuration stays. Needs root
//! (but for `--check`).

use std::{
    os::unix::fs::PermissionsExt as _,
    path::Path,
    time::{Duration, Instant},
};

use crate::common::{daemon::*, *};

/// A daemon counting only `exe`, configured by `dir/rocsync.toml` (written as `config`
/// first), its socket in `dir`.
fn configured_daemon(dir: &TempDir, exe: &Path, config: &str) -> (Daemon, Lines) {
    std::fs::write(dir.path("rocsync.toml"), config).unwrap();
    let mut cmd = rocsync();
    cmd.args(["daemon", "--metrics-addr", "127.0.0.1:0", "--config"])
        .arg(dir.path("rocsync.toml"))
        .arg("--socket")
        .arg(dir.path("rocsync.sock"))
        .arg("--include-exe")
        .arg(exe)
        .arg("--lock")
        .arg(dir.path("daemon.lock"));
    let mut daemon = Daemon(spawn_piped(&mut cmd));
    let mut lines = Lines::of(daemon.stderr.take().unwrap());
    lines.wait_for("SIGTERM stops");
    (daemon, lines)
}

/// Rewrites the configuration and sends SIGHUP; returns once the daemon said `outcome`.
fn reload(dir: &TempDir, daemon: &Daemon, lines: &mut Lines, config: &str, outcome: &str) {
    std::fs::write(dir.path("rocsync.toml"), config).unwrap();
    // SAFETY: signals the daemon this test started.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGHUP) };
    lines.wait_for(outcome);
}

fn state_dir(dir: &TempDir, name: &str) -> String {
    format!("state_dir = {:?}\n", dir.path(name).display().to_string())
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// The sampled windows written so far (`sample-*` in the state's traces).
fn sampled_windows(dir: &TempDir) -> usize {
    std::fs::read_dir(dir.path("state/traces"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            // Traces, not the owner files retention keeps beside them.
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("sample-") && name.ends_with(".json")
        })
        .count()
}

/// Waits (20 s at most) until more than `n` sampled windows are written.
fn wait_for_windows_past(dir: &TempDir, lines: &Lines, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while sampled_windows(dir) <= n {
        assert!(
            Instant::now() < deadline,
            "no sampled window past {n}: {:#?}",
            lines.1
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_reload_turning_sampling_off_or_on_never_crashes_it() {
    let name = "a_reload_turning_sampling_off_or_on_never_crashes_it";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let state = state_dir(&dir, "state");
    let sampling = "sample_window = \"50ms\"\nsample_every = \"200ms\"\n";
    let (mut daemon, mut lines) = configured_daemon(&dir, &exe, &format!("{state}{sampling}"));
    // A process to sample all along: sampling on shows as windows of it.
    let mut target = tracked_loop(&dir, &exe, &mut lines, 30_000);
    wait_for_windows_past(&dir, &lines, 0);
    reload(&dir, &daemon, &mut lines, &state, "configuration reloaded");
    // Off: the schedule in effect before would have written about ten windows in these
    // 2 s; at most the one recording at the reload is still written.
    let addr = metrics_addr(&lines);
    let at_reload = sampled_windows(&dir);
    let reloaded = Instant::now();
    while reloaded.elapsed() < Duration::from_secs(2) {
        assert!(
            daemon.try_wait().unwrap().is_none(),
            "the daemon ended: {:#?}",
            lines.1
        );
        assert!(get(&addr, "/healthz").contains("ok"));
        std::thread::sleep(Duration::from_millis(20));
    }
    let after = sampled_windows(&dir);
    assert!(
        after <= at_reload + 1,
        "{} windows sampled after sampling was turned off",
        after - at_reload
    );
    // Sampling turned on at a reload starts its schedule again.
    reload(
        &dir,
        &daemon,
        &mut lines,
        &format!("{state}{sampling}"),
        "configuration reloaded",
    );
    wait_for_windows_past(&dir, &lines, after);
    target.end();
    stop(daemon);
}

#[test]
fn a_reload_moving_the_state_directory_makes_it_private() {
    let name = "a_reload_moving_the_state_directory_makes_it_private";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let (daemon, mut lines) = configured_daemon(&dir, &exe, &state_dir(&dir, "a"));
    // A state directory that cannot be one keeps the configuration.
    std::fs::write(dir.path("file"), "").unwrap();
    let file = state_dir(&dir, "file");
    reload(
        &dir,
        &daemon,
        &mut lines,
        &file,
        "keeping the configuration",
    );
    assert!(lines.1.last().unwrap().contains("not a directory"));
    let moved = state_dir(&dir, "b/state");
    reload(&dir, &daemon, &mut lines, &moved, "configuration reloaded");
    for d in ["b/state", "b/state/traces", "b/state/dyno"] {
        assert_eq!(mode(&dir.path(d)), 0o700, "{d}");
    }
    let mut target = tracked_loop(&dir, &exe, &mut lines, 5000);
    let pid = target.id().to_string();
    let sock = dir.path("rocsync.sock");
    let written = ask_daemon(&sock, &["trace", "--pid", &pid, "--duration", "100ms"]);
    assert!(
        written
            .trim()
            .starts_with(dir.path("b/state/traces").to_str().unwrap()),
        "{written}"
    );
    // As at start: the directories root's alone, whatever the umask made the file.
    assert_eq!(mode(&dir.path("b/state")), 0o700);
    assert_eq!(mode(&dir.path("b/state/traces")), 0o700);
    target.end();
    stop(daemon);
}

const NO_SUCH_USER: &str = "rocsync-no-such-user";

#[test]
fn an_unknown_user_is_refused_at_check_and_start() {
    let dir = TempDir::new();
    let check = rocsync()
        .args(["daemon", "--check", "--user", NO_SUCH_USER])
        .output()
        .unwrap();
    assert!(!check.status.success());
    let err = stderr_of(&check);
    assert!(
        err.contains(&format!("no user named \"{NO_SUCH_USER}\"")),
        "{err}"
    );
    // In the file too, beside a known one (a uid is taken as it is).
    let config = dir.path("rocsync.toml");
    std::fs::write(
        &config,
        format!("user = [\"root\", \"1234\", \"{NO_SUCH_USER}\"]\n"),
    )
    .unwrap();
    let check = rocsync()
        .args(["daemon", "--check", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(!check.status.success());
    assert!(stderr_of(&check).contains("no user named"));
    std::fs::write(&config, "user = [\"root\", \"1234\"]\n").unwrap();
    run_ok(
        rocsync()
            .args(["daemon", "--check", "--config"])
            .arg(&config),
    );
    let name = "an_unknown_user_is_refused_at_check_and_start";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let mut started = Daemon(spawn_piped(&mut daemon_command(
        &dir,
        &exe,
        &["--user", NO_SUCH_USER],
    )));
    let status = wait_within(&mut started, Duration::from_secs(20), "a daemon of no user");
    assert!(!status.success());
    let mut err = String::new();
    std::io::Read::read_to_string(started.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(err.contains("no user named"), "{err}");
}

#[test]
fn a_reload_naming_an_unknown_user_keeps_the_configuration() {
    let name = "a_reload_naming_an_unknown_user_keeps_the_configuration";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let state = state_dir(&dir, "state");
    let (daemon, mut lines) = configured_daemon(&dir, &exe, &format!("{state}user = [\"root\"]\n"));
    let unknown = format!("{state}user = [\"{NO_SUCH_USER}\"]\n");
    reload(
        &dir,
        &daemon,
        &mut lines,
        &unknown,
        "keeping the configuration",
    );
    assert!(
        lines.1.last().unwrap().contains("no user named"),
        "{:#?}",
        lines.1
    );
    // Root's processes are still tracked (an unknown user would have filtered out all).
    let mut target = tracked_loop(&dir, &exe, &mut lines, 200);
    assert!(target.wait().unwrap().success());
    stop(daemon);
}

/// What is set up at start (the listeners, the flight recorder) is not pretended changed
/// by a reload: each changed key is said to take effect at restart, and the daemon goes
/// on as it was — still answering on its metrics address, the flight recorder still off.
#[test]
fn a_reload_says_what_takes_effect_only_at_restart() {
    let name = "a_reload_says_what_takes_effect_only_at_restart";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let state = state_dir(&dir, "state");
    let (daemon, mut lines) = configured_daemon(&dir, &exe, &state);
    let addr = metrics_addr(&lines);
    let changed = format!(
        "{state}metrics_addr = \"127.0.0.1:1\"\ndynolog_addr = \"127.0.0.1:1\"\nflight_recorder = \"10s\"\nlearn_devices = \"off\"\n"
    );
    reload(
        &dir,
        &daemon,
        &mut lines,
        &changed,
        "configuration reloaded",
    );
    for key in ["dynolog_addr", "flight_recorder", "learn_devices"] {
        assert!(
            lines
                .1
                .iter()
                .any(|l| l.contains(&format!("{key} changed: it takes effect at restart"))),
            "{key}: {:#?}",
            lines.1
        );
    }
    // The flag's metrics address wins over the file's: not changed, not named.
    assert!(
        !lines.1.iter().any(|l| l.contains("metrics_addr changed")),
        "only what changed is named"
    );
    assert!(get(&addr, "/healthz").starts_with("HTTP/1.1 200"));
    let flight = rocsync()
        .args(["trace", "--flight", "--socket"])
        .arg(dir.path("rocsync.sock"))
        .output()
        .unwrap();
    assert!(stderr_of(&flight).contains("flight recorder is off"));
    stop(daemon);
}
