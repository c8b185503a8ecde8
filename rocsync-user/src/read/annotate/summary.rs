//! What annotate did to one trace, for the user (text) and for scripts (`--json`).

use std::{collections::BTreeMap, fmt::Write as _, path::PathBuf};

use serde::Serialize;

use crate::units::counted;

/// Why a wait was left as it was (CUDA) or added without a producer / not added (ROCm).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reason {
    /// The profiler's row matched no rocsync call (outside the capture, or lost).
    NoCall,
    /// rocsync's own resolution found no producer (`Unresolved::name`).
    Unresolved(&'static str),
    /// rocsync resolved the record, but the profiler's trace has no row of it (recorded
    /// before the profiler started).
    ProducerNotInProfile,
    /// The recording stream's id in the profiler's numbering was not learned.
    ProducerStreamUnknown,
    /// ROCm: the call's own stream has no id in the profiler's numbering, and the
    /// profiler numbered streams on that device (a new number could be one of them).
    StreamUnknown,
}

impl Reason {
    pub fn name(self) -> &'static str {
        match self {
            Reason::NoCall => "no_call",
            Reason::Unresolved(n) => n,
            Reason::ProducerNotInProfile => "producer_not_in_profile",
            Reason::ProducerStreamUnknown => "producer_stream_unknown",
            Reason::StreamUnknown => "stream_unknown",
        }
    }
}

#[derive(Debug, Default, Serialize)]
pub struct Clock {
    /// Profiler clock − rocsync's (REALTIME-based) clock at `at`, ns.
    pub offset_ns: i64,
    /// Their relative drift, parts per billion.
    pub drift_ppb: f64,
    /// Pairs of calls the alignment rests on, and how far apart they still are.
    pub pairs: usize,
    pub residual_p50_ns: i64,
    pub residual_max_ns: i64,
}

#[derive(Debug, Default, Serialize)]
pub struct Calls {
    /// The profiler's runtime rows of APIs rocsync hooks, for this process.
    pub profiler_rows: usize,
    pub matched: usize,
    pub rows_unmatched: usize,
    /// rocsync calls within the profiler's time with no row.
    pub calls_unmatched: usize,
}

#[derive(Debug, Default, Serialize)]
pub struct Streams {
    /// rocsync streams with a profiler id learned from both sides.
    pub learned: usize,
    /// Calls that named a stream on both sides (the evidence).
    pub evidence: usize,
    pub conflicts: usize,
    /// ROCm: streams the profiler never showed, numbered after its own.
    pub numbered_new: usize,
    /// `device:index -> device:stream`.
    pub map: Vec<String>,
}

#[derive(Debug, Default, Serialize)]
pub struct Waits {
    /// CUDA: the profiler's event-wait sync rows (Stream Wait Event, Event Sync).
    pub rows: usize,
    /// CUDA: rows CUPTI resolved itself, before and after annotation.
    pub resolved_before: usize,
    pub resolved_after: usize,
    /// CUDA: of the rows CUPTI resolved, those rocsync agrees and disagrees with.
    pub agreed: usize,
    pub disagreed: usize,
    /// CUDA: rows CUPTI left unresolved that annotate filled.
    pub filled: usize,
    /// ROCm: sync rows added, by name.
    pub added: BTreeMap<String, usize>,
    /// ROCm: added event waits whose producer could not be named, by reason.
    pub added_without_producer: BTreeMap<String, usize>,
    /// Waits left as they were (CUDA) or not added (ROCm), by reason.
    pub left: BTreeMap<String, usize>,
}

#[derive(Debug, Default, Serialize)]
pub struct Summary {
    pub trace: PathBuf,
    pub capture: PathBuf,
    pub output: PathBuf,
    pub flavour: &'static str,
    pub pid: i64,
    pub clock: Clock,
    pub calls: Calls,
    pub streams: Streams,
    pub waits: Waits,
    /// CUDA: the first disagreements, as `correlation: CUPTI (stream, record) vs rocsync`.
    pub disagreements: Vec<String>,
}

impl Waits {
    pub fn leave(&mut self, why: Reason) {
        *self.left.entry(why.name().into()).or_default() += 1;
    }
}

impl Summary {
    pub fn text(&self) -> String {
        let mut s = String::new();
        let w = &self.waits;
        let _ = writeln!(
            s,
            "rocsync: annotated {} ({} trace, pid {}) with {}",
            self.trace.display(),
            self.flavour,
            self.pid,
            self.capture.display()
        );
        let c = &self.clock;
        let _ = writeln!(
            s,
            "  clock: profiler = rocsync {:+.3} ms, drift {:.0} ppb; {} calls line up within {:.1} µs (median {:.1} µs)",
            c.offset_ns as f64 / 1e6,
            c.drift_ppb,
            c.pairs,
            c.residual_max_ns as f64 / 1e3,
            c.residual_p50_ns as f64 / 1e3
        );
        let k = &self.calls;
        let _ = writeln!(
            s,
            "  calls: {} of the profiler's {} matched ({} and {} without a partner)",
            k.matched,
            counted(k.profiler_rows as u64, "row"),
            counted(k.rows_unmatched as u64, "row"),
            counted(k.calls_unmatched as u64, "call"),
        );
        let st = &self.streams;
        let _ = writeln!(
            s,
            "  streams: {} learned from {} calls ({} conflicts), {} numbered new: {}",
            st.learned,
            st.evidence,
            st.conflicts,
            st.numbered_new,
            st.map.join(", ")
        );
        if self.flavour == "cuda" {
            let _ = writeln!(
                s,
                "  waits: {} event-wait rows; resolved before {}, after {}; filled {}; CUPTI's own: {} agreed, {} disagreed",
                w.rows, w.resolved_before, w.resolved_after, w.filled, w.agreed, w.disagreed
            );
        } else {
            let _ = writeln!(s, "  added: {}", counts(&w.added));
            let _ = writeln!(
                s,
                "  added without a producer: {}",
                counts(&w.added_without_producer)
            );
        }
        let _ = writeln!(s, "  left: {}", counts(&w.left));
        for d in &self.disagreements {
            let _ = writeln!(s, "  disagreement: {d}");
        }
        let _ = write!(s, "  written: {}", self.output.display());
        s
    }
}

fn counts(m: &BTreeMap<String, usize>) -> String {
    if m.is_empty() {
        return "none".into();
    }
    let total: usize = m.values().sum();
    let parts: Vec<String> = m.iter().map(|(k, v)| format!("{k} {v}")).collect();
    format!("{total} ({})", parts.join(", "))
}
