//! What the budget shed, and when: each polling API not probed in a file for a while,
//! kept from when its probes were off (detached) until they are back. Written as the
//! file's polling probes go and come (`polling.rs`), and as the duty cycle takes records
//! and waits off and puts them back (`budget/cycling.rs`: one span per API, with the
//! calls estimated in it); said in every trace and flight recorder dump that overlaps it
//! (a trace's `rocsync` object), as `/metrics` and the log say what is shed now.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// Spans remembered for the traces that overlap them.
const SPANS_KEPT: usize = 256;

/// One API not probed in one library for a while (µs since the epoch: a trace's rows are
/// at `baseTimeNanoseconds` / 1000 + `ts`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Span {
    pub api: &'static str,
    pub library: String,
    /// The file's (device, inode): two files may show the same path.
    file: (u64, u64),
    /// When the budget shed it.
    pub shed_us: u64,
    /// When its probes were off; `None`: they are being detached, and still record.
    pub from_us: Option<u64>,
    /// `None`: not probed still.
    pub until_us: Option<u64>,
    /// `budget` (a poll shed) or `duty_cycle` (records and waits cycled off).
    pub reason: &'static str,
    /// A duty cycle's span: the calls of its API estimated in it (so far, while open).
    pub estimated_calls: Option<u64>,
}

/// A duty cycle's spans are not a file's: this stands for their file.
const CYCLE: (u64, u64) = (0, 0);

/// What was shed, shared with the traces being written (they read it when they finish).
#[derive(Clone, Debug, Default)]
pub(crate) struct ShedLog(Arc<Mutex<Vec<Span>>>);

impl ShedLog {
    /// `api` in `library` (the file `file`) is being shed: not probed once its probes
    /// are detached ([`Self::detached`]).
    pub(crate) fn begin(&self, api: &'static str, library: String, file: (u64, u64)) {
        let mut spans = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if spans.len() >= SPANS_KEPT {
            // The oldest ended one goes; a log of only open spans grows no further.
            if let Some(i) = spans.iter().position(|s| s.until_us.is_some()) {
                spans.remove(i);
            }
        }
        spans.push(Span {
            api,
            library,
            file,
            shed_us: now_us(),
            from_us: None,
            until_us: None,
            reason: "budget",
            estimated_calls: None,
        });
    }

    /// The duty cycle took `apis`' probes off in `libraries`: not probed from now (their
    /// detach has begun; the calls made meanwhile may be recorded still).
    pub(crate) fn cycled_off(&self, apis: &[&'static str], libraries: &str) {
        let mut spans = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = now_us();
        for &api in apis {
            if spans.len() >= SPANS_KEPT
                && let Some(i) = spans.iter().position(|s| s.until_us.is_some())
            {
                spans.remove(i);
            }
            spans.push(Span {
                api,
                library: libraries.to_string(),
                file: CYCLE,
                shed_us: now,
                from_us: Some(now),
                until_us: None,
                reason: "duty_cycle",
                estimated_calls: Some(0),
            });
        }
    }

    /// The calls of `api` estimated so far in the duty cycle's open span.
    pub(crate) fn cycle_estimated(&self, api: &'static str, calls: u64) {
        let mut spans = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let open = spans
            .iter_mut()
            .filter(|s| s.file == CYCLE && s.api == api && s.until_us.is_none());
        for s in open {
            s.estimated_calls = Some(calls);
        }
    }

    /// The duty cycle's probes are on again: its open spans end now.
    pub(crate) fn cycled_on(&self) {
        let mut spans = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = now_us();
        for s in spans
            .iter_mut()
            .filter(|s| s.file == CYCLE && s.until_us.is_none())
        {
            s.until_us = Some(now);
        }
    }

    /// The calls the duty cycle's spans estimated within `[from_us, now]`, in all: a
    /// span that began before counts for its part after `from_us` (its calls taken as
    /// evenly spread).
    pub(crate) fn cycled_calls(&self, from_us: u64) -> u64 {
        let spans = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = now_us();
        let within = |s: &Span| {
            let (from, until) = (s.from_us.unwrap_or(s.shed_us), s.until_us.unwrap_or(now));
            let n = s.estimated_calls.unwrap_or(0) as f64;
            match from >= from_us || until <= from {
                true => n,
                false => n * until.saturating_sub(from_us) as f64 / (until - from) as f64,
            }
        };
        (spans.iter())
            .filter(|s| s.file == CYCLE && s.until_us.is_none_or(|u| u >= from_us))
            .map(|s| within(s).round() as u64)
            .sum()
    }

    /// The probes shed in `file` no longer fire: not probed from now.
    pub(crate) fn detached(&self, file: (u64, u64)) {
        let mut spans = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = now_us();
        for s in spans
            .iter_mut()
            .filter(|s| s.file == file && s.until_us.is_none())
        {
            s.from_us.get_or_insert(now);
        }
    }

    /// Whether `file`'s shed probes are still being detached (not to be put back yet:
    /// both would fire).
    pub(crate) fn detaching(&self, file: (u64, u64)) -> bool {
        let spans = self.0.lock().unwrap_or_else(|e| e.into_inner());
        spans
            .iter()
            .any(|s| s.file == file && s.from_us.is_none() && s.until_us.is_none())
    }

    /// `api` in `file` is probed again from now (a span whose probes were never off is
    /// forgotten).
    pub(crate) fn end(&self, api: &'static str, file: (u64, u64)) {
        let mut spans = self.0.lock().unwrap_or_else(|e| e.into_inner());
        spans.retain(|s| !(s.api == api && s.file == file && s.from_us.is_none()));
        for s in spans.iter_mut().filter(|s| s.api == api && s.file == file) {
            s.until_us.get_or_insert_with(now_us);
        }
    }

    /// The spans that overlap `[from_us, now]`, for a trace's `rocsync` object.
    pub(crate) fn overlapping(&self, from_us: u64) -> Value {
        let spans = self.0.lock().unwrap_or_else(|e| e.into_inner());
        spans
            .iter()
            .filter(|s| s.from_us.is_some() && s.until_us.is_none_or(|u| u >= from_us))
            .map(|s| {
                let mut v = json!({
                    "api": s.api, "library": s.library, "reason": s.reason,
                    "shed_unix_us": s.shed_us, "from_unix_us": s.from_us,
                    "until_unix_us": s.until_us,
                });
                if let Some(n) = s.estimated_calls {
                    v["estimated_calls"] = n.into();
                }
                v
            })
            .collect()
    }
}

/// Now on the traces' clock.
pub(crate) fn now_us() -> u64 {
    crate::os::clock::unix_us()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_overlapping_a_trace_are_the_open_ones_and_those_that_ended_inside_it() {
        let log = ShedLog::default();
        log.begin("hipEventQuery", "/a".into(), (1, 2));
        log.detached((1, 2));
        log.end("hipEventQuery", (1, 3));
        log.end("hipEventQuery", (1, 2));
        let after = now_us() + 1;
        log.begin("cudaEventQuery", "/a".into(), (1, 3));
        log.detached((1, 3));
        let spans = log.overlapping(after);
        let spans = spans.as_array().unwrap();
        assert_eq!(spans.len(), 1);
        assert_eq!(spans[0]["api"], "cudaEventQuery");
        assert!(spans[0]["until_unix_us"].is_null());
    }

    #[test]
    fn a_duty_cycles_spans_carry_their_estimates_and_end_together() {
        let log = ShedLog::default();
        log.cycled_off(&["hipEventRecord", "hipStreamWaitEvent"], "/a, /b");
        log.cycle_estimated("hipEventRecord", 40);
        log.cycle_estimated("hipEventRecord", 70);
        // A shed poll of a file is not the cycle's.
        log.begin("hipEventQuery", "/a".into(), (1, 2));
        log.detached((1, 2));
        assert_eq!(log.cycled_calls(0), 70);
        assert_eq!(
            log.cycled_calls(now_us() + 1_000_000),
            0,
            "after its end: none"
        );
        log.cycled_on();
        log.cycle_estimated("hipEventRecord", 99);
        let spans = log.overlapping(0);
        let spans = spans.as_array().unwrap();
        assert_eq!(spans.len(), 3);
        assert_eq!(spans[0]["reason"], "duty_cycle");
        assert_eq!(
            spans[0]["estimated_calls"], 70,
            "ended: no longer estimated"
        );
        assert_eq!(spans[1]["estimated_calls"], 0);
        assert!(spans[0]["until_unix_us"].is_u64());
        assert_eq!(spans[2]["reason"], "budget");
        assert!(spans[2]["until_unix_us"].is_null());
        assert!(spans[2].get("estimated_calls").is_none());
    }

    #[test]
    fn a_span_begins_once_its_probes_are_detached() {
        let log = ShedLog::default();
        let asked = now_us();
        log.begin("hipEventQuery", "/a".into(), (1, 2));
        // Still detaching: still recorded, so no trace is told otherwise.
        assert!(log.detaching((1, 2)));
        assert_eq!(log.overlapping(0), json!([]));
        log.detached((1, 2));
        assert!(!log.detaching((1, 2)));
        let spans = log.overlapping(0);
        let shed = spans[0]["shed_unix_us"].as_u64().unwrap();
        assert!(shed >= asked, "{spans}");
        assert!(
            spans[0]["from_unix_us"].as_u64().unwrap() >= shed,
            "{spans}"
        );
        // Put back before its probes were ever off: no span at all.
        log.begin("hipEventQuery", "/b".into(), (3, 4));
        log.end("hipEventQuery", (3, 4));
        log.detached((3, 4));
        assert!(!log.detaching((3, 4)));
        assert_eq!(log.overlapping(0).as_array().unwrap().len(), 1);
    }
}
