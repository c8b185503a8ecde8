//! What a report is computed from, whichever file it came from: the calls as observed,
//! and every count of what was lost or could not be used.

use std::collections::BTreeMap;

/// One call, with its resolution.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    pub api: String,
    pub pid: u32,
    pub tid: u32,
    pub correlation: u64,
    /// ns since the first call of the capture.
    pub start_ns: i64,
    /// How long the calling thread was in the call.
    pub blocked_ns: i64,
    /// For synchronisations, CUPTI's name of the kind ("Stream Wait Event", …).
    pub sync: Option<String>,
    /// For synchronisations, the device they apply to.
    pub device: Option<i32>,
    /// The stream argument's handle, if the call has one.
    pub stream: Option<u64>,
    pub producer: Option<Produced>,
    /// For waits on an event that name no producer: why.
    pub unresolved: Option<String>,
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
}

impl Capture {
    pub fn unusable(&mut self, why: &str) {
        *self.unusable.entry(why.to_string()).or_default() += 1;
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
