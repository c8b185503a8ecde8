//! How a capture ended: why it stopped, and what it captured.

use std::collections::{BTreeMap, BTreeSet};

use crate::calls::emit::{outputs::CaptureSink, processes::ProcessInfo};
use crate::calls::probes::LibraryReport;
use crate::calls::stats::CaptureStats;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    Signal(&'static str),
    Duration,
    TargetExited,
    /// Writing an output failed (disk full, quota).
    OutputFailed,
    /// A trace file reached `--trace-max-bytes`.
    SizeBound,
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StopReason::Signal(s) => s,
            StopReason::Duration => "duration reached",
            StopReason::TargetExited => "target exited",
            StopReason::OutputFailed => "writing the outputs failed",
            StopReason::SizeBound => "a trace file reached --trace-max-bytes",
        })
    }
}

pub struct Captured {
    /// The first output error: the outputs hold what was written before it.
    pub error: Option<std::io::Error>,
    /// What each traced process said of itself.
    pub processes: BTreeMap<u32, ProcessInfo>,
    pub sink: CaptureSink,
    pub stats: CaptureStats,
    pub libraries: Vec<LibraryReport>,
    /// Runtimes the targets mapped that `--backend` left out, by name.
    pub excluded: BTreeSet<&'static str>,
    /// How the call probes were attached (`uprobe_multi` or `perf_event`).
    pub call_probe_links: &'static str,
    pub stop: StopReason,
    pub detaching: Detaching,
    /// When its targets' calls were recorded from and until (µs since the epoch).
    pub recorded: (Option<u64>, Option<u64>),
}

/// Probes being detached in the background.
pub struct Detaching(pub(super) std::thread::JoinHandle<()>);

impl Detaching {
    /// Waits until every probe is detached.
    pub fn wait(self) {
        let _ = self.0.join();
    }
}
