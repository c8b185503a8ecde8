//! Puts calls back in correlation order as they arrive, so they can be resolved and
//! written while the capture runs and memory stays bounded by what is in flight.
//!
//! Correlation ids are dense: every id the probes hand out becomes a record, unless the
//! call is still in flight (its entry is in the stash) or its record was dropped. So the
//! next id to release is either here, in flight, or lost:
//! - here: released;
//! - in flight, and a synchronisation (which changes no resolution state): released
//!   from its stash entry at its place in the order ("deferred"); its record completes
//!   it when the call returns;
//! - in flight, and state-changing (record, destroy, create, …; all quick): wait;
//! - missing, and still missing and not in flight at the next stash scan: lost (a drop).

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::{resolve::changes_state, trace::call::Call};

#[derive(Debug, PartialEq)]
pub enum Released {
    /// A returned call, in order.
    Call(Call),
    /// A call still in flight, in order; its [`Released::Completion`] may follow.
    Deferred(Call),
    /// The record of a deferred call, once it returned.
    Completion(Call),
}

#[derive(Default)]
pub struct Sequencer {
    next: u64,
    pending: BTreeMap<u64, Call>,
    deferred: HashSet<u64>,
    /// An id missing and not in flight at the last scan: lost if so again at the next.
    suspect: Option<u64>,
    pub lost: u64,
}

impl Sequencer {
    pub fn new() -> Self {
        Self {
            next: 1,
            ..Default::default()
        }
    }

    /// Calls waiting for an earlier id (the reorder buffer).
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    pub fn push(&mut self, call: Call, out: &mut impl FnMut(Released)) {
        if call.correlation < self.next {
            // Only a deferred call comes back below the watermark.
            if self.deferred.remove(&call.correlation) {
                out(Released::Completion(call));
            } else {
                // Declared lost, then arrived: too late to resolve in order.
                self.lost = self.lost.saturating_sub(1);
                out(Released::Completion(call));
            }
            return;
        }
        if call.correlation == self.next && self.pending.is_empty() {
            // The common case: already in order.
            self.next += 1;
            out(Released::Call(call));
            return;
        }
        self.pending.insert(call.correlation, call);
        self.release(None, out);
    }

    /// Releases what can be released. `in_flight` is a fresh stash scan (by correlation),
    /// given periodically; without one, missing ids are simply waited for.
    pub fn release(
        &mut self,
        in_flight: Option<&HashMap<u64, Call>>,
        out: &mut impl FnMut(Released),
    ) {
        loop {
            if let Some(call) = self.pending.remove(&self.next) {
                out(Released::Call(call));
            } else if let Some(scan) = in_flight {
                match scan.get(&self.next) {
                    Some(c) if !changes_state(c.api.op()) => {
                        self.deferred.insert(self.next);
                        out(Released::Deferred(*c));
                    }
                    Some(_) => return,
                    None if self.pending.is_empty() => return,
                    None if self.suspect == Some(self.next) => self.lost += 1,
                    None => {
                        self.suspect = Some(self.next);
                        return;
                    }
                }
            } else {
                return;
            }
            self.next += 1;
        }
    }

    /// End of capture: everything left, in order; `in_flight` calls never returned.
    pub fn finish(&mut self, in_flight: Vec<Call>, out: &mut impl FnMut(Released)) {
        for c in in_flight {
            if !self.deferred.contains(&c.correlation) && c.correlation >= self.next {
                self.pending.entry(c.correlation).or_insert(c);
            }
        }
        for (_, c) in std::mem::take(&mut self.pending) {
            out(if c.exit_ns.is_some() {
                Released::Call(c)
            } else {
                Released::Deferred(c)
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use rocsync_common::Api;

    use super::*;

    fn call(corr: u64, api: Api, done: bool) -> Call {
        Call {
            api,
            pid: 1,
            tid: 1,
            correlation: corr,
            enter_ns: corr,
            exit_ns: done.then_some(corr + 1),
            ret: done.then_some(0),
            args: [0; 3],
        }
    }

    fn run(
        seq: &mut Sequencer,
        f: impl FnOnce(&mut Sequencer, &mut dyn FnMut(Released)),
    ) -> Vec<String> {
        let mut got = Vec::new();
        f(seq, &mut |r| {
            got.push(match r {
                Released::Call(c) => format!("{}", c.correlation),
                Released::Deferred(c) => format!("{}d", c.correlation),
                Released::Completion(c) => format!("{}c", c.correlation),
            })
        });
        got
    }

    #[test]
    fn reorders_arrivals() {
        let mut s = Sequencer::new();
        let got = run(&mut s, |s, out| {
            let mut out = out;
            s.push(call(2, Api::HipEventRecord, true), &mut out);
            s.push(call(3, Api::HipEventRecord, true), &mut out);
            s.push(call(1, Api::HipEventRecord, true), &mut out);
        });
        assert_eq!(got, ["1", "2", "3"]);
        assert_eq!(s.pending(), 0);
    }

    #[test]
    fn a_blocked_synchronize_is_passed_over_and_completed_later() {
        let mut s = Sequencer::new();
        let sync = call(1, Api::HipDeviceSynchronize, false);
        let scan = HashMap::from([(1, sync)]);
        let got = run(&mut s, |s, out| {
            let mut out = out;
            s.push(call(2, Api::HipEventRecord, true), &mut out);
            s.release(Some(&scan), &mut out);
            s.push(call(1, Api::HipDeviceSynchronize, true), &mut out);
        });
        assert_eq!(got, ["1d", "2", "1c"]);
    }

    #[test]
    fn an_in_flight_record_holds_the_order() {
        let mut s = Sequencer::new();
        let scan = HashMap::from([(1, call(1, Api::HipEventRecord, false))]);
        let got = run(&mut s, |s, out| {
            let mut out = out;
            s.push(call(2, Api::HipStreamWaitEvent, true), &mut out);
            s.release(Some(&scan), &mut out);
            s.release(Some(&scan), &mut out);
        });
        assert!(got.is_empty(), "{got:?}");
        let got = run(&mut s, |s, out| {
            let mut out = out;
            s.push(call(1, Api::HipEventRecord, true), &mut out);
        });
        assert_eq!(got, ["1", "2"]);
    }

    #[test]
    fn an_id_missing_at_two_scans_is_lost() {
        let mut s = Sequencer::new();
        let empty = HashMap::new();
        let got = run(&mut s, |s, out| {
            let mut out = out;
            s.push(call(2, Api::HipEventRecord, true), &mut out);
            s.release(Some(&empty), &mut out);
        });
        assert!(got.is_empty(), "one scan is not enough: {got:?}");
        let got = run(&mut s, |s, out| s.release(Some(&empty), &mut { out }));
        assert_eq!(got, ["2"]);
        assert_eq!(s.lost, 1);
    }

    #[test]
    fn finish_flushes_everything_in_order() {
        let mut s = Sequencer::new();
        let got = run(&mut s, |s, out| {
            let mut out = out;
            s.push(call(3, Api::HipEventRecord, true), &mut out);
            s.finish(vec![call(2, Api::HipDeviceSynchronize, false)], &mut out);
        });
        assert_eq!(got, ["2d", "3"]);
    }
}
