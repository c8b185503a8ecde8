//! The soak's unprivileged loads: each a Python script run as `nobody` (`setpriv` execs
//! the soak's own copy of the system's Python, so that the daemon, counting only the
//! soak's executables, counts them and nothing else of the machine's), stopped with
//! SIGTERM, its counts the JSON line it prints as it ends.

use std::{
    io::Read as _,
    path::Path,
    process::{Child, Command, Stdio},
    time::Duration,
};

use anyhow::{Context as _, Result};
use serde_json::{Value, json};

use super::daemon::wait_for;

pub(crate) const SCRIPTS: [(&str, &str); 7] = [
    ("stopping.py", include_str!("stopping.py")),
    ("churn.py", include_str!("churn.py")),
    ("dyno.py", include_str!("dyno.py")),
    ("slow.py", include_str!("slow.py")),
    ("threads.py", include_str!("threads.py")),
    ("comms.py", include_str!("comms.py")),
    ("flight.py", include_str!("flight.py")),
];
/// The soak's copy of Python, in its `bin` folder.
pub(crate) const PYTHON: &str = "soak-python3";

/// One unprivileged load: its name, its process.
pub(crate) struct Load(pub &'static str, Child);

impl Drop for Load {
    fn drop(&mut self) {
        if matches!(self.1.try_wait(), Ok(None)) {
            let _ = self.1.kill();
            let _ = self.1.wait();
        }
    }
}

/// The system's Python (root's own may live where nobody cannot read), copied to `to`.
pub(crate) fn copy_python(to: &Path) -> Result<()> {
    let system = if Path::new("/usr/bin/python3").exists() {
        std::fs::canonicalize("/usr/bin/python3")?
    } else {
        anyhow::bail!("no /usr/bin/python3: the loads are Python scripts")
    };
    std::fs::copy(&system, to).with_context(|| format!("copying {}", system.display()))?;
    Ok(())
}

pub(crate) fn start_load(
    name: &'static str,
    dir: &Path,
    logs: &Path,
    args: &[&str],
) -> Result<Load> {
    let err = std::fs::File::create(logs.join(format!("{name}.err")))?;
    let child = Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(dir.join("bin").join(PYTHON))
        .arg(dir.join("load").join(name))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(err)
        .spawn()
        .with_context(|| format!("starting {name} as nobody"))?;
    Ok(Load(name, child))
}

/// SIGTERM, then its counts (the JSON line it prints as it ends).
pub(crate) fn stop_load(mut load: Load) -> Result<Value> {
    let alive = load.1.try_wait()?.is_none();
    // SAFETY: signals a process this benchmark started.
    unsafe { libc::kill(load.1.id() as i32, libc::SIGTERM) };
    let clean = wait_for(&mut load.1, Duration::from_secs(20))?;
    let mut out = String::new();
    if let Some(mut o) = load.1.stdout.take() {
        o.read_to_string(&mut out)?;
    }
    let mut v: Value = out
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| json!({ "no_counts": out }));
    v["ran_to_the_end"] = alive.into();
    v["stopped_cleanly"] = clean.into();
    Ok(v)
}

/// The report's paragraph on the daemon and its loads.
pub(crate) fn describe(span: &str, dyno_rate: f64) -> String {
    use super::{
        CHURN_RATE, COMM_JOBS, DYNO_RATE, FLAGS, FLIGHT_PAUSE_S, SLOW_PER_PORT, THREAD_BURST_MS,
    };
    let flags = FLAGS.join(" ");
    format!(
        "The release daemon, as root, with its own socket, lock, state directory, and \
         `/metrics` and dynolog ports on 127.0.0.1, `{flags}`, counting the processes of \
         `nobody` and root that run the soak's own copies of Python, the scenario program \
         and the rank program (`--user nobody --user root --include-exe …`: the loads and \
         the witness; the machine's other work, root's included, is left alone, and stays \
         out of its figures), ran {span} under six loads at once, all as `nobody` \
         (`setpriv --reuid=nobody --regid=nogroup --clear-groups`):\n\
         - **churn** (`soak/churn.py`): {CHURN_RATE} a second, a short-lived process copies \
         the Debian libamdhip64.so.5 (a real 14 MB ELF) under a fresh name, dlopens it, \
         holds it 0.2–2 s and goes: a quarter delete the copy while it is mapped, a quarter \
         SIGKILL themselves;\n\
         - **dyno flood** (`soak/dyno.py`): {DYNO_RATE} requests a second asked on the \
         dynolog port by 8 threads, each waiting for its answer ({dyno_rate:.0} a second \
         made), most malformed or refused (bad or huge lengths, torn bodies, not JSON, deep \
         nesting, log files outside the state directory, control characters, too many \
         pids), some valid: a 50–200 ms trace of every tracked process, or one waiting for \
         a synchronized start up to an hour ahead;\n\
         - **slow connections** (`soak/slow.py`): {SLOW_PER_PORT} held on each port — \
         silent, trickling a byte a second, or (metrics) never reading the answer — each \
         replaced as the daemon closes it; the dynolog ones during the first half of each \
         minute only (they take the same user's share of the reading slots as the flood);\n\
         - **thread churn** (`soak/threads.py`): the scenario program's `churn` mode for \
         {THREAD_BURST_MS} ms at a time (a quarter of that paused between): batches of 32 \
         short-lived threads, each making one `hipStreamSynchronize(0)` through the \
         simulated runtime, as fast as they come;\n\
         - **communicator floods** (`soak/comms.py`): {COMM_JOBS} single-rank jobs of the \
         rank program alive at a time, each with a fresh random unique id: \
         `ncclCommInitRank`, 63 `ncclCommSplit`s, 3 collectives, exit;\n\
         - **flight dumps** (`soak/flight.py`): `rocsync trace --flight` asked over the \
         socket (nobody is in `--group nogroup`) as soon as the last was answered, \
         {FLIGHT_PAUSE_S} s apart.\n\n\
         Beside them, root's **witness** (`witness.rs`): every 30 s the scenario program's \
         `loop` on devices 0 and 1 for 2 s, and once midway a `hipStreamSynchronize` \
         blocked 8 s (a hang at the default `--hang-after` of 5 s), each gated until the \
         daemon said it tracked it and logging its calls (`$SCENARIO_LOG`).\n\n\
         Sampled every 15 s: the daemon's descriptors (`/proc/PID/fd`, by kind), the \
         system's BPF links (walked by id, as `bpftool link list`), its resident memory \
         and one root `/metrics` scrape (connect to close; median of 3, the slowest in \
         \"peak\"). Baseline: idle, 10 s after start. Settled: after the load stopped, \
         polled every second until the descriptors, links, threads and heap (within 10 %) \
         were back at the baseline, at most 60 s.\n"
    )
}
