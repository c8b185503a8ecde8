//! `rocsync daemon`: a process started after the daemon is found (its exec announced by
//! the probes), its calls counted in the kernel, and `/metrics` — parsed by Prometheus's
//! own Python client — says exactly what the process's log says; SIGTERM ends the daemon
//! with status 0. Needs root, and `ROCSYNC_HTA_PYTHON` (a Python with prometheus_client;
//! `cargo xtask test` sets it).

mod common;

use std::{
    collections::BTreeMap,
    io::{Read as _, Write as _},
    net::TcpStream,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use common::*;
use rocsync_tests::{prom_script, read_log, scenario};

fn get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn the_daemon_counts_a_new_process_calls_exactly() {
    let name = "the_daemon_counts_a_new_process_calls_exactly";
    if !can_trace(name) {
        return;
    }
    let Some(python) = std::env::var_os("ROCSYNC_HTA_PYTHON") else {
        rocsync_tests::skip(
            name,
            "ROCSYNC_HTA_PYTHON is not set (cargo xtask test sets it)",
        );
        return;
    };
    let dir = TempDir::new();
    let exe = scenario();
    let mut daemon = spawn_piped(
        rocsync()
            .args(["daemon", "--metrics-addr", "127.0.0.1:0", "--state-dir"])
            .arg(dir.path("state"))
            // Only this test's program: others on the machine may map the same runtime.
            .arg("--include-exe")
            .arg(&exe),
    );
    let mut lines = Lines::of(daemon.stderr.take().unwrap());
    lines.wait_for("metrics on http://");
    let addr = lines.1.last().unwrap().split("http://").nth(1).unwrap();
    let addr = addr.trim_end_matches("/metrics").to_string();
    lines.wait_for("SIGTERM stops");

    // Started after the daemon, held at a gate until the daemon says it tracks it.
    let log = dir.path("scenario.log");
    let mut target = Command::new(&exe)
        .args(["gated", "basic"])
        .env("SCENARIO_LOG", &log)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    Lines::of(target.stdout.take().unwrap()).wait_for("ready");
    lines.wait_for(&format!("tracking pid {}", target.id()));
    target.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(target.wait().unwrap().success());

    let response = get(&addr, "/metrics");
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let mut parse = Command::new(python)
        .arg(prom_script())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    parse
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let parsed = parse.wait_with_output().unwrap();
    assert!(
        parsed.status.success(),
        "prometheus_client rejected:\n{body}"
    );
    let v: serde_json::Value = serde_json::from_slice(&parsed.stdout).unwrap();
    assert_eq!(v["types"]["rocsync_sync_wait_seconds"], "histogram");
    assert_eq!(v["types"]["rocsync_sync_calls"], "counter");
    // Sum each series over devices, by API.
    let mut sums: BTreeMap<(String, String), f64> = BTreeMap::new();
    for s in v["samples"].as_array().unwrap() {
        let api = s[1]["api"].as_str().unwrap_or("").to_string();
        *sums
            .entry((s[0].as_str().unwrap().to_string(), api))
            .or_default() += s[2].as_f64().unwrap();
    }
    let sum = |metric: &str, api: &str| {
        sums.get(&(metric.to_string(), api.to_string()))
            .copied()
            .unwrap_or(0.0) as usize
    };
    let logged = probed(&read_log(&log));
    let mut apis: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for l in &logged {
        let e = apis.entry(l.api.as_str()).or_default();
        e.0 += 1;
        e.1 += usize::from(l.ret != 0);
    }
    assert!(apis.len() > 5, "{apis:?}");
    for (api, (calls, errors)) in &apis {
        assert_eq!(sum("rocsync_sync_calls_total", api), *calls, "{api} calls");
        assert_eq!(
            sum("rocsync_sync_call_errors_total", api),
            *errors,
            "{api} errors"
        );
        let timed =
            api.contains("Synchronize") || api.contains("WaitEvent") || api.contains("Query");
        if timed {
            assert_eq!(
                sum("rocsync_sync_wait_seconds_count", api),
                *calls,
                "{api} timed"
            );
        }
    }
    assert_eq!(v["types"]["rocsync_tracked_processes"], "gauge");
    assert_eq!(v["types"]["rocsync_dropped_records"], "counter");
    assert!(get(&addr, "/healthz").ends_with("ok\n"));
    assert!(get(&addr, "/nope").starts_with("HTTP/1.1 404"));

    // SIGTERM: exits 0, promptly.
    // SAFETY: signals the daemon this test started.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    let start = Instant::now();
    let status = loop {
        if let Some(s) = daemon.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "the daemon did not stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
}
