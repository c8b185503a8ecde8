//! Fixtures for rocsync's tests: a simulated HIP runtime that exports the real ABI, and
//! scenario programs that drive it and log what they did.

// Test fixtures may unwrap: a failure here is the test's, with its line (clippy.toml).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

pub mod driver;
mod scenario_log;
pub use scenario_log::{LoggedCall, read_log};

const OUT: &str = env!("OUT_DIR");

/// Directory holding the simulated `libamdhip64.so`.
pub fn sim_dir() -> PathBuf {
    Path::new(OUT).join("sim")
}

/// The simulated runtime.
pub fn sim_hip() -> PathBuf {
    sim_dir().join("libamdhip64.so")
}

/// The simulated runtime under CUDA's names (`libcudart.so.13`).
pub fn sim_cudart() -> PathBuf {
    Path::new(OUT).join("cuda/libcudart.so.13")
}

/// The simulated HSA runtime (`libhsa-runtime64.so.1`).
pub fn sim_hsa() -> PathBuf {
    Path::new(OUT).join("hsa/libhsa-runtime64.so.1")
}

/// The simulated runtime built with CET: every entry starts with `endbr64`.
pub fn sim_hip_cet() -> PathBuf {
    Path::new(OUT).join("cet/libamdhip64.so")
}

/// A `libamdhip64.so` whose exports start with single-stepped instructions
/// (tests/c/prologues.S).
pub fn prologues_hip() -> PathBuf {
    Path::new(OUT).join("prologues/libamdhip64.so")
}

/// Execs rocsync with a daemon socket of the test's for `run`/`attach` (`c/standalone.c`).
pub fn standalone() -> PathBuf {
    Path::new(OUT).join("standalone")
}

/// Runs a command and prints its own peak resident set, in KiB (`c/peak_rss.c`).
pub fn peak_rss() -> PathBuf {
    Path::new(OUT).join("peak_rss")
}

/// Blocks its main thread in `sleep()` from a function of its own (`wait_in_sleep`),
/// after printing `ready` (`c/stacks_sleep.c`); built with frame pointers.
pub fn stacks_sleep() -> PathBuf {
    Path::new(OUT).join("stacks_sleep")
}

/// The same, built without frame pointers.
pub fn stacks_sleep_nofp() -> PathBuf {
    Path::new(OUT).join("stacks_sleep_nofp")
}

/// A fake Python interpreter (`python3.11`) whose `_PyRuntime` lies: `cycles` or
/// `mixed` (`c/fake_python.c`).
pub fn fake_python() -> PathBuf {
    Path::new(OUT).join("fake/python3.11")
}

/// A process that loads and unloads a non-GPU library in a loop (never-stopped tests).
pub fn dlopen_loop() -> PathBuf {
    Path::new(OUT).join("dlopen_loop")
}

/// Maps the files it is given and waits, loading a library at each line of stdin
/// (`map_wait FILE...`): a neighbour mapping copies of a runtime.
pub fn map_wait() -> PathBuf {
    Path::new(OUT).join("map_wait")
}

/// A launcher that makes no GPU call: `launcher DIR PROG ARGS [-- PROG ARGS]...` starts
/// each worker by fork+exec with RANK/WORLD_SIZE/LOCAL_RANK and `SCENARIO_LOG=DIR/rank<i>.log`.
pub fn launcher() -> PathBuf {
    Path::new(OUT).join("launcher")
}

/// A PyTorch-shaped call mix per step (benchmarks).
pub fn mix() -> PathBuf {
    Path::new(OUT).join("mix")
}

/// Calls one library function in a loop and reports ns per call (benchmarks).
pub fn bench_calls() -> PathBuf {
    Path::new(OUT).join("bench_calls")
}

/// Calls one function of up to three copies of a library in alternating timed batches.
pub fn bench_paired() -> PathBuf {
    Path::new(OUT).join("bench_paired")
}

/// `bench_paired` on a real runtime's own loader (its folder in DT_RPATH), `series` as
/// [`RealRuntime::series`].
pub fn bench_paired_for(series: &str) -> PathBuf {
    Path::new(OUT).join(format!("bench_paired-{series}"))
}

/// Scenario program linked against the simulated runtime.
pub fn scenario() -> PathBuf {
    Path::new(OUT).join("scenario")
}

/// The same scenarios, loading the runtime with `dlopen` (`$SCENARIO_HIP`).
pub fn scenario_dlopen() -> PathBuf {
    Path::new(OUT).join("scenario_dlopen")
}

/// The basic scenarios linked against the simulated runtime built under CUDA's names
/// (`libcudart.so.13`).
pub fn scenario_cuda() -> PathBuf {
    Path::new(OUT).join("scenario_cuda")
}

/// The simulated HIP runtime built to submit AQL packets through the simulated HSA
/// runtime (kernels, barriers for event records and stream waits), for `scenario_dlopen`.
pub fn sim_hip_over_hsa() -> PathBuf {
    Path::new(OUT).join("sim-hsa/libamdhip64.so")
}

/// Drives the simulated HSA runtime directly: kernels and barriers on two GPU agents.
/// `hsa_scenario ITERATIONS QUEUE_SIZE`; logs every packet to `$SCENARIO_LOG`.
pub fn hsa_scenario() -> PathBuf {
    Path::new(OUT).join("hsa_scenario")
}

/// The Rust scenario driver (src/bin/scenario_driver.rs): `scenario_driver LIBRARY
/// fan-in PRODUCERS ITERATIONS`. Cargo builds it beside this crate's build directory when
/// this package is tested (`cargo test --workspace`); otherwise it is built here, once.
pub fn scenario_driver() -> PathBuf {
    // OUT_DIR is <target>/<profile>/build/rocsync-tests-*/out.
    let profile_dir = Path::new(OUT)
        .ancestors()
        .nth(3)
        .expect("target profile dir");
    let exe = profile_dir.join("scenario_driver");
    if !exe.exists() {
        let profile = profile_dir.file_name().unwrap().to_str().unwrap();
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args(["build", "--quiet", "--package", "rocsync-tests", "--bin"])
            .arg("scenario_driver")
            .args(if profile == "release" {
                &["--release"][..]
            } else {
                &[]
            })
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the scenario driver");
    }
    exe
}

/// Calls a collective library that carries its own static copy of the CUDA runtime
/// (`nccl/libnccl.so.2`, as NCCL does): `nccl_user N`.
pub fn nccl_user() -> PathBuf {
    Path::new(OUT).join("nccl_user")
}

/// A job of rank processes over the simulated RCCL (`rccl/librccl.so.1`, over the
/// simulated HIP runtime): `nccl_ranks NRANKS STEPS LAGGARD STOP_AT PAUSE_MS [WARMUP_MS]`
/// (tests/c/nccl_ranks.c says what it prints).
pub fn nccl_ranks() -> PathBuf {
    Path::new(OUT).join("nccl_ranks")
}

/// The C twin of [`python_rank_job`]: `rank_job STEPS STOP_AT PAUSE_S`, two ranks over the
/// simulated RCCL; rank 1 sleeps in `wait_for_data` before collective STOP_AT, rank 0
/// blocks in `train_step` (tests/c/rank_job.c says what it prints).
pub fn c_rank_job() -> PathBuf {
    Path::new(OUT).join("rank_job")
}

/// The same job over a simulated `libnccl.so.2` under CUDA's names.
pub fn nccl_ranks_cuda() -> PathBuf {
    Path::new(OUT).join("nccl_ranks_cuda")
}

/// Program linked against Debian's real `libamdhip64.so.5`, if its headers were installed.
pub fn real_hip_program() -> Option<PathBuf> {
    let p = Path::new(OUT).join("real_hip");
    p.exists().then_some(p)
}

/// `seccomp_run CMD ARGS…`: CMD under a seccomp filter that kills at a `uretprobe` call.
pub fn seccomp_run() -> PathBuf {
    Path::new(OUT).join("seccomp_run")
}

/// A program built against one of Debian's later real HIP runtimes (`scripts/rocm-runtimes`).
pub struct RealRuntime {
    /// The ROCm series, as `6.4`.
    pub series: String,
    pub program: PathBuf,
    /// The runtime's folder, with sid's loader and libraries.
    pub lib: PathBuf,
}

/// Every later real runtime the fixtures were built against (none before scripts/setup).
pub fn real_runtimes() -> Vec<RealRuntime> {
    listed_runtimes("real_runtimes")
}

/// Every real RCCL the fixtures were built against (`real_rccl`, in the series' folder).
pub fn real_rccls() -> Vec<RealRuntime> {
    listed_runtimes("real_rccl")
}

fn listed_runtimes(list: &str) -> Vec<RealRuntime> {
    std::fs::read_to_string(Path::new(OUT).join(list))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut f = l.split('\t');
            Some(RealRuntime {
                series: f.next()?.into(),
                program: f.next()?.into(),
                lib: f.next()?.into(),
            })
        })
        .collect()
}

/// The simulated RCCL over the simulated HIP runtime.
pub fn sim_rccl() -> PathBuf {
    Path::new(OUT).join("rccl/librccl.so.1")
}

/// A two-rank job in Python over ctypes (`python/rank_job.py` says what it does).
pub fn python_rank_job() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python/rank_job.py")
}

/// HTA check: prints the record→wait edges HolisticTraceAnalysis finds in a trace.
pub fn hta_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("hta/sync_edges.py")
}

/// HTA check: runs every HolisticTraceAnalysis analyzer on a directory of traces.
pub fn hta_analyzers_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("hta/analyzers.py")
}

/// HTA's critical path on one trace: edges by type, sync edges by row categories.
pub fn critical_path_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("hta/critical_path.py")
}

/// Prometheus check: parses a `/metrics` text with prometheus_client's parser.
pub fn prom_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("prom/parse_metrics.py")
}

/// Kubernetes check: reads manifests as YAML and validates them against the API's types.
pub fn k8s_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("k8s/manifests.py")
}

/// Skips a test for `reason`, saying so — unless the full suite was asked for
/// (`ROCSYNC_REQUIRE_ALL`, set by `cargo xtask test`), where a skip is a failure: CI must
/// never go green with coverage silently missing. Returns true when the caller should
/// return.
pub fn skip(test: &str, reason: &str) -> bool {
    if std::env::var_os("ROCSYNC_REQUIRE_ALL").is_some() {
        panic!("{test} cannot run ({reason}), and the full suite requires every test");
    }
    eprintln!("skipped {test}: {reason}");
    true
}

/// Waits until `pid` (a child of the caller, not yet reaped) has exited: a zombie, whose
/// `/proc` entry stays until the caller waits for it.
pub fn wait_until_zombie(pid: u32) {
    let stat = || std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let since = std::time::Instant::now();
    while !stat().contains(") Z ") {
        assert!(since.elapsed().as_secs() < 30, "pid {pid} did not exit");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}
