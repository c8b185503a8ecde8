//! The wheel as users get it (`cargo xtask dist` writes it to `$ROCSYNC_DIST`): `pip
//! install` into a fresh virtualenv (no index: the file alone) puts `rocsync` on that
//! environment's PATH, where it runs `doctor`, a capture and `demo` (the README's first
//! command: the wheel alone shows a trace); `pip uninstall` takes it
//! away again (its RECORD lists it). Needs python3-venv (scripts/setup) and root.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use crate::common::*;

/// The one wheel in `$ROCSYNC_DIST`, or a skip (a failure under `cargo xtask test`).
fn wheel(test: &str) -> Option<PathBuf> {
    let Some(dir) = std::env::var_os("ROCSYNC_DIST") else {
        rocsync_tests::skip(test, "ROCSYNC_DIST is unset (cargo xtask test sets it)");
        return None;
    };
    let wheels: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", Path::new(&dir).display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "whl"))
        .collect();
    assert_eq!(wheels.len(), 1, "one wheel: {wheels:?}");
    wheels.into_iter().next()
}

/// `program`, found with the virtualenv's `bin` first on the PATH, as `activate` sets it.
fn in_venv(venv: &Path, program: &str) -> Command {
    let path = std::env::var("PATH").unwrap_or_default();
    let path = format!("{}:{path}", venv.join("bin").display());
    let mut cmd = Command::new("env");
    cmd.arg(format!("PATH={path}"))
        .arg(program)
        .env("PATH", &path)
        .env("VIRTUAL_ENV", venv);
    cmd
}

#[test]
fn pip_installs_rocsync_into_a_virtualenv_where_it_traces() {
    let test = "pip_installs_rocsync_into_a_virtualenv_where_it_traces";
    let Some(wheel) = wheel(test) else {
        return;
    };
    if !can_trace(test) {
        return;
    }
    let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    // Both libcs' Pythons take it: the binary links nothing.
    assert!(
        name.starts_with("rocsync-")
            && name.ends_with(
                "-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.musllinux_1_1_x86_64.whl"
            ),
        "{name}"
    );
    let dir = TempDir::new();
    let venv = dir.path("venv");
    run_ok(Command::new("python3").args(["-m", "venv"]).arg(&venv));
    let pip = venv.join("bin/pip");
    run_ok(
        Command::new(&pip)
            .args(["install", "--no-index", "--no-cache-dir", "--quiet"])
            .arg(&wheel),
    );
    // On the environment's PATH, by name, and executable.
    let out = run_ok(in_venv(&venv, "sh").args(["-c", "command -v rocsync"]));
    let found = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(found, venv.join("bin/rocsync").display().to_string());
    let version = run_ok(in_venv(&venv, "rocsync").arg("--version"));
    let version = String::from_utf8_lossy(&version.stdout).into_owned();
    let shown = run_ok(Command::new(&pip).args(["show", "rocsync"]));
    let shown = String::from_utf8_lossy(&shown.stdout).into_owned();
    let pip_version = shown
        .lines()
        .find_map(|l| l.strip_prefix("Version: "))
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(
        version.starts_with(&format!("rocsync {pip_version}")),
        "{version} vs {pip_version}"
    );

    // doctor, from the environment: this machine (root, everything installed) passes.
    let doctor = in_venv(&venv, "rocsync").arg("doctor").output().unwrap();
    assert_eq!(
        doctor.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&doctor.stdout)
    );

    // A capture, from the environment: every call the scenario made.
    let (log, raw) = (dir.path("scenario.log"), dir.path("calls.jsonl"));
    run_ok(
        in_venv(&venv, "rocsync")
            .args(["run", "--raw"])
            .arg(&raw)
            .arg("--")
            .arg(rocsync_tests::scenario())
            .arg("basic")
            .current_dir(dir.path(""))
            .env("SCENARIO_LOG", &log)
            .env("SCENARIO_HIP", rocsync_tests::sim_hip()),
    );
    let (_, calls) = read_raw(&raw);
    assert_same_calls(&rocsync_tests::read_log(&log), calls);

    // The README's first command for a wheel user: a real trace with nothing else.
    let demo = dir.path("demo.json");
    let shown = run_ok(in_venv(&venv, "rocsync").args(["demo", "-o"]).arg(&demo));
    let shown = String::from_utf8_lossy(&shown.stdout).into_owned();
    assert!(shown.contains("hipStreamWaitEvent"), "{shown}");
    assert_eq!(read_json(&demo)["rocsync"]["waits_unresolved"], 0);

    // Its RECORD lists the binary: uninstalling removes it.
    run_ok(Command::new(&pip).args(["uninstall", "--yes", "--quiet", "rocsync"]));
    assert!(!venv.join("bin/rocsync").exists());
}
