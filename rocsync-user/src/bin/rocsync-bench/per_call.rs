//! `probes`: the per-call cost of one library function under each kind of probe, one
//! measurement per run (xtask interleaves them).

use std::{
    os::fd::OwnedFd,
    path::{Path, PathBuf},
    process::Command,
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use anyhow::{Context as _, Result, bail};
use aya::{
    maps::RingBuf,
    programs::{UProbe, uprobe::UProbeScope},
};
use rocsync::calls::probes::MultiPrograms;

use crate::{program_time::ProgramTime, slots::SlotReader};
use serde_json::json;

#[derive(Clone, Copy, clap::ValueEnum, PartialEq)]
pub(crate) enum Mode {
    Untraced,
    Empty,
    /// The empty pair through multi-uprobe links (the call probes' default attachment):
    /// the floor without the perf-event layer.
    EmptyMulti,
    EmptyAtEntry,
    /// An empty uprobe alone, no uretprobe: what the return trap costs, by difference.
    EmptyEntryOnly,
    /// The same where rocsync places an entry no return probe shares (past a stub's
    /// frame setup: probes/alone.rs).
    EmptyEntryAlone,
    /// The empty pair split: its entry there, its return on the pair's point (what a
    /// call costs whose entry is alone and return probed: the daemon while it records).
    EmptySplit,
    /// The empty pair on the body a ROCm dispatch stub jumps to (a measure only: rocsync
    /// never probes there, `points.rs`).
    EmptyBody,
    /// The pair doing only the target-table lookup of file-wide probes.
    Lookup,
    /// The pair writing only one ring record each (drained as a capture drains).
    Ring,
    /// The pair writing the least any two-record capture writes (who, when, the return).
    Records,
    /// `Records` written to per-CPU slot rings in memory-mapped arrays, not the ring.
    Slots,
    /// The pair reading the clock only.
    Clock,
    /// The pair reading the thread id only.
    Who,
    /// The entry updating the daemon's dependency state as a stream wait does.
    Dependency,
    /// The entry doing a collective's bookkeeping (its number, its stream's collective).
    Collective,
    Full,
}

impl Mode {
    /// The bench-only programs of the mode (entry, then exit if any).
    pub(crate) fn programs(self) -> &'static [&'static str] {
        match self {
            Mode::Empty
            | Mode::EmptyMulti
            | Mode::EmptyAtEntry
            | Mode::EmptySplit
            | Mode::EmptyBody => &["empty_enter", "empty_exit"],
            Mode::EmptyEntryOnly | Mode::EmptyEntryAlone => &["empty_enter"],
            Mode::Lookup => &["lookup_enter", "lookup_exit"],
            Mode::Ring => &["ring_enter", "ring_exit"],
            Mode::Records => &["records_enter", "records_exit"],
            Mode::Slots => &["slots_enter", "slots_exit"],
            Mode::Clock => &["clock_enter", "clock_exit"],
            Mode::Who => &["who_enter", "who_exit"],
            Mode::Dependency => &["dep_enter", "empty_exit"],
            Mode::Collective => &["coll_enter", "empty_exit"],
            Mode::Untraced | Mode::Full => &[],
        }
    }

    /// The programs whose run time `--program-time` reads, by name prefix: in full mode
    /// the capture's call probes (one pair per API; the bench calls one API).
    fn counted(self) -> &'static [&'static str] {
        match self {
            Mode::Full => &["call_enter_", "call_exit_"],
            _ => self.programs(),
        }
    }

    /// Where the pair's records go, for draining while it runs (modes that write some).
    pub(crate) fn drain(self, pair: &mut BenchPair) -> Result<Option<Drain>> {
        let obj = &mut pair.ebpf;
        Ok(match self {
            Mode::Ring | Mode::Records => Some(Drain::Ring(RingBuf::try_from(
                obj.take_map("EVENTS").context("EVENTS")?,
            )?)),
            Mode::Slots => Some(Drain::Slots(SlotReader::new(
                obj.map("SLOTS").context("SLOTS")?,
                obj.map("CURSORS").context("CURSORS")?,
            )?)),
            _ => None,
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Untraced => "untraced",
            Mode::Empty => "empty",
            Mode::EmptyMulti => "empty_multi",
            Mode::EmptyAtEntry => "empty_at_entry",
            Mode::EmptyEntryOnly => "empty_entry_only",
            Mode::EmptyEntryAlone => "empty_entry_alone",
            Mode::EmptySplit => "empty_split",
            Mode::EmptyBody => "empty_body",
            Mode::Lookup => "lookup",
            Mode::Ring => "ring",
            Mode::Records => "records",
            Mode::Slots => "slots",
            Mode::Clock => "clock",
            Mode::Who => "who",
            Mode::Dependency => "dependency",
            Mode::Collective => "collective",
            Mode::Full => "full",
        }
    }
}

/// How the driver calls: how many calls per thread, how many threads, how fast.
#[derive(clap::Args)]
pub(crate) struct Load {
    #[arg(long)]
    pub calls: u64,
    #[arg(long, default_value_t = 1)]
    pub threads: u32,
    /// Pace the calls to this many per second over all threads (default: flat out)
    #[arg(long)]
    pub rate: Option<u64>,
}
impl Load {
    fn args(&self) -> Vec<String> {
        let mut a = vec![self.calls.to_string(), self.threads.to_string()];
        a.extend(self.rate.map(|r| r.to_string()));
        a
    }
}

/// What a per-call measurement calls, with what, and the rocsync that captures it.
#[derive(clap::Args)]
pub(crate) struct Measured {
    #[arg(long)]
    pub lib: PathBuf,
    #[arg(long)]
    pub symbol: String,
    /// The call-loop driver (tests' bench_calls; bench_paired for side-by-side)
    #[arg(long)]
    pub driver: PathBuf,
    /// rocsync binary for the full capture
    #[arg(long)]
    pub rocsync: PathBuf,
    /// Extra rocsync arguments (full mode)
    #[arg(long, allow_hyphen_values = true)]
    pub extra: Vec<String>,
}

pub(crate) fn probes(
    mode: Mode,
    measured: &Measured,
    load: &Load,
    program_time: bool,
) -> Result<()> {
    let Measured {
        lib,
        symbol,
        driver,
        rocsync,
        extra,
    } = measured;
    let mut cmd = Command::new(driver);
    cmd.arg(lib).arg(symbol).args(load.args());
    let mut ebpf = None;
    if mode == Mode::Full {
        cmd = capture(rocsync, extra, driver);
        cmd.arg(lib).arg(symbol).args(load.args());
    } else if !mode.programs().is_empty() {
        ebpf = Some(attach_bench_pair(lib, symbol, mode)?);
    }
    let ring = match ebpf.as_mut() {
        Some(obj) => mode.drain(obj)?,
        None => None,
    };
    let counting = program_time
        .then(|| ProgramTime::start(mode.counted()))
        .transpose()?;
    let (out, drained) = run_draining(&mut cmd, ring)?;
    // Read before this process's own programs are unloaded.
    let programs = counting.map(ProgramTime::finish);
    drop(ebpf);
    let _ = std::fs::remove_file(scratch_trace());
    if !out.status.success() {
        bail!("driver failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .rfind(|l| l.starts_with('{'))
        .context("driver printed no result")?;
    let mut v: serde_json::Value = serde_json::from_str(line)?;
    if mode == Mode::Full {
        let (captured, lost_ids) = capture_counts(&String::from_utf8_lossy(&out.stderr));
        v["captured"] = json!(captured);
        v["dropped"] = json!(lost_ids);
    }
    if let Some(records) = drained {
        // Two records per call, or the pair measured less than it says.
        let calls = v["calls"].as_u64().unwrap_or(0);
        if records < 2 * calls {
            bail!("{records} records drained for {calls} calls: reservations failed");
        }
        v["drained"] = json!(records);
    }
    if let Some(programs) = programs {
        v["programs"] = programs;
    }
    v["mode"] = json!(mode.name());
    println!("{v}");
    Ok(())
}

/// A bench pair's programs and, for `EmptyMulti`, its links (detached when dropped).
pub(crate) struct BenchPair {
    pub ebpf: aya::Ebpf,
    _links: Vec<OwnedFd>,
}

/// Loads the bench-only programs of `mode` (entry, then exit if any) and attaches them to
/// `symbol` of `lib` for every process, where the mode says (`points.rs`); as classic
/// uprobes, or through multi-uprobe links (`EmptyMulti`).
pub(crate) fn attach_bench_pair(lib: &Path, symbol: &str, mode: Mode) -> Result<BenchPair> {
    let programs = mode.programs();
    let (entry, exit) = crate::points::of(lib, symbol, mode)?;
    let at = |i: usize| if i == 0 { entry } else { exit };
    let mut obj = aya::Ebpf::load(rocsync::PROBES)?;
    let mut links = Vec::new();
    if mode == Mode::EmptyMulti {
        let multi = MultiPrograms::load(&obj, rocsync::PROBES, programs.iter().copied())?;
        for (i, &name) in programs.iter().enumerate() {
            links.push(multi.attach(name, lib, at(i), i == 1, None)?);
        }
    } else {
        for (i, &name) in programs.iter().enumerate() {
            let p: &mut UProbe = obj.program_mut(name).context(name)?.try_into()?;
            p.load()?;
            p.attach(at(i), lib, UProbeScope::AllProcesses)?;
        }
    }
    Ok(BenchPair {
        ebpf: obj,
        _links: links,
    })
}

/// What a capture's summary on stderr says it captured, and how many calls' entry
/// records it lost ("lost: …, lost_ids N, …"; none: "lost: nothing").
pub(crate) fn capture_counts(stderr: &str) -> (Option<u64>, Option<u64>) {
    let captured = stderr.lines().find_map(|l| {
        let rest = l.trim().strip_prefix("rocsync: captured")?;
        rest.split_whitespace().next()?.parse::<u64>().ok()
    });
    let lost_ids = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("lost:"))
        .map(|rest| {
            let words: Vec<&str> = rest.split([',', ' ']).filter(|w| !w.is_empty()).collect();
            words
                .windows(2)
                .find(|w| w[0] == "lost_ids")
                .and_then(|w| w[1].parse::<u64>().ok())
                .unwrap_or(0)
        });
    (captured, lost_ids)
}

/// `rocsync run` of `driver` (its arguments to follow), its trace to a scratch file.
pub(crate) fn capture(rocsync: &Path, extra: &[String], driver: &Path) -> Command {
    let mut cmd = Command::new(rocsync);
    cmd.args(["run", "--no-status", "-o"])
        .arg(scratch_trace())
        .args(extra)
        .arg("--")
        .arg(driver);
    cmd
}

/// Where a benchmarked capture writes its trace (outputs are regular files only).
pub(crate) fn scratch_trace() -> PathBuf {
    std::env::temp_dir().join(format!("rocsync-bench-{}.json", std::process::id()))
}

/// Runs the measured command; a ring the bench's probes write is drained meanwhile, on
/// the capture's timer (every 10 ms, no wakeups), so that no reservation fails for want of
/// room. Returns how many records were drained.
pub(crate) fn run_draining(
    cmd: &mut Command,
    ring: Option<Drain>,
) -> Result<(std::process::Output, Option<u64>)> {
    let Some(mut ring) = ring else {
        return Ok((cmd.output()?, None));
    };
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let drainer = s.spawn(|| {
            let mut records = 0u64;
            loop {
                // Read once more after the command ended: its last records are in.
                let last = done.load(Ordering::Acquire);
                records += ring.drain();
                if last {
                    return records;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        let out = cmd.output();
        done.store(true, Ordering::Release);
        let records = drainer.join().expect("drainer panicked");
        Ok((out?, Some(records)))
    })
}

/// Where the measured pair's records go.
pub(crate) enum Drain {
    Ring(RingBuf<aya::maps::MapData>),
    Slots(SlotReader),
}

impl Drain {
    fn drain(&mut self) -> u64 {
        match self {
            Drain::Ring(ring) => std::iter::from_fn(|| ring.next().map(|_| ())).count() as u64,
            Drain::Slots(slots) => slots.drain(),
        }
    }
}
