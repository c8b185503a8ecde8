//! Pairs each exit record with its entry: per thread, a stack of the calls entered and
//! not yet returned. A hooked function that calls another hooked function (an `_spt`
//! export calling the plain one, an interposer) is two calls, the inner one on top.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use rocsync_common::{Api, LOSS_MASK};

/// An entered call, as the stack remembers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Open {
    correlation: u64,
    api: Api,
    /// Its thread's lost call records at entry (`rocsync_common::LOSS_MASK`); `None`
    /// where unknown (a call known from elsewhere, entered before the records).
    losses: Option<u32>,
    /// A later call of its thread returned while it was open: its thread went on, so
    /// it returned too, unless it is an outer call of that one (an `_spt` export calling
    /// the plain one, whose own return follows at once).
    overtaken: bool,
}

/// What an exit record completes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Matched {
    /// The call this exit returns from.
    pub correlation: Option<u64>,
    /// Calls entered above it whose exits never came (their exit records were lost).
    pub orphaned: Vec<u64>,
    /// Matching nothing, with no entry of its thread before it, where threads are
    /// followed ([`Pairing::follow_threads`]): a call begun before the records.
    pub began_before: bool,
}

#[derive(Default)]
pub(crate) struct Pairing {
    open: HashMap<(u32, u32), Vec<Open>>,
    /// Threads that have entered a call, where records may begin mid-call (elsewhere
    /// not kept: a set insert per call for nothing).
    threads: Option<HashSet<(u32, u32)>>,
}

impl Pairing {
    /// Records may begin mid-call: an unmatched exit before its thread's first entry is
    /// told apart ([`Matched::began_before`]).
    pub(crate) fn follow_threads(&mut self) {
        self.threads.get_or_insert_default();
    }

    /// `losses`: the thread's lost call records at entry, where known.
    pub(crate) fn entered(
        &mut self,
        pid: u32,
        tid: u32,
        (correlation, api): (u64, Api),
        losses: Option<u32>,
    ) {
        self.seen(pid, tid);
        self.open.entry((pid, tid)).or_default().push(Open {
            correlation,
            api,
            losses,
            overtaken: false,
        });
    }

    /// The thread entered a call that cannot be paired (its record undecodable).
    pub(crate) fn seen(&mut self, pid: u32, tid: u32) {
        if let Some(threads) = &mut self.threads {
            threads.insert((pid, tid));
        }
    }

    /// The call an exit of `api` on this thread returns from: the innermost open call of
    /// that API. Calls above it lost their exits. Where the thread lost records since
    /// that call entered (`losses` differ), it may be an earlier call's entry: neither is
    /// paired (the entry is released with no return, the exit matches nothing), never
    /// turned into one long call.
    pub(crate) fn returned(&mut self, pid: u32, tid: u32, api: Api, losses: u32) -> Matched {
        let none = Matched {
            correlation: None,
            orphaned: Vec::new(),
            began_before: (self.threads.as_ref()).is_some_and(|t| !t.contains(&(pid, tid))),
        };
        let Some(stack) = self.open.get_mut(&(pid, tid)) else {
            return none;
        };
        let Some(at) = stack.iter().rposition(|o| o.api == api) else {
            return none;
        };
        let mut orphaned: Vec<u64> = stack.drain(at + 1..).map(|o| o.correlation).collect();
        let open = stack.pop().expect("found above");
        if stack.is_empty() {
            self.open.remove(&(pid, tid));
        } else {
            for below in stack.iter_mut() {
                below.overtaken = true;
            }
        }
        let own = open.losses.is_none_or(|l| l == losses & LOSS_MASK);
        if !own {
            orphaned.push(open.correlation);
        }
        Matched {
            correlation: own.then_some(open.correlation),
            orphaned,
            began_before: false,
        }
    }

    /// Calls entered and not returned, on every thread.
    pub(crate) fn open_calls(&self) -> usize {
        self.open.values().map(Vec::len).sum()
    }

    /// At the end (after the grace for calls in flight): the open calls that later calls
    /// of their thread returned over, forgotten here. Their thread went on without their
    /// return being read: the exit record is lost, however it went (a call still in
    /// flight at the end has nothing returned over it).
    pub(crate) fn take_overtaken(&mut self) -> Vec<u64> {
        let mut taken = Vec::new();
        for stack in self.open.values_mut() {
            stack.retain(|o| {
                if o.overtaken {
                    taken.push(o.correlation);
                }
                !o.overtaken
            });
        }
        self.open.retain(|_, stack| !stack.is_empty());
        taken.sort_unstable();
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_calls_pair_innermost_first() {
        let mut p = Pairing::default();
        p.entered(1, 7, (10, Api::HipStreamSynchronizeSpt), Some(0));
        p.entered(1, 7, (11, Api::HipStreamSynchronize), Some(0));
        p.entered(1, 8, (12, Api::HipStreamSynchronize), Some(0));
        let m = p.returned(1, 7, Api::HipStreamSynchronize, 0);
        assert_eq!(m.correlation, Some(11));
        assert_eq!(
            p.returned(1, 8, Api::HipStreamSynchronize, 0).correlation,
            Some(12)
        );
        let m = p.returned(1, 7, Api::HipStreamSynchronizeSpt, 0);
        assert_eq!((m.correlation, m.orphaned), (Some(10), vec![]));
        assert_eq!(p.open_calls(), 0);
    }

    #[test]
    fn a_lost_exit_orphans_the_calls_above_and_a_lost_entry_matches_nothing() {
        let mut p = Pairing::default();
        p.follow_threads();
        p.entered(1, 7, (1, Api::HipDeviceSynchronize), Some(0));
        p.entered(1, 7, (2, Api::HipEventRecord), Some(0));
        // The record's exit was lost: the outer call's exit still finds its entry.
        let m = p.returned(1, 7, Api::HipDeviceSynchronize, 0);
        assert_eq!((m.correlation, m.orphaned), (Some(1), vec![2]));
        // An exit whose entry was lost matches nothing: an entry lost, on a thread
        // that entered calls before.
        let m = p.returned(1, 7, Api::HipEventSynchronize, 0);
        assert_eq!((m.correlation, m.began_before), (None, false));
        // No entry of its thread before it: (where records begin mid-call) begun before.
        let m = p.returned(2, 2, Api::HipEventSynchronize, 0);
        assert_eq!((m.correlation, m.began_before), (None, true));
        // Once the thread enters a call, what it returns from unmatched was lost.
        p.entered(2, 2, (3, Api::HipEventRecord), Some(0));
        assert!(p.returned(2, 2, Api::HipEventRecord, 0).correlation == Some(3));
        assert!(!p.returned(2, 2, Api::HipEventSynchronize, 0).began_before);
        // Threads not followed (run, attach): never told apart.
        let mut q = Pairing::default();
        assert!(!q.returned(3, 3, Api::HipEventSynchronize, 0).began_before);
    }

    #[test]
    fn a_return_after_its_threads_loss_pairs_with_no_earlier_entry() {
        let mut p = Pairing::default();
        // Entered with none lost; the thread then lost records (this call's return and
        // the next call's entry, say): the return that comes is not this call's.
        p.entered(1, 7, (1, Api::HipEventQuery), Some(0));
        let m = p.returned(1, 7, Api::HipEventQuery, 2);
        assert_eq!((m.correlation, m.orphaned), (None, vec![1]));
        assert_eq!(p.open_calls(), 0);
        // Counts equal past the mask: none lost between.
        p.entered(1, 7, (2, Api::HipEventQuery), Some(5));
        let m = p.returned(1, 7, Api::HipEventQuery, (1 << 24) + 5);
        assert_eq!((m.correlation, m.orphaned), (Some(2), vec![]));
        // An entry known from elsewhere (no count) pairs as before.
        p.entered(1, 7, (0, Api::HipStreamSynchronize), None);
        assert_eq!(
            p.returned(1, 7, Api::HipStreamSynchronize, 9).correlation,
            Some(0)
        );
    }

    #[test]
    fn an_open_call_its_thread_returned_over_is_taken_at_the_end() {
        let mut p = Pairing::default();
        // Thread 7's synchronize returned, but its exit was never read; the thread went
        // on: a record and a query returned over it.
        p.entered(1, 7, (8, Api::HipEventSynchronize), Some(0));
        p.entered(1, 7, (9, Api::HipEventRecord), Some(0));
        assert_eq!(
            p.returned(1, 7, Api::HipEventRecord, 0).correlation,
            Some(9)
        );
        // Thread 8's synchronize is in flight at the end: nothing returned over it.
        p.entered(1, 8, (10, Api::HipStreamSynchronize), Some(0));
        assert_eq!(p.take_overtaken(), vec![8]);
        assert_eq!(p.open_calls(), 1);
        assert_eq!(p.take_overtaken(), Vec::<u64>::new());
    }
}
