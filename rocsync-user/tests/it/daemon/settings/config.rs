//! The daemon's configuration and its systemd unit: the shipped example is valid, flags
//! win over the file, a wrong key or address is a clear error, and `dist/rocsync.service`
//! passes `systemd-analyze verify`. No root needed.

use std::{path::Path, process::Command};

use crate::common::*;

fn dist(file: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../dist")
        .join(file)
}

#[test]
fn the_example_configuration_is_valid_and_flags_win() {
    let out = run_ok(
        rocsync()
            .args(["daemon", "--check", "--config"])
            .arg(dist("rocsync.toml")),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("127.0.0.1:9464"), "{text}");
    let out = run_ok(
        rocsync()
            .args(["daemon", "--check", "--metrics-addr", "0.0.0.0:9999"])
            .args(["--include-exe", "python3", "--config"])
            .arg(dist("rocsync.toml")),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("0.0.0.0:9999") && text.contains("python3"),
        "{text}"
    );
}

#[test]
fn a_wrong_key_or_address_is_a_clear_error() {
    let dir = TempDir::new();
    let bad = dir.path("bad.toml");
    std::fs::write(&bad, "metric_addr = \"127.0.0.1:1\"\n").unwrap();
    let out = rocsync()
        .args(["daemon", "--check", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = stderr_of(&out);
    assert!(
        err.contains("bad.toml") && err.contains("unknown field"),
        "{err}"
    );
    let out = rocsync()
        .args(["daemon", "--check", "--metrics-addr", "localhost"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = stderr_of(&out);
    // Named as every setting's error names it: its key.
    assert!(
        err.contains("metrics_addr: \"localhost\": expected ADDRESS:PORT"),
        "{err}"
    );
    let out = rocsync()
        .args(["daemon", "--check", "--config", "/nonexistent/rocsync.toml"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(stderr_of(&out).contains("/nonexistent/rocsync.toml"));
}

#[test]
fn the_systemd_unit_verifies() {
    let name = "the_systemd_unit_verifies";
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        rocsync_tests::skip(
            name,
            "systemd-analyze is not installed (scripts/setup installs it)",
        );
        return;
    }
    // The shipped unit, pointed at this build and the example configuration.
    let dir = TempDir::new();
    let unit = std::fs::read_to_string(dist("rocsync.service"))
        .unwrap()
        .replace("/usr/local/bin/rocsync", env!("CARGO_BIN_EXE_rocsync"))
        .replace(
            "/etc/rocsync/rocsync.toml",
            dist("rocsync.toml").to_str().unwrap(),
        );
    let path = dir.path("rocsync.service");
    std::fs::write(&path, unit).unwrap();
    // The Documentation= pages come with the .deb (dist_deb.rs checks them there).
    let out = run_ok(
        Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(&path),
    );
    let err = stderr_of(&out);
    assert!(
        !err.contains("rocsync.service:"),
        "warnings about the unit: {err}"
    );
}
