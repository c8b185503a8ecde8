//! Debian's real HIP runtimes — 5.2 (Debian 12's own), 6.4 and 7.2 (sid's and
//! experimental's builds of ROCm's sources, unpacked by `scripts/rocm-runtimes` beside
//! sid's loader: nothing installed) — traced by `run`, `attach` and a daemon trace, each
//! against the program's own log of what it called and got. Without a GPU every call
//! fails (101 on 5.2, 100 from 6.4 on), which the trace must say, call by call.

use std::{
    collections::BTreeMap,
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use crate::common::{apis::traced_by_default_names, daemon::*, *};
use rocsync_tests::{LoggedCall, read_log};

/// One real runtime and the program built against it.
pub(crate) struct Real {
    pub series: String,
    pub program: PathBuf,
    /// The HIP and HSA files the program maps (their real paths).
    pub hip: PathBuf,
    hsa: PathBuf,
    /// What every call returns without a GPU.
    pub ret: i64,
}

/// Every real runtime, or a skip naming what is missing (CI fails on a skip).
pub(crate) fn reals(test: &str) -> Option<Vec<Real>> {
    if !can_trace(test) {
        return None;
    }
    let system = Path::new("/usr/lib/x86_64-linux-gnu");
    let Some(program) = rocsync_tests::real_hip_program() else {
        rocsync_tests::skip(test, "libamdhip64-dev was not installed at build time");
        return None;
    };
    let real = |dir: &Path, name: &str| dir.join(name).canonicalize().unwrap();
    let mut reals = vec![Real {
        series: "5.2".into(),
        program,
        hip: real(system, "libamdhip64.so.5"),
        hsa: real(system, "libhsa-runtime64.so.1"),
        ret: 101,
    }];
    for r in rocsync_tests::real_runtimes() {
        let major = r.series.split('.').next().unwrap().to_string();
        reals.push(Real {
            hip: real(&r.lib, &format!("libamdhip64.so.{major}")),
            hsa: real(&r.lib, "libhsa-runtime64.so.1"),
            series: r.series,
            program: r.program,
            ret: 100,
        });
    }
    if reals.len() < 3 {
        rocsync_tests::skip(
            test,
            "the real ROCm 6 and 7 runtimes are not unpacked (scripts/setup runs scripts/rocm-runtimes)",
        );
        return None;
    }
    Some(reals)
}

/// The library's defined dynamic symbols and their addresses (`nm -D`, not rocsync's
/// own ELF reading).
pub(crate) fn exports(lib: &Path) -> BTreeMap<String, u64> {
    let out = run_ok(Command::new("nm").args(["-D", "--defined-only"]).arg(lib));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let addr = u64::from_str_radix(f.next()?, 16).ok()?;
            let name = f.nth(1)?.split('@').next()?.to_string();
            Some((name, addr))
        })
        .collect()
}

/// The HIP functions probed by default that `lib` exports, with their addresses.
pub(crate) fn hooked_exports(lib: &Path) -> BTreeMap<String, u64> {
    let all = exports(lib);
    traced_by_default_names()
        .filter(|n| n.starts_with("hip"))
        .filter_map(|n| Some((n.to_string(), *all.get(n)?)))
        .collect()
}

pub(crate) fn logged_calls(r: &Real, log: &Path) -> Vec<LoggedCall> {
    let logged = read_log(log);
    assert!(
        logged.iter().all(|l| l.ret == r.ret),
        "ROCm {}: without a GPU every call returns {}",
        r.series,
        r.ret
    );
    logged
}

#[test]
fn run_traces_every_real_runtime_exactly_on_its_stubs() {
    let Some(reals) = reals("run_traces_every_real_runtime_exactly_on_its_stubs") else {
        return;
    };
    for r in reals {
        let dir = TempDir::new();
        let (log, raw) = (dir.path("real.log"), dir.path("calls.jsonl"));
        let out = run_ok(
            rocsync()
                .args(["run", "-v", "--raw"])
                .arg(&raw)
                .arg("--")
                .arg(&r.program)
                .env("SCENARIO_LOG", &log),
        );
        let stderr = stderr_of(&out);
        let logged = logged_calls(&r, &log);
        let hooked = hooked_exports(&r.hip);
        // The program calls every hooked function its library exports (every _spt one).
        for name in hooked.keys() {
            assert!(
                logged.iter().any(|l| &l.api == name),
                "ROCm {}: {name} is exported but not called",
                r.series
            );
        }
        let (_, calls) = read_raw(&raw);
        assert_same_calls(&logged, calls);
        let attached = format!("attached to {} (pid", r.hip.display());
        let line = stderr
            .lines()
            .find(|l| l.contains(&attached))
            .unwrap_or_else(|| panic!("ROCm {}: {stderr}", r.series));
        assert!(
            line.ends_with(&format!(": {} functions", hooked.len())),
            "{line}"
        );
        let hsa = format!("attached to {} (pid", r.hsa.display());
        assert!(stderr.contains(&hsa), "ROCm {}: HSA: {stderr}", r.series);
        let missing: Vec<&str> = traced_by_default_names()
            .filter(|n| n.starts_with("hip") && !hooked.contains_key(*n))
            .collect();
        if missing.is_empty() {
            assert!(!stderr.contains("does not export"), "{stderr}");
        } else {
            assert!(
                stderr.contains(&format!("does not export {}", missing.join(", "))),
                "ROCm {}: {stderr}",
                r.series
            );
        }
        assert_placements(&r, &stderr, &hooked);
    }
}

/// Each probe sits on its export: from 6.4 on every export is an `endbr64` dispatch stub,
/// probed just past the `endbr64` (4 bytes); 5.2's entries within their first bytes.
fn assert_placements(r: &Real, stderr: &str, hooked: &BTreeMap<String, u64>) {
    let mut seen = 0;
    for (l, offset, addr) in placements(stderr, hooked) {
        seen += 1;
        if r.ret == 100 {
            assert!(l.contains("after endbr64"), "ROCm {}: {l}", r.series);
            assert_eq!(offset, addr + 4, "ROCm {}: {l}", r.series);
        } else {
            assert!(
                (addr..addr + 16).contains(&offset),
                "ROCm {}: {l}",
                r.series
            );
        }
    }
    assert_eq!(seen, hooked.len(), "ROCm {}: placements shown", r.series);
}

/// The placements `-v` shows ("rocsync:   0x3dbc54 hipStreamWaitEvent: probe on `sub`
/// after endbr64 (…)") of the functions in `hooked`: (line, probe offset, export).
pub(crate) fn placements<'a>(
    stderr: &'a str,
    hooked: &BTreeMap<String, u64>,
) -> Vec<(&'a str, u64, u64)> {
    let mut found = Vec::new();
    for l in stderr.lines() {
        let Some(rest) = l.strip_prefix("rocsync:   0x") else {
            continue;
        };
        let (offset, rest) = rest.split_once(' ').unwrap();
        let offset = u64::from_str_radix(offset, 16).unwrap();
        let names = rest.split_once(':').unwrap().0;
        if let Some(&addr) = names.split(" = ").find_map(|n| hooked.get(n)) {
            found.push((l, offset, addr));
        }
    }
    found
}

#[test]
fn attach_traces_every_real_runtime_exactly() {
    let Some(reals) = reals("attach_traces_every_real_runtime_exactly") else {
        return;
    };
    for r in reals {
        let dir = TempDir::new();
        let log = dir.path("real.log");
        let mut target = gated(&r, &log);
        let raw = dir.path("calls.jsonl");
        let mut tracer = attach_and_start(&mut target, &raw);
        assert!(target.wait().unwrap().success());
        assert!(tracer.wait().unwrap().success());
        let (_, mut calls) = read_raw(&raw);
        // attach probes hipGetDevice for a while to learn devices; the default set does not.
        calls.retain(|c| c.api != "hipGetDevice");
        assert_same_calls(&logged_calls(&r, &log), calls);
    }
}

/// A daemon tracking every real runtime's program.
pub(crate) fn daemon_of(dir: &TempDir, reals: &[Real]) -> (Daemon, Lines) {
    let mut extra: Vec<&str> = Vec::new();
    for r in &reals[1..] {
        extra.extend(["--include-exe", r.program.to_str().unwrap()]);
    }
    start_daemon(dir, &reals[0].program, &extra)
}

/// The program, started and waiting for a line on stdin before its first call.
pub(crate) fn gated(r: &Real, log: &Path) -> std::process::Child {
    spawn_ready(
        Command::new(&r.program)
            .arg("gated")
            .env("SCENARIO_LOG", log)
            .stdin(Stdio::piped()),
    )
}

#[test]
fn a_daemon_trace_holds_every_real_runtime_call() {
    let name = "a_daemon_trace_holds_every_real_runtime_call";
    let Some(reals) = reals(name) else {
        return;
    };
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    let (daemon, mut lines) = daemon_of(&dir, &reals);
    let sock = dir.path("rocsync.sock");
    for r in &reals {
        let log = dir.path(&format!("real-{}.log", r.series));
        let mut target = gated(r, &log);
        let pid = target.id();
        lines.wait_for(&format!("tracking pid {pid}"));
        let client = rocsync()
            .args(["trace", "--pid", &pid.to_string(), "--duration", "3s"])
            .arg("--socket")
            .arg(&sock)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        lines.wait_for(&format!("recording pid(s) [{pid}]"));
        target.stdin.take().unwrap().write_all(b"go\n").unwrap();
        assert!(target.wait().unwrap().success());
        let out = client.wait_with_output().unwrap();
        assert!(out.status.success(), "ROCm {}: trace failed", r.series);
        let file = String::from_utf8(out.stdout).unwrap();
        let t = read_json(Path::new(file.trim()));
        assert_rows_match_log(&t, Some(pid), &logged_calls(r, &log));
    }
    stop(daemon);
}

#[test]
fn doctor_names_each_real_runtimes_release() {
    let Some(reals) = reals("doctor_names_each_real_runtimes_release") else {
        return;
    };
    for r in reals {
        // Found as a ROCm wheel of PyTorch carries them: torch/lib in the caller's venv,
        // under the bare names (no version in the file name to read).
        let dir = TempDir::new();
        let torch = dir.path("venv/lib/python3.11/site-packages/torch/lib");
        std::fs::create_dir_all(&torch).unwrap();
        std::os::unix::fs::symlink(&r.hip, torch.join("libamdhip64.so")).unwrap();
        std::os::unix::fs::symlink(&r.hsa, torch.join("libhsa-runtime64.so.1")).unwrap();
        let out = rocsync()
            .args(["doctor", "--json"])
            .env("VIRTUAL_ENV", dir.path("venv"))
            .output()
            .unwrap();
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let found: Vec<&str> = report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["status"] == "ok")
            .filter_map(|c| c["found"].as_str())
            .collect();
        let hip = format!("{}: ROCm {}, attached to", r.hip.display(), r.series);
        assert!(found.iter().any(|f| f.starts_with(&hip)), "{found:#?}");
        let hsa = format!("{}: attached to 6 functions", r.hsa.display());
        assert!(found.iter().any(|f| f.starts_with(&hsa)), "{found:#?}");
    }
}

#[test]
fn the_runtimes_fixtures_record_what_the_archive_served() {
    if reals("the_runtimes_fixtures_record_what_the_archive_served").is_none() {
        return;
    }
    for r in rocsync_tests::real_runtimes() {
        let packages = std::fs::read_to_string(r.lib.parent().unwrap().join("packages")).unwrap();
        let major = r.series.split('.').next().unwrap();
        let hip = packages
            .lines()
            .find(|l| l.starts_with(&format!("libamdhip64-{major} ")))
            .unwrap_or_else(|| panic!("{packages}"));
        assert!(
            hip.split(' ').nth(1).unwrap().starts_with(&r.series),
            "{hip}"
        );
    }
}

#[test]
fn run_through_an_explicit_loader_traces_the_program_it_loads() {
    let Some(reals) = reals("run_through_an_explicit_loader_traces_the_program_it_loads") else {
        return;
    };
    // How one runs a program against another libc: the loader is the command, and the
    // program it loads is what uses the runtime.
    for r in &reals[1..] {
        let dir = TempDir::new();
        let lib = r.hip.parent().unwrap();
        let loader = lib.join("ld-linux-x86-64.so.2");
        let lib = lib.to_str().unwrap();
        let program = r.program.to_str().unwrap();
        let (_, calls, _) = traced_run(&dir, &[], &loader, &["--library-path", lib, program]);
        assert_same_calls(&logged_calls(r, &dir.path("scenario.log")), calls);
    }
}

/// The daemon's budget prices a call by what the kernel does with the runtime's probed
/// instruction: 5.2's entries (`push %rbp`) are emulated, 6.4's and 7.2's stubs (`sub`
/// after `endbr64`) single-stepped, several times dearer (bench/real-runtime.md: 9.6 µs
/// a call on this VM, 0.8 emulated). Priced as the emulated kind, the budget took a
/// 7.2 process's probes for a tenth of what they cost it.
#[test]
fn the_budget_prices_each_real_runtimes_calls_by_its_probed_instruction() {
    let name = "the_budget_prices_each_real_runtimes_calls_by_its_probed_instruction";
    let Some(reals) = reals(name) else {
        return;
    };
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    let (daemon, mut lines) = daemon_of(&dir, &reals);
    let prices = lines
        .1
        .iter()
        .find(|l| l.contains("a probed call costs"))
        .cloned()
        .unwrap_or_default();
    assert!(
        prices.contains("where its probed instruction is single-stepped"),
        "{prices}"
    );
    let mut held = Vec::new();
    for r in &reals {
        let target = gated(r, &dir.path(&format!("real-{}.log", r.series)));
        lines.wait_for(&format!("tracking pid {}", target.id()));
        held.push(target);
    }
    let sock = dir.path("rocsync.sock");
    let priced = |pid: u32| -> Option<String> {
        let status: serde_json::Value =
            serde_json::from_str(&ask_daemon(&sock, &["status", "--json"])).unwrap();
        let p = status["tracked"]
            .as_array()?
            .iter()
            .find(|p| p["pid"] == pid)?;
        Some(p["probes"]["priced"].as_str()?.to_string())
    };
    for (r, target) in reals.iter().zip(&held) {
        let want = match r.ret {
            101 => "emulated",
            _ => "single_stepped",
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            match priced(target.id()) {
                Some(p) => {
                    assert_eq!(p, want, "ROCm {}", r.series);
                    break;
                }
                None if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(100))
                }
                None => panic!("ROCm {}: no budget measure in status", r.series),
            }
        }
    }
    for mut target in held {
        target.stdin.take().unwrap().write_all(b"go\n").unwrap();
        assert!(target.wait().unwrap().success());
    }
    stop(daemon);
}
