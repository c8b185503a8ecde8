//! The one place a trigger's [`Start`] becomes a recording: its processes chosen, its
//! trace opened (numbered, bounded in size), and its recording switched on — the
//! daemon's own stall and hang traces beginning with what the flight recorder holds.

use anyhow::Result;
use rocsync_common::Decoded;

use crate::daemon::{
    recording::{flight, selection, traces::Active},
    state::Daemon,
    tracking::apart::shed_log,
    triggers::{collectives, origin::Start},
};
use crate::ingest::Call;

impl Daemon {
    /// Starts what a trigger asked, unless its processes are gone or (asked) its agents
    /// are another session's: then nothing of it stays. Returns the trace.
    pub(crate) fn begin(&mut self, mut start: Start) -> Result<&mut Active> {
        // A stall's or a hang's process is named as it is: it may have exited since, and
        // what the flight recorder holds of it is still its trace.
        let unasked = start.origin.unasked().is_some();
        let pids = match unasked {
            true => start.spec.pids.clone(),
            false => selection::matched(&self.tracker, &start.spec)?,
        };
        let mut slow_call = start.slow_call.take();
        let id = self.take_id();
        let limits = (id, self.config.trace_max_bytes);
        // Every return it records is probed before its recording is switched on, and
        // before its span starts (attaching takes milliseconds: not the user's).
        self.budget.recording(&mut self.tracker)?;
        let mut trace = Active::open(&self.tracker, start, pids, &self.config.state_dir, limits)?;
        match (&mut self.flight, unasked) {
            (Some(f), true) => {
                let span_us = f.span().as_micros() as u64;
                trace.not_recorded_from(shed_log::now_us().saturating_sub(span_us));
                let chunks = f.chunks();
                let history = flight::records(&chunks);
                slow_call = slow_call.filter(|c| !holds(history.clone(), c));
                self.sessions
                    .start_from(&mut self.tracker, trace, history)?;
            }
            _ => self.sessions.start(&mut self.tracker, trace)?,
        }
        let trace = &mut self.sessions.traces.last_mut().expect("just started").1;
        // Before the loop reads its exit: its thread's next exit of its API is its own.
        if let Some(call) = slow_call {
            trace.hold_slow_call(call);
        }
        let comms = self.tracker.probes.comms();
        // Those set up since the last prune too.
        self.tracker.claims.seen(&comms, &[]);
        let tracked = &self.tracker.tracked;
        let owner = |pid| {
            tracked
                .contains(&pid)
                .then(|| collectives::owner(pid))
                .flatten()
        };
        let claims = &self.tracker.claims;
        let past = |id: u64| -> Vec<_> { claims.past_owners(id).cloned().collect() };
        for id in trace.know_communicators(&comms, owner, past) {
            crate::say!(
                "rocsync daemon: comm {id} is claimed on this node by processes of another user or cgroup too (or was): trace {} is not uploaded under job-{id}/",
                trace.id
            );
        }
        Ok(trace)
    }
}

/// Whether `records` hold the entry of `call` (of its thread and API, within a
/// millisecond: the in-flight start and the entry record are two reads of the clock).
fn holds<'a>(records: impl Iterator<Item = &'a [u8]>, call: &Call) -> bool {
    records
        .into_iter()
        .any(|r| match rocsync_common::decode(r) {
            Ok(Decoded::Entry(e)) => {
                e.pid == call.pid
                    && e.tid == call.tid
                    && u32::from(e.api) == call.api as u32
                    && e.enter_ns.abs_diff(call.enter_ns) < 1_000_000
            }
            _ => false,
        })
}
