//! Traces started and ended at a time: dyno's requests with a synchronized start, the
//! sampled windows (one wake-up for both: the earlier), and the end of every trace
//! whose time came.

use std::time::Duration;

use anyhow::Result;
use aya::maps::{MapData, RingBuf};
use tokio::time::Instant;

use crate::daemon::{
    handlers::events::Flow,
    recording::selection,
    state::Daemon,
    triggers::{
        dyno,
        origin::Start,
        scheduled::{self, Waiting},
    },
    untrusted::{self, Peer},
};

impl Daemon {
    /// A request for later, from `peer`: answered with the processes it names now,
    /// started when due.
    pub(crate) fn schedule(
        &mut self,
        start: Start,
        ahead: Duration,
        peer: Peer,
    ) -> Result<Vec<u32>> {
        scheduled::admit(&self.scheduled, peer)?;
        let pids = selection::matched(&self.tracker, &start.spec)?;
        crate::say!(
            "rocsync daemon: dyno trace {:?} of pid(s) {} from {peer} starts in {} ms",
            start.spec.name,
            untrusted::pids_shown(&pids),
            ahead.as_millis()
        );
        let at = Instant::now() + ahead;
        let i = self.scheduled.partition_point(|w| w.at <= at);
        self.scheduled.insert(i, Waiting { at, start, peer });
        Ok(pids)
    }

    /// When the next timed trace starts: a scheduled one or a sampled window.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        let scheduled = self.scheduled.first().map(|w| w.at);
        scheduled.into_iter().chain(self.sampling.next).min()
    }

    /// Starts the timed traces whose time came. A scheduled one that cannot start (its
    /// processes gone, its agents recorded by another session) is said, not retried; a
    /// sampled window is skipped while another session holds agents, and while nothing
    /// runs (the ended are forgotten a little later).
    pub(crate) fn on_due(&mut self) -> Flow {
        let due = self.scheduled.partition_point(|w| w.at <= Instant::now());
        for w in self.scheduled.drain(..due).collect::<Vec<_>>() {
            let name = w.start.spec.name.clone();
            let admitted = dyno::admit(w.peer, self.sessions.origins());
            if let Err(e) = admitted.map_err(anyhow::Error::from).and_then(|()| {
                self.begin(w.start)?;
                Ok(())
            }) {
                self.not_started.scheduled += 1;
                crate::say!("rocsync daemon: scheduled dyno trace {name:?} not started: {e:#}");
            }
        }
        let window = self.sampling.due(self.config.sampling);
        let running = || (self.tracker.tracked.iter()).any(|&p| selection::alive(p));
        if let Some(window) = window.filter(|_| running())
            && let Err(e) = self.begin(window)
        {
            self.not_started.sampled += 1;
            crate::say!("rocsync daemon: sampled window skipped: {e:#}");
        }
        Flow::Go
    }

    /// Stopping: scheduled traces will not start.
    pub(crate) fn drop_scheduled(&mut self) {
        for w in self.scheduled.drain(..) {
            self.not_started.scheduled += 1;
            crate::say!(
                "rocsync daemon: scheduled dyno trace {:?} not started: the daemon is stopping",
                w.start.spec.name
            );
        }
    }

    /// Finishes the traces whose time came: their recording switched off, then what the
    /// probes wrote before read (theirs), then they are written off the loop.
    pub(crate) fn finish_due(&mut self, ring: &mut RingBuf<MapData>) -> Result<()> {
        self.sessions.due(&mut self.tracker)?;
        if self.sessions.has_closing() {
            self.catch_up(ring);
        }
        for trace in self.sessions.take_closing() {
            self.writing.trace(trace);
        }
        // Nothing records: the returns counting does not need come off (`returns.rs`).
        let wanted = self.flight.is_some() || self.config.all_returns;
        if !wanted && !self.sessions.recording() && !self.sessions.has_closing() {
            self.tracker.returns_off()?;
        }
        self.tracker.retire_returns();
        Ok(())
    }
}
