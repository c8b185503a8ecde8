//! What a report is computed from, whichever file it came from: the calls as observed,
//! and every count of what was lost, could not be used, or was cut to the report's
//! bounds. Names are shared between calls (`Rc<str>`), never a copy per call.

use std::{collections::BTreeMap, rc::Rc};

use super::word::Word;
use crate::read::report::figures::packets::Packets;

/// One NCCL/RCCL call, as the report keeps it.
#[derive(Clone, Debug, PartialEq)]
pub struct NcclCall {
    pub pid: u32,
    pub api: std::rc::Rc<str>,
    /// ns since the first call of the capture.
    pub start_ns: i64,
    /// Its communicator's handle, its id (the same on every rank), rank and size.
    pub comm: Option<u64>,
    pub id: Option<u64>,
    pub rank: Option<u64>,
    pub nranks: Option<u64>,
    /// Its number in the communicator (collectives and point-to-point calls).
    pub seq: Option<u64>,
    /// The stream it was enqueued on.
    pub stream: Option<u64>,
}

/// One call, with its resolution.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    pub api: Rc<str>,
    pub pid: u32,
    pub tid: u32,
    pub correlation: u64,
    /// ns since the first call of the capture.
    pub start_ns: i64,
    /// How long the calling thread was in the call.
    pub blocked_ns: i64,
    /// For synchronisations, CUPTI's name of the kind ("Stream Wait Event", …).
    pub sync: Option<Rc<str>>,
    /// For synchronisations, the device they apply to.
    pub device: Option<i32>,
    /// The stream argument's handle, if the call has one.
    pub stream: Option<u64>,
    /// Its number on its device, as Perfetto shows the stream's track (`stream 2`).
    pub stream_index: Option<i64>,
    pub producer: Option<Produced>,
    /// For waits on an event that name no producer: why.
    pub unresolved: Option<Rc<str>>,
}

/// The record a wait resolved to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Produced {
    pub correlation: u64,
    /// The recording stream's handle.
    pub stream: u64,
    /// Its number on its device, as Perfetto shows it.
    pub stream_index: Option<i64>,
    pub tid: u32,
    /// The middle of the record call, ns since the first call of the capture.
    pub record_ns: i64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Capture {
    pub calls: Vec<Observed>,
    /// Every drop counter the file carries, by its name there.
    pub losses: BTreeMap<String, u64>,
    /// What the report read but could not use, by reason.
    pub unusable: BTreeMap<String, u64>,
    /// What the report cut to its bounds (strings past their length, rows past what it
    /// holds), by reason.
    pub cut: BTreeMap<String, u64>,
    /// Losses the trace's parameters say besides its drop counters: a trace cut short,
    /// calls not recorded for the budget (what, and how many spans).
    pub lost_besides: BTreeMap<String, u64>,
    /// NCCL/RCCL calls: collectives, set-ups, destroys, groups.
    pub nccl: Vec<NcclCall>,
    /// HSA packets.
    pub packets: Packets,
    /// The daemon's word, if it took the trace unasked.
    pub word: Option<Word>,
    /// Thread names by (pid, tid), where the trace names a thread other than `thread N`.
    pub thread_names: BTreeMap<(u32, u32), Rc<str>>,
    /// Events of the trace the report does not use, by kind.
    pub not_used: BTreeMap<String, u64>,
}

impl Capture {
    pub fn unusable(&mut self, why: &str) {
        *self.unusable.entry(why.to_string()).or_default() += 1;
    }

    pub fn cut(&mut self, why: String, n: u64) {
        if n > 0 {
            *self.cut.entry(why).or_default() += n;
        }
    }

    pub fn not_used(&mut self, what: &str) {
        *self.not_used.entry(what.to_string()).or_default() += 1;
    }

    /// Times made relative to the first call.
    pub fn rebase(&mut self) {
        let calls = self.calls.iter().map(|c| c.start_ns);
        let Some(first) = calls.chain(self.nccl.iter().map(|c| c.start_ns)).min() else {
            return;
        };
        for c in &mut self.calls {
            c.start_ns -= first;
            if let Some(p) = &mut c.producer {
                p.record_ns -= first;
            }
        }
        for c in &mut self.nccl {
            c.start_ns -= first;
        }
    }
}

/// Whether a CUPTI sync kind waits on an event (and so has a producer).
pub(super) fn waits_on_event(kind: &str) -> bool {
    matches!(kind, "Stream Wait Event" | "Event Sync")
}

/// A capture's ns as the report's µs.
pub(super) fn us(ns: i64) -> f64 {
    ns as f64 / 1000.0
}
