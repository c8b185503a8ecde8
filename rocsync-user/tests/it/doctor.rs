//! `rocsync --version` names the commit built and the embedded probes' build id.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use crate::common::*;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `git rev-parse --short HEAD` of this checkout; `None` outside one.
fn checkout_commit() -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| text(&out.stdout).trim().to_string())
}

/// The SHA-256 of each probes' object this target directory built (`sha256sum`).
fn built_objects_sha256() -> Vec<String> {
    let release = Path::new(env!("CARGO_BIN_EXE_rocsync")).parent().unwrap();
    let objects: Vec<PathBuf> = std::fs::read_dir(release.join("build"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("rocsync-user-"))
        .map(|e| e.path().join("out/rocsync"))
        .filter(|p| p.exists())
        .collect();
    objects
        .iter()
        .map(|o| {
            let out = run_ok(Command::new("sha256sum").arg(o));
            text(&out.stdout)
                .split_whitespace()
                .next()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[test]
fn version_names_the_commit_and_the_probes_build_id() {
    let out = run_ok(Command::new(env!("CARGO_BIN_EXE_rocsync")).arg("--version"));
    let line = text(&out.stdout);
    assert!(
        line.starts_with(&format!("rocsync {} (", env!("CARGO_PKG_VERSION"))),
        "{line}"
    );
    let commit = line
        .split_once("commit ")
        .and_then(|(_, r)| r.split_once(','))
        .map(|(c, _)| c)
        .unwrap_or_else(|| panic!("no commit in {line:?}"));
    let want = checkout_commit().unwrap_or_else(|| "unknown".into());
    assert_eq!(commit.trim_end_matches("-dirty"), want, "{line}");
    let id = line
        .split_once("eBPF object sha256:")
        .map(|(_, r)| r.trim_end().trim_end_matches(')'))
        .unwrap_or_else(|| panic!("no build id in {line:?}"));
    assert_eq!(id.len(), 16, "{line}");
    let objects = built_objects_sha256();
    assert!(
        objects.iter().any(|sum| sum.starts_with(id)),
        "{id} is none of the objects built: {objects:?}"
    );
}
