//! Helpers of the daemon tests: a daemon of a test's own, its HTTP endpoint, its stop.

use crate::common::{End as _, Reaped};
use std::{
    collections::BTreeMap,
    ffi::OsStr,
    io::{Read as _, Write as _},
    net::TcpStream,
    path::{Path, PathBuf},
    process::{Child, ChildStdin, Command, Stdio},
};

use super::{Gated, Lines, TempDir, rocsync, run_ok, spawn_piped};

/// The daemon's `/metrics` parsed by Prometheus's own Python client (`python` has
/// prometheus_client): each (metric, api) summed over the other labels, and each
/// metric family's type.
pub(crate) struct Metrics {
    pub sums: BTreeMap<(String, String), f64>,
    /// (metric, api, device) → value.
    pub by_device: BTreeMap<(String, String, String), f64>,
    pub types: serde_json::Value,
    /// Every sample: (metric, labels, value).
    pub samples: Vec<(String, serde_json::Value, f64)>,
}

impl Metrics {
    pub(crate) fn scrape(python: &OsStr, addr: &str) -> Metrics {
        let response = get(addr, "/metrics");
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let mut parse = Command::new(python)
            .arg(rocsync_tests::prom_script())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = parse.stdin.take().unwrap();
        stdin.write_all(body.as_bytes()).unwrap();
        drop(stdin);
        let parsed = parse.wait_with_output().unwrap();
        assert!(
            parsed.status.success(),
            "prometheus_client rejected:\n{body}"
        );
        let v: serde_json::Value = serde_json::from_slice(&parsed.stdout).unwrap();
        let (mut sums, mut by_device, mut samples) = (BTreeMap::new(), BTreeMap::new(), Vec::new());
        for s in v["samples"].as_array().unwrap() {
            let metric = s[0].as_str().unwrap().to_string();
            samples.push((metric.clone(), s[1].clone(), s[2].as_f64().unwrap()));
            let api = s[1]["api"].as_str().unwrap_or("").to_string();
            let device = s[1]["device"].as_str().unwrap_or("").to_string();
            let value = s[2].as_f64().unwrap();
            *sums.entry((metric.clone(), api.clone())).or_default() += value;
            *by_device.entry((metric, api, device)).or_default() += value;
        }
        Metrics {
            sums,
            by_device,
            types: v["types"].clone(),
            samples,
        }
    }

    /// The sample of `metric` whose `label` is `value`, if the exposition has it.
    pub(crate) fn labelled(&self, metric: &str, label: &str, value: &str) -> Option<f64> {
        self.samples
            .iter()
            .find(|(m, l, _)| m == metric && l[label] == value)
            .map(|s| s.2)
    }

    /// One metric of one API on one device.
    pub(crate) fn on(&self, metric: &str, api: &str, device: &str) -> usize {
        self.by_device
            .get(&(metric.to_string(), api.to_string(), device.to_string()))
            .copied()
            .unwrap_or(0.0) as usize
    }

    /// One metric of one API, summed over devices.
    pub(crate) fn sum(&self, metric: &str, api: &str) -> usize {
        self.sums
            .get(&(metric.to_string(), api.to_string()))
            .copied()
            .unwrap_or(0.0) as usize
    }
}

/// A trace's `cuda_runtime` rows (one per call), in call order.
pub(crate) fn runtime_rows(t: &serde_json::Value) -> Vec<&serde_json::Value> {
    let mut rows: Vec<&serde_json::Value> = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "cuda_runtime")
        .collect();
    rows.sort_by_key(|e| e["args"]["correlation"].as_u64());
    rows
}

/// The address of `/metrics` the daemon printed.
pub(crate) fn metrics_addr(lines: &Lines) -> String {
    lines
        .1
        .iter()
        .find_map(|l| l.split("http://").nth(1))
        .unwrap()
        .trim_end_matches("/metrics")
        .to_string()
}

/// One GET over HTTP/1.1; the whole response.
pub(crate) fn get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    // A daemon held (in the kernel, say) fails the test rather than hanging it.
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    if let Err(e) = s.read_to_string(&mut out) {
        let threads = super::stuck::listener_threads(addr);
        panic!("the daemon did not answer {path} within 30 s: {e}\n{threads}");
    }
    out
}

/// A folder of `nobody`'s in the test's directory, for a neighbour's run (its scratch,
/// its log), the directory opened for it to reach the test's programs.
pub(crate) fn nobodys_folder(dir: &TempDir, name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(dir.path(""), std::fs::Permissions::from_mode(0o755)).unwrap();
    let theirs = dir.path(name);
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    theirs
}

/// A daemon test's start: tracing possible (or a printed skip), a directory of its own
/// and its own copy of the scenario.
pub(crate) fn daemon_test(name: &str) -> Option<(TempDir, PathBuf)> {
    if !super::can_trace(name) {
        return None;
    }
    let dir = TempDir::new();
    let exe = own_copy(&dir);
    Some((dir, exe))
}

/// The Python with prometheus_client the metrics are parsed with (`ROCSYNC_HTA_PYTHON`,
/// set by `cargo xtask test`), or a printed skip.
pub(crate) fn prometheus_python(name: &str) -> Option<std::ffi::OsString> {
    let python = std::env::var_os("ROCSYNC_HTA_PYTHON");
    if python.is_none() {
        rocsync_tests::skip(
            name,
            "ROCSYNC_HTA_PYTHON is not set (cargo xtask test sets it)",
        );
    }
    python
}

/// [`daemon_test`] of a test that also reads `/metrics` with prometheus_client: the
/// test's directory, its scenario copy and the Python to parse with.
pub(crate) fn metrics_test(name: &str) -> Option<(TempDir, PathBuf, std::ffi::OsString)> {
    let (dir, exe) = daemon_test(name)?;
    let python = prometheus_python(name)?;
    Some((dir, exe, python))
}

/// The scenario program under a path of this test's own, for the daemon's filter: other
/// tests (and other daemons) run scenarios at the same time.
pub(crate) fn own_copy(dir: &TempDir) -> PathBuf {
    own_copy_of(dir, &rocsync_tests::scenario(), "scenario")
}

/// The dlopen scenario program under a path of this test's own, as [`own_copy`].
pub(crate) fn own_copy_dlopen(dir: &TempDir) -> PathBuf {
    own_copy_of(dir, &rocsync_tests::scenario_dlopen(), "scenario_dlopen")
}

/// The call loop (`bench_calls`) under a path of this test's own, as [`own_copy`].
pub(crate) fn own_bench_calls(dir: &TempDir) -> PathBuf {
    own_copy_of(dir, &rocsync_tests::bench_calls(), "bench_calls")
}

/// The job of rank processes (`nccl_ranks`) under a path of this test's own.
pub(crate) fn own_nccl_ranks(dir: &TempDir) -> PathBuf {
    own_copy_of(dir, &rocsync_tests::nccl_ranks(), "nccl_ranks")
}

fn own_copy_of(dir: &TempDir, program: &std::path::Path, name: &str) -> PathBuf {
    let exe = dir.path(name);
    std::fs::copy(program, &exe).unwrap();
    exe
}

/// A daemon a test started: ended if the test fails midway (a panic never leaves it
/// running, its probes attached).
pub(crate) struct Daemon(pub Child);

impl std::ops::Deref for Daemon {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Daemon {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            // SAFETY: signals the daemon this test started, still running.
            unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
            let _ = self.0.wait();
        }
    }
}

/// A daemon counting only `exe`, with its socket, state and node lock in `dir` (tests
/// run daemons side by side; `extra` may name another lock or metrics address), not
/// started.
pub(crate) fn daemon_command(dir: &TempDir, exe: &std::path::Path, extra: &[&str]) -> Command {
    let mut cmd = rocsync();
    cmd.arg("daemon");
    if !extra.contains(&"--metrics-addr") {
        cmd.args(["--metrics-addr", "127.0.0.1:0"]);
    }
    cmd.arg("--state-dir")
        .arg(dir.path("state"))
        .arg("--socket")
        .arg(dir.path("rocsync.sock"))
        .arg("--include-exe")
        .arg(exe)
        .args(extra);
    if !extra.contains(&"--lock") {
        cmd.arg("--lock").arg(dir.path("daemon.lock"));
    }
    // The tests compare counts with their scenarios' logs: exact, unless one tests the
    // duty cycle (its loops are over the default budget).
    if !extra.contains(&"--budget-mode") {
        cmd.args(["--budget-mode", "shed-only"]);
    }
    cmd
}

/// Starts [`daemon_command`]'s daemon; returns it with its stderr lines, once ready.
pub(crate) fn start_daemon(
    dir: &TempDir,
    exe: &std::path::Path,
    extra: &[&str],
) -> (Daemon, Lines) {
    let mut daemon = Daemon(spawn_piped(&mut daemon_command(dir, exe, extra)));
    let mut lines = Lines::of(daemon.stderr.take().unwrap());
    lines.wait_for("SIGTERM stops");
    (daemon, lines)
}

/// A scenario process calling the runtime in a loop for `ms` (its log `dir/loop.log`),
/// returned once the daemon says it tracks it.
pub(crate) fn tracked_loop(
    dir: &TempDir,
    exe: &std::path::Path,
    lines: &mut Lines,
    ms: u32,
) -> Reaped {
    tracked_loop_with(dir, exe, lines, ms, &[])
}

/// [`tracked_loop`] with more environment; its log is `dir/loop-<name><value>….log`.
pub(crate) fn tracked_loop_with(
    dir: &TempDir,
    exe: &std::path::Path,
    lines: &mut Lines,
    ms: u32,
    env: &[(&str, &str)],
) -> Reaped {
    let suffix: String = env.iter().map(|(k, v)| format!("-{k}{v}")).collect();
    let target = Command::new(exe)
        .args(["loop", &ms.to_string()])
        .envs(env.iter().copied())
        .env("SCENARIO_LOG", dir.path(&format!("loop{suffix}.log")))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let target = Reaped(target);
    lines.wait_for(&format!("tracking pid {}", target.id()));
    target
}

/// `rocsync ARGS --socket SOCK`, a client of the daemon, which must succeed: its stdout.
pub(crate) fn ask_daemon(sock: &std::path::Path, args: &[&str]) -> String {
    let out = run_ok(rocsync().args(args).arg("--socket").arg(sock));
    String::from_utf8(out.stdout).unwrap()
}

/// One message to the daemon's dynolog port in dynolog's framing (a native-endian i32
/// length, then JSON); the answer.
pub(crate) fn dyno_exchange(addr: &str, request: &str) -> serde_json::Value {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&(request.len() as i32).to_ne_bytes()).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut body = vec![0; i32::from_ne_bytes(len) as usize];
    s.read_exact(&mut body).unwrap();
    serde_json::from_slice(&body).unwrap()
}

/// The daemon's `status --json` answer.
pub(crate) fn daemon_status(sock: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&ask_daemon(sock, &["status", "--json"])).unwrap()
}

pub(crate) fn stop(mut daemon: Daemon) {
    // SAFETY: signals the daemon this test started.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    assert!(daemon.wait().unwrap().success());
}

/// The kernel's count of `api` calls so far (`rocsync_sync_calls_total`, every device).
pub(crate) fn calls_counted(addr: &str, api: &str) -> u64 {
    let prefix = format!("rocsync_sync_calls_total{{api=\"{api}\"");
    get(addr, "/metrics")
        .lines()
        .filter(|l| l.starts_with(&prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// Waits (at most 20 s) until `more` calls of `api` are counted past `from`; the count.
pub(crate) fn wait_for_calls(addr: &str, api: &str, from: u64, more: u64) -> u64 {
    let start = std::time::Instant::now();
    loop {
        let n = calls_counted(addr, api);
        if n >= from + more {
            return n;
        }
        assert!(
            start.elapsed().as_secs() < 20,
            "{api}: {n} calls counted, {from} + {more} awaited"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// One sample of a series' value from the daemon's `/metrics` (summed over its label
/// sets; `series` may hold the first labels, up to a `,`); 0 when absent.
pub(crate) fn metric(addr: &str, series: &str) -> f64 {
    get(addr, "/metrics")
        .lines()
        .filter(|l| l.starts_with(series) && l[series.len()..].starts_with([' ', '{', ',']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>()
        .max(0.0)
}

/// Polls `ok` until it holds, or panics after `secs` with `what`.
pub(crate) fn until(secs: u64, what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while !ok() {
        assert!(std::time::Instant::now() < deadline, "{what}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Starts the scenario `exe`'s `args` (a gated loop of records, waits and synchronizes
/// whose records and waits alone cost more than the budget), lets it go once the daemon
/// tracks it, and waits until the daemon says it duty-cycles them: the target, and what
/// the daemon said.
pub(crate) fn until_duty_cycled(
    exe: &Path,
    args: &[&str],
    log: &Path,
    lines: &mut Lines,
) -> (Gated, String) {
    let mut target = Gated::start(
        std::process::Command::new(exe)
            .args(["gated"])
            .args(args)
            .env("SCENARIO_LOG", log),
    );
    let pid = target.child.id();
    target.open_when_tracked(lines);
    lines.wait_for(&format!(
        "budget: pid {pid}'s records and waits alone cost "
    ));
    let said = lines.1.last().unwrap().clone();
    assert!(said.contains("duty-cycled from now"), "{said}");
    (target, said)
}
