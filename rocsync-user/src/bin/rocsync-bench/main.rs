//! Measurements behind `cargo xtask bench` (root: it loads eBPF programs).
//!
//! `probes`   per-call cost of one library function: untraced, under an empty
//!            uprobe+uretprobe pair (the trap alone), under pairs doing one part of a
//!            capture's work, and under rocsync's full capture.
//! `side-by-side` the same, rocsync against the empty pair in one process, in alternating
//!            batches (the drift between separate runs cancels).
//! `pipeline` userspace throughput of decode → resolve → Kineto write, and peak memory.
//! `tree`     following processes: attach/detach time for N processes and the cost to an
//!            untraced bystander, pid-scoped against file-wide probes.
//! Each prints JSON lines; xtask interleaves the runs and writes the tables.

use std::{path::PathBuf, time::Instant};

use anyhow::{Result, bail};
use clap::{Parser, Subcommand};

mod per_call;
mod points;
mod program_time;
mod raw;
mod side_by_side;
mod slots;
mod tree;
use per_call::{Load, Measured, Mode, probes};
use raw::{peak_rss_of, raw};
use rocsync::calls::{
    emit::{
        Tee,
        kineto::{KinetoWriter, TraceInfo},
        raw::RawWriter,
    },
    pipeline::Pipeline,
};
use rocsync_common::{Api, EntryRecord, ExitRecord, RECORD_ENTRY, RECORD_EXIT};
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
        #[command(flatten)]
        measured: Measured,
        #[command(flatten)]
        load: Load,
        /// Also report each probe program's ns per run from the kernel's BPF statistics
        /// (which slow every run: wall time is then not the mode's)
        #[arg(long)]
        program_time: bool,
    },
    /// A mode and the empty pair in one process: `rounds` rounds of `batch` calls to each
    /// of an untraced copy of `lib`, a copy under the empty pair, and `lib` under
    /// `rocsync run` (or a copy under the mode's pair). Prints the rounds' ratios.
    SideBySide {
        /// What the third copy is measured under (`full`: `lib` itself, under rocsync)
        #[arg(long, default_value = "full")]
        mode: Mode,
        #[command(flatten)]
        measured: Measured,
        #[command(flatten)]
        batches: side_by_side::Batches,
    },
    /// Writes a raw capture of `calls` synthetic calls (through the live pipeline) to `out`.
    Raw {
        #[arg(long)]
        calls: u64,
        #[arg(long)]
        out: PathBuf,
    },
    /// Runs a command and prints its wall time and peak resident memory.
    PeakRss {
        #[arg(required = true, last = true)]
        command: Vec<String>,
    },
    /// Attach/detach time for N idle processes and a bystander's ns per call, pid-scoped
    /// against file-wide probes.
    Tree {
        /// A scenario program linked against the library (its `gated` mode idles)
        #[arg(long)]
        scenario: PathBuf,
        #[arg(long)]
        driver: PathBuf,
        #[arg(long)]
        lib: PathBuf,
        #[arg(long)]
        symbol: String,
        #[arg(long, default_value_t = 8)]
        processes: usize,
        #[arg(long, default_value_t = 200_000)]
        calls: u64,
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

fn main() -> Result<()> {
    let result = bench(Cli::parse().cmd);
    // What the library said (probe diagnostics) is written before the benchmark ends.
    rocsync::os::stderr::flush();
    result
}

fn bench(cmd: Cmd) -> Result<()> {
    match cmd {
        Cmd::Probes {
            mode,
            measured,
            load,
            program_time,
        } => probes(mode, &measured, &load, program_time),
        Cmd::SideBySide {
            mode,
            measured,
            batches,
        } => side_by_side::side_by_side(mode, &measured, &batches),
        Cmd::Pipeline { records, churn } => pipeline(records, churn),
        Cmd::Tree {
            scenario,
            driver,
            lib,
            symbol,
            processes,
            calls,
        } => tree::tree(&scenario, &driver, &lib, &symbol, processes, calls),
        Cmd::Raw { calls, out } => raw(calls, &out),
        Cmd::PeakRss { command } => peak_rss_of(&command),
    }
}

/// The two records of one call as the ring carries them.
fn record_bytes(
    correlation: u64,
    api: Api,
    tid: u32,
    args: [u64; 3],
) -> (
    [u8; size_of::<EntryRecord>()],
    [u8; size_of::<ExitRecord>()],
) {
    let entry = EntryRecord {
        kind: RECORD_ENTRY,
        pid: 1000,
        tid,
        api: api as u16,
        correlation,
        enter_ns: correlation * 1000,
        args,
        ..Default::default()
    };
    let exit = ExitRecord {
        kind: RECORD_EXIT,
        pid: 1000,
        tid,
        api: api as u32,
        exit_ns: correlation * 1000 + 400,
        ..Default::default()
    };
    // SAFETY: both records are plain data of exactly these sizes.
    unsafe {
        (
            std::mem::transmute::<EntryRecord, [u8; 56]>(entry),
            std::mem::transmute::<ExitRecord, [u8; 48]>(exit),
        )
    }
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

/// The live path without the kernel: bytes from the ring → decode → pair → back in
/// order → resolve → Kineto JSON (counted, not stored), through the one [`Pipeline`].
/// Records are made on the fly, so peak memory is the pipeline's own.
fn pipeline(records: u64, churn: bool) -> Result<()> {
    let writer = KinetoWriter::new(CountingSink(0), 1_790_000_000_000_000_000, 0)?;
    let sink: Tee<_, RawWriter<std::io::Sink>> = Tee::new(writer, None);
    let mut pipeline = Pipeline::new(sink, true);
    let start = Instant::now();
    for (i, (api, tid, args)) in synthesize(records, churn).enumerate() {
        let (entry, exit) = record_bytes(i as u64 + 1, api, tid, args);
        pipeline.record(&entry);
        pipeline.record(&exit);
    }
    let (sink, stats) = pipeline.finish()?;
    let (writer, _, _) = sink.into_parts();
    if stats.undecodable > 0 {
        bail!("undecodable records");
    }
    let names = Default::default();
    let info = TraceInfo {
        process_names: &names,
        rocsync: json!({}),
        distributed: json!({ "rank": 0 }),
        trace_name: "bench",
    };
    let trace = writer.finish(&info)?;
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "{}",
        json!({
            "records": records,
            "written": stats.calls(),
            "churn": churn,
            "seconds": seconds,
            "records_per_s": records as f64 / seconds,
            "trace_bytes": trace.0,
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
    // SAFETY: `u` is a valid rusage for the call to fill.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    u.ru_maxrss as u64 * 1024
}
