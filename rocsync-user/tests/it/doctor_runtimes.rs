//! `rocsync doctor` finds the runtimes where PyTorch users have them — pip's CUDA runtime
//! in a virtualenv, PyTorch's own `torch/lib` in a conda environment, ROCm under
//! `/opt/rocm*` — and tries the probes on each. The test plants copies of the simulated
//! runtimes there (under `/opt`, removed after) and reads doctor's rows for them.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::*;

/// Directories the test made under `/opt`, removed however it ends.
struct Planted(Vec<PathBuf>);

impl Drop for Planted {
    fn drop(&mut self) {
        for d in &self.0 {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// Copies `lib` into `dir` (made) as `name`; returns the copy's path.
fn plant(dir: &Path, name: &str, lib: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let to = dir.join(name);
    std::fs::copy(lib, &to).unwrap();
    to
}

#[test]
fn doctor_tries_runtimes_in_venvs_conda_envs_and_opt_rocm() {
    let test = "doctor_tries_runtimes_in_venvs_conda_envs_and_opt_rocm";
    if !can_trace(test) {
        return;
    }
    let id = std::process::id();
    let opt = PathBuf::from(format!("/opt/rocsync-doctor-test-{id}"));
    let rocm = PathBuf::from(format!("/opt/rocm-rocsync-doctor-test-{id}"));
    // Held until the planted files are gone (dropped after `_planted`).
    let _search = DOCTOR_SEARCH.write().unwrap_or_else(|e| e.into_inner());
    let _planted = Planted(vec![opt.clone(), rocm.clone()]);
    let site = |env: &Path| env.join("lib/python3.11/site-packages");
    let venv = site(&opt.join(".venv"));
    let conda = site(&opt.join("envs/train"));
    let (cudart, hip, hsa) = (
        rocsync_tests::sim_cudart(),
        rocsync_tests::sim_hip(),
        rocsync_tests::sim_hsa(),
    );
    let want = [
        (
            "CUDA runtime",
            venv.join("nvidia/cuda_runtime/lib"),
            "libcudart.so.13",
            &cudart,
        ),
        (
            "HIP runtime",
            conda.join("torch/lib"),
            "libamdhip64.so",
            &hip,
        ),
        ("HIP runtime", rocm.join("lib"), "libamdhip64.so.6", &hip),
        (
            "HSA runtime",
            rocm.join("lib"),
            "libhsa-runtime64.so.1",
            &hsa,
        ),
    ]
    .map(|(what, dir, name, lib)| (what, plant(&dir, name, lib)));

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rocsync"))
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", stderr_of(&out));
    });
    let rows = report["checks"].as_array().unwrap();
    for (what, path) in want {
        let found = format!("{}: attached to ", path.display());
        let row = rows
            .iter()
            .find(|c| c["found"].as_str().is_some_and(|f| f.starts_with(&found)))
            .unwrap_or_else(|| panic!("{} not tried: {report:#}", path.display()));
        assert_eq!(row["what"], what, "{row:#}");
        assert_eq!(row["status"], "ok", "{row:#}");
    }
}

#[test]
fn runtime_named_files_in_a_users_venv_do_not_fail_roots_doctor() {
    let test = "runtime_named_files_in_a_users_venv_do_not_fail_roots_doctor";
    if !can_trace(test) {
        return;
    }
    let opt = PathBuf::from(format!(
        "/opt/rocsync-doctor-hostile-{}",
        std::process::id()
    ));
    // A name that would colour root's terminal and forge a line of doctor's.
    let named = PathBuf::from(format!(
        "/opt/rocsync-doctor-hostile-{}-\u{1b}[31m\nmissing: x",
        std::process::id()
    ));
    let _search = DOCTOR_SEARCH.write().unwrap_or_else(|e| e.into_inner());
    let _planted = Planted(vec![opt.clone(), named.clone()]);
    let doctor = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_rocsync"))
            .args(["doctor", "--json"])
            .output()
            .unwrap()
    };
    let before = doctor().status.code();
    let site = opt.join(".venv/lib/python3.11/site-packages");
    // A FIFO named as pip's CUDA runtime, a sparse 100 GB file named as PyTorch's HSA.
    let fifo_dir = site.join("nvidia/cuda_runtime/lib");
    std::fs::create_dir_all(&fifo_dir).unwrap();
    let fifo = fifo_dir.join("libcudart.so.12");
    make_fifo(&fifo);
    let torch = site.join("torch/lib");
    std::fs::create_dir_all(&torch).unwrap();
    let sparse = torch.join("libhsa-runtime64.so.1");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(100 << 30)
        .unwrap();
    // A user's small non-library file of a runtime's name, in a folder of theirs.
    let junk_dir = named.join(".venv/lib/python3.11/site-packages/torch/lib");
    std::fs::create_dir_all(&junk_dir).unwrap();
    let junk = junk_dir.join("libamdhip64.so");
    std::fs::write(&junk, vec![0u8; 4096]).unwrap();
    for p in [&junk_dir, &junk] {
        std::os::unix::fs::chown(p, Some(65534), Some(65534)).unwrap();
    }
    let text = std::process::Command::new(env!("CARGO_BIN_EXE_rocsync"))
        .arg("doctor")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(!text.contains('\u{1b}'), "{text:?}");
    assert!(!text.lines().any(|l| l.starts_with("missing: x")), "{text}");
    let out = doctor();
    // Root's doctor says what it said before the neighbour planted them.
    assert_eq!(out.status.code(), before);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = report["checks"].as_array().unwrap();
    for planted in [&fifo, &sparse, &junk] {
        // As doctor shows paths: control characters escaped.
        let shown = planted
            .display()
            .to_string()
            .replace('\u{1b}', "\\u{1b}")
            .replace('\n', "\\n");
        let row = rows
            .iter()
            .find(|c| c["found"].as_str().is_some_and(|f| f.starts_with(&shown)))
            .unwrap_or_else(|| panic!("{shown} not shown: {report:#}"));
        assert_eq!(row["status"], "unknown", "{row:#}");
        assert!(
            ["skipped", "not counted"]
                .iter()
                .any(|w| row["found"].as_str().unwrap().contains(w)),
            "{row:#}"
        );
    }
    assert!(
        rows.iter().all(|c| c["status"] != "MISSING"
            || !c["found"]
                .as_str()
                .unwrap_or("")
                .contains("rocsync-doctor-hostile")),
        "{report:#}"
    );
}
