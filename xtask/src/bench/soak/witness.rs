//! The soak's well-behaved process: root's, beside the unprivileged loads. Every 30 s
//! the scenario program's `loop` on two devices for 2 s, and once, midway, a
//! synchronisation blocked 8 s (a hang at the daemon's default `--hang-after` of 5 s),
//! each logging its calls to `$SCENARIO_LOG` and gated until the daemon says it tracks
//! it (none of its calls is made before). At the end its calls on `/metrics` are compared
//! with its logs, and its hang's trace is looked for.

use std::{
    collections::BTreeMap,
    io::{BufRead as _, BufReader, Write as _},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use super::daemon::{Tracked, wait_for};

const EVERY: Duration = Duration::from_secs(30);
const LOOP_MS: &str = "2000";
/// The blocked synchronisation, in µs.
const HANG_US: &str = "8000000";

/// What the witness ran: each run's kind, pid and what went wrong, if anything.
#[derive(Default)]
pub(crate) struct Ran {
    pub runs: Vec<(&'static str, u32, Option<String>)>,
    pub logs: Vec<PathBuf>,
    pub hang_pid: Option<u32>,
}

pub(crate) struct Witness {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Ran>,
}

/// Starts the witness for `load_for`: loops 5 s in and every 30 s while one ends 10 s
/// before the load does, the hang in the middle between two.
pub(crate) fn start(exe: PathBuf, dir: PathBuf, tracked: Tracked, load_for: Duration) -> Witness {
    let stop = Arc::new(AtomicBool::new(false));
    let halt = stop.clone();
    let thread = std::thread::spawn(move || {
        let start = Instant::now();
        let secs = load_for.as_secs_f64();
        let mut plan: Vec<(f64, &'static str)> = Vec::new();
        let mut at = 5.0;
        while at + 12.0 < secs {
            plan.push((at, "loop"));
            at += EVERY.as_secs_f64();
        }
        let mid = ((secs / 2.0 - 20.0) / 30.0).floor().max(0.0) * 30.0 + 20.0;
        plan.push((mid, "hang"));
        plan.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut ran = Ran::default();
        for (n, (at, kind)) in plan.into_iter().enumerate() {
            while start.elapsed().as_secs_f64() < at && !halt.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
            }
            if halt.load(Ordering::Relaxed) {
                break;
            }
            let log = dir.join(format!("{kind}-{n}.log"));
            let args: &[&str] = match kind {
                "loop" => &["gated", "loop", LOOP_MS, "2"],
                _ => &["gated", "stall", "1", HANG_US],
            };
            let (pid, err) = match run_one(&exe, args, &log, &tracked) {
                Ok(pid) => (pid, None),
                Err((pid, e)) => (pid, Some(format!("{e:#}"))),
            };
            if kind == "hang" {
                ran.hang_pid = Some(pid);
            }
            ran.runs.push((kind, pid, err));
            ran.logs.push(log);
        }
        ran
    });
    Witness { stop, thread }
}

impl Witness {
    pub(crate) fn stop(self) -> Ran {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

/// One gated run: its pid, or its pid (0 before it started) and what went wrong.
fn run_one(
    exe: &Path,
    args: &[&str],
    log: &Path,
    tracked: &Tracked,
) -> Result<u32, (u32, anyhow::Error)> {
    let started = Instant::now();
    let mut child = Command::new(exe)
        .args(args)
        .env("SCENARIO_LOG", log)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| (0, e.into()))?;
    let pid = child.id();
    let mut go = || -> Result<()> {
        // Held open until it has exited: it writes again after its gate.
        let mut out = BufReader::new(child.stdout.take().context("stdout")?);
        let mut first = String::new();
        out.read_line(&mut first)?;
        if first.trim() != "ready" {
            bail!("said {first:?} at its gate");
        }
        let until = Instant::now() + Duration::from_secs(30);
        // Said of this process, not of an earlier one with its pid.
        let said = || {
            tracked
                .lock()
                .is_ok_and(|t| t.get(&pid).is_some_and(|&at| at > started))
        };
        while !said() {
            if Instant::now() > until {
                bail!("not tracked within 30 s");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        child.stdin.take().context("stdin")?.write_all(b"go\n")?;
        if !wait_for(&mut child, Duration::from_secs(60))? {
            bail!("still running after 60 s");
        }
        let status = child.wait()?;
        drop(out);
        if !status.success() {
            bail!("exited {status}");
        }
        Ok(())
    };
    let r = go();
    let _ = child.kill();
    let _ = child.wait();
    r.map(|()| pid).map_err(|e| (pid, e))
}

/// Its logged calls by (API, device): a thread's device is the last it set (0 before).
fn logged(ran: &Ran) -> BTreeMap<(String, String), u64> {
    let mut n = BTreeMap::new();
    for log in ran.logs.iter().filter(|l| l.exists()) {
        let mut device = BTreeMap::new();
        for c in rocsync_tests::read_log(log) {
            // A hipSetDevice counts under the device current before it (as the daemon's).
            let d = device.get(&c.tid).copied().unwrap_or(0);
            if c.api == "hipSetDevice" {
                device.insert(c.tid, c.args[0]);
            }
            *n.entry((c.api, d.to_string())).or_default() += 1;
        }
    }
    n
}

/// `/metrics`' `metric{…api="A",device="D"…} V`, summed by (A, D).
fn on_metrics(body: &str, metric: &str) -> BTreeMap<(String, String), u64> {
    let label = |l: &str, k: &str| -> String {
        l.split(&format!("{k}=\""))
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or("")
            .to_string()
    };
    let mut n = BTreeMap::new();
    for l in body
        .lines()
        .filter(|l| l.starts_with(&format!("{metric}{{")))
    {
        let v: f64 = l
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        *n.entry((label(l, "api"), label(l, "device"))).or_default() += v as u64;
    }
    n
}

/// The comparison: device 1 is the witness's alone (the loads call on device 0), so its
/// counts there must equal its logs'; device 0's are shown, shared with the loads.
pub(crate) fn check(ran: &Ran, metrics: &str, state: &Path) -> Value {
    let mine = logged(ran);
    let seen = on_metrics(metrics, "rocsync_sync_calls_total");
    let estimated = on_metrics(metrics, "rocsync_sync_calls_estimated_total");
    let mut rows = Vec::new();
    let mut exact = true;
    let keys: std::collections::BTreeSet<_> = mine.keys().chain(seen.keys()).cloned().collect();
    for (api, device) in keys {
        let (l, m) = (
            mine.get(&(api.clone(), device.clone())),
            seen.get(&(api.clone(), device.clone())),
        );
        let own = device == "1";
        let same = l.copied().unwrap_or(0) == m.copied().unwrap_or(0);
        if own {
            exact &= same;
        }
        if own || l.is_some() {
            rows.push(json!({"api": api, "device": device, "logged": l, "metrics": m,
                "estimated": estimated.get(&(api.clone(), device.clone())), "compared": own, "equal": same}));
        }
    }
    let hang = ran.hang_pid.map(|pid| hang_trace(state, pid));
    let failed: Vec<Value> = (ran.runs.iter().filter(|r| r.2.is_some()))
        .map(|r| json!({"kind": r.0, "pid": r.1, "error": r.2}))
        .collect();
    json!({
        "runs": ran.runs.len(), "failed_runs": failed, "exact": exact && failed.is_empty(),
        "calls": rows, "hang": hang,
    })
}

/// The hang trace of `pid` in the state folder (its `.json`, not the `.owner` beside it):
/// its file and how its hang ended.
fn hang_trace(state: &Path, pid: u32) -> Value {
    let mut stack = vec![state.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
            } else if name.starts_with("hang-")
                && name.contains(&format!("-{pid}-"))
                && name.ends_with(".json")
            {
                let t: Value = std::fs::read(&p)
                    .ok()
                    .and_then(|b| serde_json::from_slice(&b).ok())
                    .unwrap_or(Value::Null);
                let hang = &t["rocsync"]["parameters"]["hang"];
                return json!({"pid": pid, "file": name, "ended": hang["ended"], "found": true});
            }
        }
    }
    json!({"pid": pid, "found": false})
}

/// The report's section on the witness, from [`check`]'s JSON.
pub(crate) fn markdown(w: &Value) -> String {
    use std::fmt::Write as _;
    let mut md = String::from("\n### The well-behaved root process\n\n");
    let exact = w["exact"].as_bool().unwrap_or(false);
    let _ = writeln!(
        md,
        "{} runs; its counts on device 1 (its alone) against its logs: **{}**. Its calls by \
         API and device (`rocsync_sync_calls_total`; device 0 also counts the loads' calls, \
         so it is shown, not compared):\n\n\
         | API | device | logged | on `/metrics` | estimated | |\n| --- | --- | ---: | ---: | ---: | --- |",
        w["runs"],
        if exact { "exact" } else { "not exact" }
    );
    let n = |v: &Value| v.as_u64().map_or("–".to_string(), |v| v.to_string());
    for c in w["calls"].as_array().into_iter().flatten() {
        let verdict = match (c["compared"].as_bool(), c["equal"].as_bool()) {
            (Some(true), Some(true)) => "equal",
            (Some(true), _) => "**differs**",
            _ => "shared with the loads",
        };
        let _ = writeln!(
            md,
            "| `{}` | {} | {} | {} | {} | {verdict} |",
            c["api"].as_str().unwrap_or(""),
            c["device"].as_str().unwrap_or(""),
            n(&c["logged"]),
            n(&c["metrics"]),
            n(&c["estimated"])
        );
    }
    for f in w["failed_runs"].as_array().into_iter().flatten() {
        let _ = writeln!(md, "\nA run that failed: `{f}`.");
    }
    let h = &w["hang"];
    let _ = writeln!(
        md,
        "\nIts 8 s hang (pid {}): {}.",
        h["pid"],
        if h["found"].as_bool().unwrap_or(false) {
            format!(
                "traced, `{}`, its hang ended `{}`",
                h["file"].as_str().unwrap_or(""),
                h["ended"]
            )
        } else {
            "**no hang trace found** in the state directory".to_string()
        }
    );
    md
}
