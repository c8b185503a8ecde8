//! `rocsync --version` names the commit built and the embedded probes' build id;
//! `rocsync doctor` reports what this machine allows, and with capabilities taken away
//! (`setpriv`) names exactly those missing. The doctor tests need root, `setpriv`, and
//! the Debian HIP runtime (libamdhip64.so.5) CI's machines have installed.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use serde_json::Value;

use crate::common::*;

const DEBIAN_HIP: &str = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";

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

/// `rocsync doctor --json` under `setpriv` with `setpriv_args` (none: as the test runs).
fn doctor(setpriv_args: &[&str]) -> (Output, Value) {
    let mut cmd = if setpriv_args.is_empty() {
        Command::new(env!("CARGO_BIN_EXE_rocsync"))
    } else {
        let mut c = Command::new("setpriv");
        c.args(setpriv_args)
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_rocsync"));
        c
    };
    let out = doctor_output(cmd.args(["doctor", "--json"]));
    let json = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), text(&out.stderr)));
    (out, json)
}

fn row<'a>(report: &'a Value, what: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["what"] == what)
        .unwrap_or_else(|| panic!("no {what} row in {report:#}"))
}

/// The capability rows whose status is MISSING.
fn missing_caps(report: &Value) -> Vec<String> {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["what"].as_str().unwrap().starts_with("CAP_") && c["status"] == "MISSING")
        .map(|c| c["what"].as_str().unwrap().to_string())
        .collect()
}

fn can_doctor(test: &str) -> bool {
    if !can_trace(test) {
        return false;
    }
    if !Path::new(DEBIAN_HIP).exists() {
        rocsync_tests::skip(test, "needs the Debian HIP runtime (libamdhip64.so.5)");
        return false;
    }
    true
}

#[test]
fn as_root_everything_is_there_and_the_hip_runtime_attaches() {
    if !can_doctor("as_root_everything_is_there_and_the_hip_runtime_attaches") {
        return;
    }
    let (out, report) = doctor(&[]);
    assert_eq!(out.status.code(), Some(0), "{report:#}");
    assert_eq!(report["missing"], serde_json::json!([]), "{report:#}");
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(row(&report, "kernel")["found"], release.trim());
    for what in [
        "kernel",
        "uprobes",
        "BTF",
        "BPF ring buffer",
        "eBPF programs",
    ] {
        assert_eq!(row(&report, what)["status"], "ok", "{what}: {report:#}");
    }
    for cap in ["CAP_SYS_ADMIN", "CAP_BPF", "CAP_PERFMON", "CAP_SYS_PTRACE"] {
        assert_eq!(row(&report, cap)["found"], "yes", "{report:#}");
    }
    let hip = std::fs::canonicalize(DEBIAN_HIP).unwrap();
    let hip_row = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            c["what"] == "HIP runtime"
                && c["found"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("{}: ROCm 5.2, attached to ", hip.display()))
        })
        .unwrap_or_else(|| panic!("{} not tried: {report:#}", hip.display()));
    assert_eq!(hip_row["status"], "ok", "{hip_row:#}");

    // The table says the same, to people.
    let out = doctor_output(Command::new(env!("CARGO_BIN_EXE_rocsync")).arg("doctor"));
    let table = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{table}");
    assert!(table.starts_with("CHECK"), "{table}");
    assert!(table.contains(&hip.display().to_string()), "{table}");
    // Readable at 100 columns: only a word longer than a line (a path) runs past.
    let found_at = table.lines().next().unwrap().find("FOUND").unwrap();
    for l in table.lines().filter(|l| l.chars().count() > 100) {
        assert!(
            !l[found_at..].contains(' '),
            "{l:?} is wider than 100 columns"
        );
    }
    assert!(
        table.ends_with("everything rocsync needs is here\n"),
        "{table}"
    );
}

#[test]
fn without_capabilities_it_names_exactly_those_missing() {
    if !can_doctor("without_capabilities_it_names_exactly_those_missing") {
        return;
    }
    let taken = ["--inh-caps=-all", "--bounding-set=-sys_admin,-bpf,-perfmon"];
    let (out, report) = doctor(&taken);
    assert_eq!(out.status.code(), Some(1), "{report:#}");
    assert_eq!(
        missing_caps(&report),
        ["CAP_SYS_ADMIN", "CAP_BPF", "CAP_PERFMON"],
        "{report:#}"
    );
    for kept in ["CAP_SYS_PTRACE", "CAP_KILL", "CAP_CHECKPOINT_RESTORE"] {
        assert_eq!(row(&report, kept)["status"], "ok", "{report:#}");
    }
    assert_eq!(row(&report, "eBPF programs")["status"], "MISSING");
    let out = doctor_output(
        Command::new("setpriv")
            .args(taken)
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_rocsync"))
            .arg("doctor"),
    );
    let table = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{table}");
    assert!(
        table.ends_with("missing: CAP_SYS_ADMIN, CAP_BPF, CAP_PERFMON, eBPF programs\n"),
        "{table}"
    );
    assert!(
        table.contains("fix: run as root (sudo), or grant CAP_BPF"),
        "{table}"
    );
}

#[test]
fn cap_sys_admin_alone_is_enough_and_perf_event_uprobes_need_it() {
    if !can_doctor("cap_sys_admin_alone_is_enough_and_perf_event_uprobes_need_it") {
        return;
    }
    // CAP_SYS_ADMIN grants what CAP_BPF and CAP_PERFMON do: the trial attach works.
    let (out, report) = doctor(&["--inh-caps=-all", "--bounding-set=-bpf,-perfmon"]);
    assert_eq!(out.status.code(), Some(0), "{report:#}");
    assert_eq!(
        row(&report, "CAP_BPF")["found"],
        "no (CAP_SYS_ADMIN grants the same)"
    );
    // CAP_BPF and CAP_PERFMON without it: the programs load, but a perf-event uprobe
    // (the HSA probes are ones) is refused.
    let (out, report) = doctor(&["--inh-caps=-all", "--bounding-set=-sys_admin"]);
    assert_eq!(out.status.code(), Some(1), "{report:#}");
    assert_eq!(missing_caps(&report), ["CAP_SYS_ADMIN"], "{report:#}");
    assert_eq!(row(&report, "eBPF programs")["status"], "ok", "{report:#}");
    let hsa = row(&report, "HSA runtime");
    assert_eq!(hsa["status"], "MISSING", "{report:#}");
    assert!(
        hsa["found"]
            .as_str()
            .unwrap()
            .contains("`perf_event_open` failed: Permission denied"),
        "{hsa:#}"
    );
    // A multi-uprobe link needs no CAP_SYS_ADMIN (measured on 6.18): the call probes
    // attach through one where the kernel has them.
    if row(&report, "multi-uprobe links")["status"] == "ok" {
        assert_eq!(row(&report, "HIP runtime")["status"], "ok", "{report:#}");
    }
}

/// As root, doctor runs no program the caller's `PATH` names (its `ldconfig` is the
/// system's), and warns when its own file is one another user could replace (a wheel in
/// a user's environment run with `sudo $(command -v rocsync)`); a copy only root can
/// change is ok.
#[test]
fn as_root_doctor_runs_nothing_from_path_and_warns_of_a_file_others_may_replace() {
    if !can_doctor("as_root_doctor_runs_nothing_from_path_and_warns_of_a_file_others_may_replace") {
        return;
    }
    use std::os::unix::fs::PermissionsExt as _;
    let dir = TempDir::new();
    let mode = |p: &Path, m| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
    let (bin, marker) = (dir.path("bin"), dir.path("ran"));
    std::fs::create_dir(&bin).unwrap();
    let planted = bin.join("ldconfig");
    std::fs::write(&planted, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    mode(&planted, 0o755).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let report_of = |exe: &Path| {
        let out = doctor_output(
            Command::new(exe)
                .args(["doctor", "--json"])
                .env("PATH", &path),
        );
        let report: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), text(&out.stderr)));
        row(&report, "rocsync's own file").clone()
    };
    for (folder, m) in [("root", 0o755), ("open", 0o777)] {
        std::fs::create_dir(dir.path(folder)).unwrap();
        std::fs::copy(
            env!("CARGO_BIN_EXE_rocsync"),
            dir.path(folder).join("rocsync"),
        )
        .unwrap();
        mode(&dir.path(folder), m).unwrap();
    }
    let own = report_of(&dir.path("root").join("rocsync"));
    assert_eq!(own["status"], "ok", "{own:#}");
    let open = report_of(&dir.path("open").join("rocsync"));
    assert_eq!(open["status"], "WARNING", "{open:#}");
    assert!(
        open["found"]
            .as_str()
            .unwrap()
            .contains("can be written by others (mode 777)"),
        "{open:#}"
    );
    assert!(
        open["fix"].as_str().unwrap().contains("root owns"),
        "{open:#}"
    );
    assert!(!marker.exists(), "doctor ran the ldconfig its PATH named");
}
