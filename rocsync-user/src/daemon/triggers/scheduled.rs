//! Traces the daemon starts at a time: dyno's requests with a synchronized start, the
//! sampled windows, and the end of every trace whose time came.

use std::time::Duration;

use anyhow::{Result, bail};
use aya::maps::{MapData, RingBuf};
use tokio::time::Instant;

use crate::daemon::{
    recording::traces::{self, TraceSpec},
    serving::untrusted::{self, Peer},
    state::Daemon,
};

/// dyno requests waiting for their start, per peer and in all: each holds its pids and
/// a timer for up to an hour, and any local user may send them.
pub const MAX_WAITING_PER_PEER: usize = 8;
pub const MAX_WAITING: usize = 64;

/// A dyno request waiting for its synchronized start.
pub struct Waiting {
    pub at: Instant,
    pub spec: TraceSpec,
    /// Who asked, for the limits.
    pub peer: Peer,
}

/// Whether `peer` may add a request to those `waiting`.
fn admit(waiting: &[Waiting], peer: Peer) -> Result<()> {
    let of_peer = waiting.iter().filter(|w| w.peer == peer).count();
    if of_peer >= MAX_WAITING_PER_PEER {
        bail!(
            "{peer} has {of_peer} dyno traces waiting for their start (at most \
             {MAX_WAITING_PER_PEER}): ask again once one has started"
        );
    }
    if waiting.len() >= MAX_WAITING {
        bail!(
            "{} dyno traces wait for their start (at most {MAX_WAITING}): ask again once one \
             has started",
            waiting.len()
        );
    }
    Ok(())
}

impl Daemon {
    /// A request for later, from `peer`: answered with the processes it names now,
    /// started when due.
    pub fn schedule(&mut self, spec: TraceSpec, ahead: Duration, peer: Peer) -> Result<Vec<u32>> {
        admit(&self.scheduled, peer)?;
        let pids = traces::matched(&self.tracker, &spec)?;
        crate::say!(
            "rocsync daemon: dyno trace {:?} of pid(s) {} from {peer} starts in {} ms",
            spec.name,
            untrusted::pids_shown(&pids),
            ahead.as_millis()
        );
        let at = Instant::now() + ahead;
        let i = self.scheduled.partition_point(|w| w.at <= at);
        self.scheduled.insert(i, Waiting { at, spec, peer });
        Ok(pids)
    }

    /// When the next scheduled trace starts.
    pub fn next_scheduled(&self) -> Option<Instant> {
        self.scheduled.first().map(|w| w.at)
    }

    /// Starts the scheduled traces whose time came; one that cannot start (its processes
    /// gone, its agents recorded by another session) is said, not retried.
    pub fn start_scheduled(&mut self) {
        let due = self.scheduled.partition_point(|w| w.at <= Instant::now());
        for w in self.scheduled.drain(..due).collect::<Vec<_>>() {
            let name = w.spec.name.clone();
            if let Err(e) = self.start(w.spec) {
                self.not_started.scheduled += 1;
                crate::say!("rocsync daemon: scheduled dyno trace {name:?} not started: {e:#}");
            }
        }
    }

    /// Stopping: scheduled traces will not start.
    pub fn drop_scheduled(&mut self) {
        for w in self.scheduled.drain(..) {
            self.not_started.scheduled += 1;
            crate::say!(
                "rocsync daemon: scheduled dyno trace {:?} not started: the daemon is stopping",
                w.spec.name
            );
        }
    }

    /// A sampled window of every tracked process, unless another session holds agents.
    pub fn sample(&mut self, window: Duration) {
        // No window is due while nothing runs (the ended are forgotten a little later).
        if !self.tracker.tracked.iter().any(|&p| traces::alive(p)) {
            return;
        }
        let spec = TraceSpec {
            flight: false,
            pids: Vec::new(),
            cgroup: None,
            pod: None,
            agents: Default::default(),
            duration: window,
            name: "sample".into(),
            output: None,
        };
        if let Err(e) = self.start(spec) {
            self.not_started.sampled += 1;
            crate::say!("rocsync daemon: sampled window skipped: {e:#}");
        }
    }

    /// Finishes the traces whose time came: their recording switched off, then what the
    /// probes wrote before read (theirs), then they are written off the loop.
    pub fn finish_due(&mut self, ring: &mut RingBuf<MapData>) -> Result<()> {
        self.sessions.due(&mut self.tracker)?;
        if self.sessions.has_closing() {
            self.catch_up(ring);
        }
        for trace in self.sessions.take_closing() {
            self.writing.trace(trace);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_waiting_are_bounded_per_peer_and_in_all() {
        let spec = || TraceSpec {
            flight: false,
            pids: vec![1],
            cgroup: None,
            pod: None,
            agents: Default::default(),
            duration: Duration::from_millis(1),
            name: "t".into(),
            output: None,
        };
        let at = Instant::now();
        let mut waiting = Vec::new();
        let nobody = Peer::Uid(65534);
        for _ in 0..MAX_WAITING_PER_PEER {
            admit(&waiting, nobody).unwrap();
            waiting.push(Waiting {
                at,
                spec: spec(),
                peer: nobody,
            });
        }
        let e = admit(&waiting, nobody).unwrap_err().to_string();
        assert!(e.contains("uid 65534 has 8 dyno traces waiting"), "{e}");
        let mut uid = 0;
        while waiting.len() < MAX_WAITING {
            let peer = Peer::Uid(uid);
            admit(&waiting, peer).unwrap();
            waiting.push(Waiting {
                at,
                spec: spec(),
                peer,
            });
            uid += 1;
        }
        let e = admit(&waiting, Peer::Uid(4242)).unwrap_err().to_string();
        assert!(e.contains("64 dyno traces wait"), "{e}");
    }
}
