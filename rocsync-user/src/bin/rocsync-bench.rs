//! Measurements behind `cargo xtask bench` (root: it loads eBPF programs).
//!
//! `probes`   per-call cost of one library function: untraced, under an empty
//!            uprobe+uretprobe pair (the trap alone), and under rocsync's full capture.
//! `pipeline` userspace throughput of decode → resolve → Kineto write, and peak memory.
//! Each prints JSON lines; xtask interleaves the runs and writes the tables.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use anyhow::{Context as _, Result, bail};
use aya::programs::{UProbe, uprobe::UProbeScope};
use clap::{Parser, Subcommand};
use rocsync::{
    capture::sequence::Sequencer,
    target::symbols,
    trace::{
        call::Call,
        kineto::{KinetoWriter, TraceInfo},
        stream::TraceStream,
    },
};
use rocsync_common::{Api, CallRecord, Decoded, RECORD_CALL, decode};
use serde_json::json;

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// One measurement of one mode: prints {"mode", "ns_per_call", ...}.
    Probes {
        #[arg(long)]
        mode: Mode,
        #[arg(long)]
        lib: PathBuf,
        #[arg(long)]
        symbol: String,
        #[arg(long)]
        calls: u64,
        #[arg(long, default_value_t = 1)]
        threads: u32,
        /// Pace the calls to this many per second over all threads (default: flat out)
        #[arg(long)]
        rate: Option<u64>,
        /// The call-loop driver (tests' bench_calls)
        #[arg(long)]
        driver: PathBuf,
        /// rocsync binary for the full capture
        #[arg(long)]
        rocsync: PathBuf,
        /// Extra rocsync arguments (full mode)
        #[arg(long, allow_hyphen_values = true)]
        extra: Vec<String>,
    },
    /// Decode, resolve and write `records` synthetic records on one core.
    Pipeline {
        #[arg(long)]
        records: u64,
        /// Create and destroy an event per iteration (handles never reused)
        #[arg(long)]
        churn: bool,
    },
}

#[derive(Clone, Copy, clap::ValueEnum, PartialEq)]
enum Mode {
    Untraced,
    Empty,
    EmptyAtEntry,
    Full,
}

fn main() -> Result<()> {
    match Cli::parse().cmd {
        Cmd::Probes {
            mode,
            lib,
            symbol,
            calls,
            threads,
            rate,
            driver,
            rocsync,
            extra,
        } => {
            let load = Load {
                calls,
                threads,
                rate,
            };
            probes(mode, &lib, &symbol, load, &driver, &rocsync, &extra)
        }
        Cmd::Pipeline { records, churn } => pipeline(records, churn),
    }
}

/// How the driver calls: how many calls per thread, how many threads, how fast.
struct Load {
    calls: u64,
    threads: u32,
    rate: Option<u64>,
}

impl Load {
    fn args(&self) -> Vec<String> {
        let mut a = vec![self.calls.to_string(), self.threads.to_string()];
        a.extend(self.rate.map(|r| r.to_string()));
        a
    }
}

fn probes(
    mode: Mode,
    lib: &Path,
    symbol: &str,
    load: Load,
    driver: &Path,
    rocsync: &Path,
    extra: &[String],
) -> Result<()> {
    let mut cmd = Command::new(driver);
    cmd.arg(lib).arg(symbol).args(load.args());
    let mut ebpf = None;
    let mut full = None;
    match mode {
        Mode::Untraced => {}
        Mode::Empty | Mode::EmptyAtEntry => {
            let r = symbols::resolve(lib, &[symbol])?;
            let f = r
                .found
                .first()
                .with_context(|| format!("{symbol} not in {}", lib.display()))?;
            let offset = if mode == Mode::Empty {
                f.placement.offset
            } else {
                f.offset
            };
            let mut obj = aya::Ebpf::load(rocsync::PROBES)?;
            for name in ["empty_enter", "empty_exit"] {
                let p: &mut UProbe = obj.program_mut(name).context(name)?.try_into()?;
                p.load()?;
                p.attach(offset, lib, UProbeScope::AllProcesses)?;
            }
            ebpf = Some(obj);
        }
        Mode::Full => {
            let mut c = Command::new(rocsync);
            c.args(["run", "-o", "/dev/null"])
                .args(extra)
                .arg("--")
                .arg(driver);
            c.arg(lib).arg(symbol).args(load.args());
            full = Some(c);
        }
    }
    let out = match full.as_mut() {
        Some(c) => c.output()?,
        None => cmd.output()?,
    };
    drop(ebpf);
    if !out.status.success() {
        bail!("driver failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .rfind(|l| l.starts_with('{'))
        .context("driver printed no result")?;
    let mut v: serde_json::Value = serde_json::from_str(line)?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let count = |prefix: &str| {
        stderr.lines().find_map(|l| {
            let rest = l.trim().strip_prefix(prefix)?;
            rest.split_whitespace().next()?.parse::<u64>().ok()
        })
    };
    if mode == Mode::Full {
        v["captured"] = json!(count("rocsync: captured"));
        v["dropped"] = json!(count("dropped:"));
    }
    v["mode"] = json!(match mode {
        Mode::Untraced => "untraced",
        Mode::Empty => "empty",
        Mode::EmptyAtEntry => "empty_at_entry",
        Mode::Full => "full",
    });
    println!("{v}");
    Ok(())
}

/// One record as the ring carries it.
fn record_bytes(
    correlation: u64,
    api: Api,
    tid: u32,
    args: [u64; 3],
) -> [u8; size_of::<CallRecord>()] {
    let rec = CallRecord {
        kind: RECORD_CALL,
        pid: 1000,
        tid,
        api: api as u32,
        correlation,
        enter_ns: correlation * 1000,
        exit_ns: correlation * 1000 + 400,
        args,
        ret: 0,
    };
    // SAFETY: CallRecord is plain data of exactly this size.
    unsafe { std::mem::transmute(rec) }
}

/// A capture-like stream: per thread, record on stream A, wait on stream B, with event,
/// stream and device synchronizes; `churn` destroys each event after use and creates the
/// next one at a new address (otherwise 64 events are reused).
fn synthesize(records: u64, churn: bool) -> impl Iterator<Item = (Api, u32, [u64; 3])> {
    (0..)
        .flat_map(move |i: u64| {
            let tid = 1000 + (i % 8) as u32;
            let event = if churn {
                0x7000_0000 + i * 64
            } else {
                0x7000_0000 + (i % 64) * 64
            };
            let (a, b) = (0x5000 + tid as u64 * 16, 0x6000 + tid as u64 * 16);
            let sync = match i % 4 {
                0 => (Api::HipEventSynchronize, tid, [event, 0, 0]),
                1 => (Api::HipStreamSynchronize, tid, [b, 0, 0]),
                2 => (Api::HipDeviceSynchronize, tid, [0, 0, 0]),
                _ => (Api::HipEventRecordWithFlags, tid, [event, b, 0]),
            };
            let destroy = churn.then_some((Api::HipEventDestroy, tid, [event, 0, 0]));
            [
                Some((Api::HipEventRecord, tid, [event, a, 0])),
                Some((Api::HipStreamWaitEvent, tid, [b, event, 0])),
                Some(sync),
                destroy,
            ]
        })
        .flatten()
        .take(records as usize)
}

/// The live path without the kernel: bytes from the ring → decode → back in order →
/// resolve → Kineto JSON (counted, not stored). Records are made on the fly, so peak
/// memory is the pipeline's own.
fn pipeline(records: u64, churn: bool) -> Result<()> {
    let names = Default::default();
    let info = TraceInfo {
        clock_offset_ns: 1_790_000_000_000_000_000,
        process_names: &names,
        rocsync: json!({}),
        trace_name: "bench",
    };
    let writer = KinetoWriter::new(CountingSink(0), info.clock_offset_ns, 0)?;
    let mut sink: TraceStream<CountingSink, std::io::Sink> = TraceStream::new(writer, None);
    let mut sequencer = Sequencer::new();
    let mut error = None;
    let start = Instant::now();
    for (i, (api, tid, args)) in synthesize(records, churn).enumerate() {
        let bytes = record_bytes(i as u64 + 1, api, tid, args);
        let Ok(Decoded::Call(r)) = decode(&bytes) else {
            bail!("undecodable")
        };
        let call = Call::from_record(&r).context("unknown api")?;
        sequencer.push(call, &mut |r| {
            if let Err(e) = sink.released(r) {
                error.get_or_insert(e);
            }
        });
    }
    if let Some(e) = error {
        return Err(e.into());
    }
    let calls = sink.calls;
    let done = sink.finish(&info, &Default::default())?;
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "{}",
        json!({
            "records": records,
            "written": calls,
            "churn": churn,
            "seconds": seconds,
            "records_per_s": records as f64 / seconds,
            "trace_bytes": done.trace.0,
            "peak_rss_bytes": peak_rss(),
        })
    );
    Ok(())
}

struct CountingSink(u64);

impl std::io::Write for CountingSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn peak_rss() -> u64 {
    // SAFETY: getrusage fills the struct.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    u.ru_maxrss as u64 * 1024
}
