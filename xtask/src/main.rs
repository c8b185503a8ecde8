//! `cargo xtask demo [OUTPUT]` — set up, build, trace the embedded cross-stream scenario
//!                                on the simulated HIP runtime, print the trace path.
//! `cargo xtask test`            — set up, then every check CI runs: fmt, clippy, all tests.
//! `cargo xtask bench`           — the benchmarks (root), written to bench/RESULTS.md.
//! `cargo xtask bench-tree`      — the process-tree measurement alone (bench/process-tree.md).
//! `cargo xtask bench-daemon`    — the daemon's costs alone (bench/daemon.md).
//! `cargo xtask bench-breakdown` — where a captured call's cost goes (bench/breakdown.md).
//! `cargo xtask bench-run-parts` — where `rocsync run`'s cost goes on a dense loop, part by
//!                                part (bench/run-parts.md).
//! `cargo xtask bench-learning`  — the `*GetDevice` learning window's cost (bench/learning.md).
//! `cargo xtask bench-budget`    — the daemon's budget on a polling process (bench/budget.md).
//! `cargo xtask bench-cycle`     — the budget's duty cycle on a sync-dense loop (bench/cycle.md).
//! `cargo xtask bench-one-trap`  — what one trap saves a counted process (bench/one-trap.md).
//! `cargo xtask bench-real-runtime` — the probes on the real ROCm 6.4/7.2 stubs
//!                                  (bench/real-runtime.md).
//! `cargo xtask bench-flight-budget [BEFORE]` — the flight recorder held to the budget, on a
//!                                sync-dense loop, BEFORE's rocsync (main's) against this
//!                                tree's (appended to bench/flight.md).
//! `cargo xtask bench-soak [MINUTES]` — the daemon for MINUTES (default 10) under unprivileged
//!                                churn, dyno floods and slow connections (bench/soak.md).
//! `cargo xtask dist`            — what users install, in target/dist/: the static binary,
//!                                the .deb, the container image, the wheel.
//! `cargo xtask setup`           — only the set-up (scripts/setup).

use std::{
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context as _, Result, bail};

mod bench;
mod dist;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("demo") => demo(args.get(1).map(String::as_str)),
        Some("test") => test(),
        Some("setup") => setup(),
        Some("dist") => dist::dist().map(drop),
        Some("bench") => bench::bench(),
        Some(
            part @ ("bench-tree" | "bench-daemon" | "bench-breakdown" | "bench-learning"
            | "bench-budget" | "bench-cycle" | "bench-one-trap" | "bench-real-runtime"
            | "bench-run-parts"),
        ) => bench::bench_part(&part["bench-".len()..]),
        Some("bench-soak") => bench::bench_soak(args.get(1).map(String::as_str)),
        Some("bench-flight-budget") => bench::bench_flight_budget(args.get(1).map(String::as_str)),
        _ => {
            eprintln!(
                "usage: cargo xtask <demo [OUTPUT]|test|dist|bench|bench-tree|bench-daemon|bench-breakdown|bench-learning|bench-budget|bench-cycle|bench-one-trap|bench-real-runtime|bench-run-parts|bench-flight-budget [BEFORE]|bench-soak [MINUTES]|setup>"
            );
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("xtask: error: {e:#}");
        std::process::exit(1);
    }
}

pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lies in the workspace's folder")
        .to_path_buf()
}

pub(crate) fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("xtask: {cmd:?}");
    let status = cmd
        .current_dir(root())
        .status()
        .with_context(|| format!("starting {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed: {status}");
    }
    Ok(())
}

pub(crate) fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// Installs what the build and the tests need (idempotent; needs root for apt-get).
pub(crate) fn setup() -> Result<()> {
    run(Command::new("bash").arg("scripts/setup"))
}

fn demo(output: Option<&str>) -> Result<()> {
    setup()?;
    run(cargo().args(["build", "--release", "--package", "rocsync-user"]))?;
    let output = output.unwrap_or("rocsync-demo.json");
    // Two threads: one records events on its stream, the other makes its stream wait on
    // them, with event, stream and device synchronizes in between; the simulated HIP
    // runtime submits through the simulated HSA runtime, so the trace holds the API rows
    // and the AQL packets each agent's queues received.
    run(Command::new(root().join("target/release/rocsync"))
        .args(["run", "--force", "--output", output, "--"])
        .arg(rocsync_tests::scenario_dlopen())
        .args(["cross", "200"])
        .env("SCENARIO_HIP", rocsync_tests::sim_hip_over_hsa()))?;
    eprintln!(
        "xtask: trace written to {} (open it in https://ui.perfetto.dev)",
        root().join(output).display()
    );
    Ok(())
}

/// The HolisticTraceAnalysis the HTA test is written against, and a pandas it works with
/// (HTA 0.5's analyses break on pandas 3).
const HTA: &str = "holistictraceanalysis==0.5.0";
const PANDAS: &str = "pandas<3";
/// The daemon test parses `/metrics` with Prometheus's Python client.
const PROMETHEUS_CLIENT: &str = "prometheus_client==0.26.0";
/// The upload test's S3-compatible server (`moto_server`).
const MOTO: &str = "moto[server]==5.2.5";
/// The Kubernetes manifests' test checks them offline against the API's own types:
/// kubernetes-validate's strict JSON schemas per release, and cloudcoil's models of the
/// prometheus-operator CRDs (for the ServiceMonitor), with the cloudcoil they were made for.
const KUBERNETES_VALIDATE: &str = "kubernetes-validate==1.37.0";
const PROMETHEUS_OPERATOR_MODELS: &str = "cloudcoil-models-prometheus-operator==0.80.1.0";
const CLOUDCOIL: &str = "cloudcoil==0.6.0";

/// A Python with the pinned HolisticTraceAnalysis (the HTA test), prometheus_client (the
/// daemon test), moto's S3 server (the upload test) and the Kubernetes validators (the
/// manifests' test), in target/hta-venv.
fn hta_python() -> Result<PathBuf> {
    let venv = root().join("target/hta-venv");
    let python = venv.join("bin/python");
    let ready = Command::new(&python)
        .args([
            "-c",
            "import hta, importlib.metadata as m, sys; \
             sys.exit(m.version('holistictraceanalysis') != '0.5.0' or \
             int(m.version('pandas').split('.')[0]) >= 3 or \
             m.version('prometheus_client') != '0.26.0' or \
             m.version('moto') != '5.2.5' or \
             m.version('kubernetes-validate') != '1.37.0' or \
             m.version('cloudcoil-models-prometheus-operator') != '0.80.1.0' or \
             m.version('cloudcoil') != '0.6.0')",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ready {
        run(Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
        run(Command::new(venv.join("bin/pip")).args([
            "install",
            "--quiet",
            HTA,
            PANDAS,
            PROMETHEUS_CLIENT,
            MOTO,
            KUBERNETES_VALIDATE,
            PROMETHEUS_OPERATOR_MODELS,
            CLOUDCOIL,
        ]))?;
    }
    Ok(python)
}

fn test() -> Result<()> {
    // The suite's eBPF tests need root; without it they would skip and CI could go green
    // with them untested. The full suite runs everything or fails.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!(
            "cargo xtask test runs the eBPF tests, which need root: run it as root (CI does); \
             `cargo test` runs what it can and says what it skipped"
        );
    }
    setup()?;
    let python = hta_python()?;
    run(cargo().args(["fmt", "--all", "--", "--check"]))?;
    // What users install is tested as they get it.
    let dist = dist::dist()?;
    // The probes build only with nightly (-Z build-std); clippy checks them there.
    run(Command::new("cargo").args([
        "+nightly",
        "clippy",
        "--package",
        "rocsync-ebpf",
        "--all-targets",
        "--features",
        "bench",
        "--",
        "--deny",
        "warnings",
        "-C",
        "panic=abort",
        "-Zpanic_abort_tests",
    ]))?;
    run(cargo().args([
        "clippy",
        "--release",
        "--workspace",
        "--exclude",
        "rocsync-ebpf",
        "--all-targets",
        "--features",
        "rocsync-user/bench",
        "--",
        "-D",
        "warnings",
    ]))?;
    let mut test = cargo();
    test.args([
        "test",
        "--release",
        "--workspace",
        "--exclude",
        "rocsync-ebpf",
    ])
    .env("ROCSYNC_HTA_PYTHON", python)
    .env("ROCSYNC_DIST", dist)
    // Every skip path fails instead of skipping.
    .env("ROCSYNC_REQUIRE_ALL", "1")
    // Most tests wait on processes, not on the CPU: on CI's 2 cores the integration
    // binary took 356 s on 2 threads and 226 s on 4 (bench/ci.md).
    .args(["--", "--test-threads=4"]);
    run_tests(&mut test)
}

/// Runs cargo test, passing its output through, and closes with the totals over every
/// test binary (cargo's own last line is that of whichever binary ran last). A test that
/// did not run (`#[ignore]`d) fails the run as a failed test does: the full suite runs
/// everything or fails, as `ROCSYNC_REQUIRE_ALL` makes every skip path fail.
fn run_tests(cmd: &mut Command) -> Result<()> {
    eprintln!("xtask: {cmd:?}");
    let mut child = cmd
        .current_dir(root())
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {cmd:?}"))?;
    let (mut passed, mut failed, mut skipped) = (0u64, 0u64, 0u64);
    let mut ignored = Vec::new();
    let stdout = child.stdout.take().context("the tests' output")?;
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        println!("{line}");
        if let Some(name) = ignored_test(&line) {
            ignored.push(name.to_string());
        }
        if let Some(rest) = line.strip_prefix("test result: ") {
            let count = |word: &str| -> u64 {
                rest.split(';')
                    .find_map(|part| part.trim().strip_suffix(word))
                    .and_then(|n| n.trim().rsplit(' ').next()?.parse().ok())
                    .unwrap_or(0)
            };
            passed += count("passed");
            failed += count("failed");
            skipped += count("ignored");
        }
    }
    let status = child.wait()?;
    println!("xtask: {passed} passed, {failed} failed, {skipped} skipped");
    if !status.success() {
        bail!("tests failed: {status}");
    }
    if skipped > 0 || !ignored.is_empty() {
        let names = if ignored.is_empty() {
            String::new()
        } else {
            format!(": {}", ignored.join(", "))
        };
        bail!(
            "{} skipped test(s){names}; the full suite runs every test \
             (remove the #[ignore], or make the test run)",
            skipped.max(ignored.len() as u64)
        );
    }
    Ok(())
}

/// The test a libtest line reports as ignored (`test NAME ... ignored`, or
/// `test NAME ... ignored, REASON`).
fn ignored_test(line: &str) -> Option<&str> {
    let (name, outcome) = line.strip_prefix("test ")?.rsplit_once(" ... ")?;
    (outcome == "ignored" || outcome.starts_with("ignored, ")).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::ignored_test;

    #[test]
    fn ignored_tests_are_named() {
        assert_eq!(
            ignored_test("test daemon::a_slow_one ... ignored"),
            Some("daemon::a_slow_one")
        );
        assert_eq!(
            ignored_test("test hta::edges ... ignored, needs HTA"),
            Some("hta::edges")
        );
        assert_eq!(ignored_test("test daemon::ignored_twice ... ok"), None);
        assert_eq!(
            ignored_test("test result: ok. 1 passed; 0 failed; 2 ignored"),
            None
        );
    }
}
