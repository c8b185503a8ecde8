//! What a report is computed from, whichever file it came from: the calls as observed,
//! and every count of what was lost, could not be used, or was cut to the report's
//! bounds. Names are shared between calls (`Rc<str>`), never a copy per call.

use std::{collections::BTreeMap, rc::Rc};

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

    /// Times made relative to the first call.
    pub fn rebase(&mut self) {
        let Some(first) = self.calls.iter().map(|c| c.start_ns).min() else {
            return;
        };
        for c in &mut self.calls {
            c.start_ns -= first;
            if let Some(p) = &mut c.producer {
                p.record_ns -= first;
            }
        }
    }
}

/// Whether a CUPTI sync kind waits on an event (and so has a producer).
pub fn waits_on_event(kind: &str) -> bool {
    matches!(kind, "Stream Wait Event" | "Event Sync")
}
