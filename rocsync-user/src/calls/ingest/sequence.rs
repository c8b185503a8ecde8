//! Puts calls back in correlation order as they arrive, so they can be resolved and
//! written while the capture runs and memory stays bounded by what is in flight.
//!
//! Correlation ids are dense: every id the probes hand out becomes an entry record unless
//! the ring was full. So the next id to release is either entered (returned or still in
//! flight), not yet delivered, or lost:
//! - returned: released;
//! - in flight at a tick, and a synchronisation (which changes no resolution state):
//!   released at its place in the order ("deferred"); its exit completes it later;
//! - in flight, and state-changing (record, destroy, create, …; all quick): wait;
//! - not delivered at two consecutive ticks (below the highest id known at the first):
//!   lost — every such gap at once, however many the ring's overflow made. Later calls
//!   never resolve past it (see the resolver), and if it does arrive, it is released as
//!   late.
//!
//! Calls waiting are bounded ([`MAX_PENDING`]): past it the head is given up (missing
//! ids lost), so a flood of calls behind a gap never holds the daemon's memory.
//!
//! A daemon trace records some of the processes the probes number calls for: the ids of
//! the others' calls, which the daemon reads and routes elsewhere, are skipped
//! ([`Sequencer::skip`]), not lost, and its sequence starts after the last id the daemon
//! had read when it began ([`Sequencer::starting_at`]).

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::model::Call;

/// Calls held waiting for an earlier id at most (about 200 bytes each).
pub(crate) const MAX_PENDING: usize = 1 << 18;

#[derive(Clone, Debug, PartialEq)]
pub enum Released {
    /// A returned call, in order. Its `exit_ns`/`ret` are `None` when its exit record was
    /// lost (counted by the pairing).
    Call(Call),
    /// A call still in flight, in order; its [`Released::Completion`] may follow.
    Deferred(Call),
    /// A deferred call returned.
    Completion(u64, Exit),
    /// Correlation ids that never arrived (the first, and how many): their records were
    /// lost. A run of ids is one item, however long (a hostile raw file may jump far).
    Lost(u64, u64),
    /// A call whose id had been declared lost, delivered after all (with its exit if it
    /// returned): too late for its place in the order.
    Late(Call),
}

/// How a returned call's exit completes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exit {
    pub exit_ns: u64,
    pub ret: i64,
    /// The out-parameter's value at return, when the API has one and it was read.
    pub out: Option<u64>,
}

impl Exit {
    pub fn apply(&self, c: &mut Call) {
        c.exit_ns = Some(self.exit_ns);
        c.ret = Some(self.ret);
        if let Some(v) = self.out {
            c.args[0] = v;
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    InFlight,
    Returned,
    /// Its exit record was lost: it returned, when and how is unknown.
    ExitLost,
}

#[derive(Default)]
pub struct Sequencer {
    next: u64,
    /// Calls entered at or after `next`, returned or not.
    pending: BTreeMap<u64, (Call, State)>,
    /// Ids at or after `next` that are not this sequence's (another process's calls).
    skipped: BTreeSet<u64>,
    /// Released in flight, awaiting their exit.
    deferred: HashSet<u64>,
    /// Arrived after being declared lost and still in flight.
    stragglers: HashMap<u64, Call>,
    /// The highest id known (entered or skipped) at the last tick: an id below it still
    /// missing at the next tick had a whole tick to arrive, and is lost.
    known_at_tick: Option<u64>,
    /// The last id the probes assigned, when known at the end: ids after the last one
    /// seen are lost too (no later id shows them as a gap).
    last_assigned: Option<u64>,
}

impl Sequencer {
    pub fn new() -> Self {
        Self {
            next: 1,
            ..Default::default()
        }
    }

    /// A sequence whose first id is `first` (those before are not its own).
    pub fn starting_at(first: u64) -> Self {
        Self {
            next: first.max(1),
            ..Default::default()
        }
    }

    /// A synchronisation entered before this sequence began (none of its ids): released
    /// at once, outside the order — it changes no state — and, in flight, completed by
    /// its exit.
    pub fn outside(&mut self, call: Call, out: &mut impl FnMut(Released)) {
        match call.exit_ns {
            Some(_) => out(Released::Call(call)),
            None => {
                self.deferred.insert(call.correlation);
                out(Released::Deferred(call));
            }
        }
    }

    /// An id that is not this sequence's: passed over, not lost.
    pub fn skip(&mut self, correlation: u64, out: &mut impl FnMut(Released)) {
        if correlation < self.next || self.pending.contains_key(&correlation) {
            return;
        }
        // In order (the common case: the daemon reads ids nearly in order), no set.
        if correlation == self.next {
            self.next += 1;
        } else {
            self.skipped.insert(correlation);
        }
        self.release(out);
    }

    /// The lowest id waiting (a call, or one skipped), if any.
    fn first_waiting(&self) -> Option<u64> {
        let call = self.pending.keys().next().copied();
        let skip = self.skipped.first().copied();
        call.into_iter().chain(skip).min()
    }

    /// Calls waiting for an earlier id, or in flight at the watermark.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Moves the order past its head: ids missing before the first call waiting are
    /// lost, and a call in flight there is released deferred. For the end, and for a
    /// replay holding too many calls (an id that never comes, in a file with no ticks).
    pub fn give_up_head(&mut self, out: &mut impl FnMut(Released)) {
        let Some(first) = self.first_waiting() else {
            return;
        };
        if self.next < first {
            out(Released::Lost(self.next, first - self.next));
            self.next = first;
        }
        self.release_with(true, out);
        if let Some((c, _)) = self.pending.remove(&self.next) {
            // A state-changing call still in flight.
            self.deferred.insert(self.next);
            out(Released::Deferred(c));
            self.next += 1;
            self.release(out);
        }
    }

    /// A call entered (from its entry record), or a complete call (replay).
    pub fn entered(&mut self, call: Call, out: &mut impl FnMut(Released)) {
        if call.correlation < self.next {
            // Declared lost, then delivered.
            if call.exit_ns.is_some() {
                out(Released::Late(call));
            } else {
                self.stragglers.insert(call.correlation, call);
            }
            return;
        }
        let state = if call.exit_ns.is_some() {
            State::Returned
        } else {
            State::InFlight
        };
        self.pending.insert(call.correlation, (call, state));
        self.release(out);
        if self.pending.len() > MAX_PENDING {
            self.give_up_head(out);
        }
    }

    /// The exit of the call with this correlation id; `false` when it completes no call
    /// known here (the caller counts it: a return is never dropped unsaid).
    #[must_use]
    pub fn returned(
        &mut self,
        correlation: u64,
        exit: Exit,
        out: &mut impl FnMut(Released),
    ) -> bool {
        if let Some((c, state)) = self.pending.get_mut(&correlation) {
            exit.apply(c);
            *state = State::Returned;
            self.release(out);
        } else if self.deferred.remove(&correlation) {
            out(Released::Completion(correlation, exit));
        } else if let Some(mut c) = self.stragglers.remove(&correlation) {
            exit.apply(&mut c);
            out(Released::Late(c));
        } else {
            return false;
        }
        true
    }

    /// A call whose exit record was lost: released as returned, with no exit.
    pub fn exit_lost(&mut self, correlation: u64, out: &mut impl FnMut(Released)) {
        if let Some((_, state)) = self.pending.get_mut(&correlation) {
            *state = State::ExitLost;
            self.release(out);
        } else if self.deferred.remove(&correlation) {
            // Stays written as in flight: its end is unknown.
        } else if let Some(c) = self.stragglers.remove(&correlation) {
            out(Released::Late(c));
        }
    }

    /// Releases what is in order. A call in flight holds the order until a tick finds it
    /// still in flight: then, if it changes no state, it is passed over ("deferred").
    fn release(&mut self, out: &mut impl FnMut(Released)) {
        self.release_with(false, out);
    }

    fn release_with(&mut self, defer: bool, out: &mut impl FnMut(Released)) {
        loop {
            if self.skipped.remove(&self.next) {
                self.next += 1;
                continue;
            }
            let Some(&(ref c, state)) = self.pending.get(&self.next) else {
                return;
            };
            if state == State::InFlight && (!defer || !c.api.op().waits()) {
                return;
            }
            let (c, _) = self.pending.remove(&self.next).expect("present");
            if state == State::InFlight {
                self.deferred.insert(self.next);
                out(Released::Deferred(c));
            } else {
                out(Released::Call(c));
            }
            self.next += 1;
        }
    }

    /// Passes over calls in flight at the head that change no state, now (replay of a
    /// capture that did so at this point).
    pub fn defer_in_flight(&mut self, out: &mut impl FnMut(Released)) {
        self.release_with(true, out);
    }

    /// Periodic: an id missing at two consecutive ticks, with later ids waiting behind
    /// it (known at the first), is declared lost; every such gap at once.
    pub fn tick(&mut self, out: &mut impl FnMut(Released)) {
        let known = self.known_at_tick.take();
        loop {
            self.release_with(true, out);
            let Some(first) = self.first_waiting() else {
                break;
            };
            // A state-changing call in flight holds the order: it has not returned.
            if self.pending.contains_key(&self.next) {
                break;
            }
            match known {
                Some(k) if self.next <= k => {
                    out(Released::Lost(self.next, first - self.next));
                    self.next = first;
                }
                _ => break,
            }
        }
        let call = self.pending.keys().next_back().copied();
        let skip = self.skipped.last().copied();
        self.known_at_tick = call.into_iter().chain(skip).max();
    }

    /// Replay of a capture whose gaps are known: `count` ids from `first` are lost.
    pub fn lost(&mut self, first: u64, count: u64, out: &mut impl FnMut(Released)) {
        if first == self.next && count > 0 {
            out(Released::Lost(first, count));
            self.next = first.saturating_add(count);
            self.release(out);
        }
    }

    /// The probes assigned ids up to `last` (read from their counter at the end).
    pub fn assigned_up_to(&mut self, last: u64) {
        self.last_assigned = Some(last);
    }

    /// End of capture: everything left, in order. Missing ids are lost, up to the last
    /// assigned when known; calls still in flight are released deferred (never
    /// completed).
    pub fn finish(&mut self, out: &mut impl FnMut(Released)) {
        while self.first_waiting().is_some() {
            self.give_up_head(out);
        }
        if let Some(last) = self.last_assigned
            && self.next <= last
        {
            out(Released::Lost(self.next, last + 1 - self.next));
            self.next = last + 1;
        }
        let mut rest: Vec<Call> = self.stragglers.drain().map(|(_, c)| c).collect();
        rest.sort_by_key(|c| c.correlation);
        for c in rest {
            out(Released::Late(c));
        }
    }
}

#[cfg(test)]
mod tests;
