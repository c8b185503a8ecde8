//! `--program-time`: what the probe programs themselves cost per run, from the kernel's
//! BPF statistics (`BPF_ENABLE_STATS`), read while the programs are loaded. Precise where
//! wall time is noisy — but the statistics add two clock reads to every run, so a run
//! that counts program time does not measure wall time.

use std::{
    collections::BTreeMap,
    os::fd::OwnedFd,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::Duration,
};

use anyhow::{Context as _, Result};
use serde_json::{Value, json};

/// (runs, total run time) of a program, at its last reading.
type Counts = (u64, Duration);

pub(crate) struct ProgramTime {
    /// Statistics stay on while this is open.
    _stats: OwnedFd,
    done: Arc<AtomicBool>,
    sampler: JoinHandle<BTreeMap<&'static str, Counts>>,
}

impl ProgramTime {
    /// Starts counting and reading the programs whose names start with one of `names`
    /// (whoever loaded them).
    pub(crate) fn start(names: &'static [&'static str]) -> Result<Self> {
        let stats = aya::sys::enable_stats(aya::sys::Stats::RunTime)
            .context("turning on the kernel's BPF run-time statistics")?;
        let done = Arc::new(AtomicBool::new(false));
        let stop = done.clone();
        let sampler = std::thread::spawn(move || {
            let mut seen = BTreeMap::new();
            // Read until the end: a program's counts are gone once it is unloaded.
            while !stop.load(Ordering::Acquire) {
                read(names, &mut seen);
                std::thread::sleep(Duration::from_millis(20));
            }
            seen
        });
        Ok(Self {
            _stats: stats,
            done,
            sampler,
        })
    }

    /// Stops reading; `{name: ns per run}` for every program that ran, and its runs.
    pub(crate) fn finish(self) -> Value {
        self.done.store(true, Ordering::Release);
        let seen = self.sampler.join().unwrap_or_default();
        let per_run: BTreeMap<_, _> = seen
            .iter()
            .map(|(name, (runs, time))| (*name, time.as_nanos() as f64 / *runs as f64))
            .collect();
        let runs: BTreeMap<_, _> = seen.iter().map(|(name, (runs, _))| (*name, runs)).collect();
        json!({ "ns_per_run": per_run, "runs": runs })
    }
}

/// Keeps, per name, the reading with the most runs (the latest, of the program that ran).
fn read(names: &'static [&'static str], seen: &mut BTreeMap<&'static str, Counts>) {
    for info in aya::programs::loaded_programs().filter_map(Result::ok) {
        let Some(name) = info
            .name_as_str()
            .and_then(|n| names.iter().find(|&&want| n.starts_with(want)))
        else {
            continue;
        };
        let counts = (info.run_count(), info.run_time());
        let entry = seen.entry(*name).or_insert(counts);
        if counts.0 > entry.0 {
            *entry = counts;
        }
    }
}
