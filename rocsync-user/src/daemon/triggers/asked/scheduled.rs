//! dyno's requests with a synchronized start: each waits, with its pids, until its time
//! (at most an hour), bounded per peer and in all since any local user may send them.
//! [`Scheduled`] holds them in the order they start; the daemon begins each when due.

use std::path::Path;

use anyhow::{Result, bail};
use tokio::time::Instant;

use crate::daemon::{serving::peer::Peer, serving::protocol, triggers::origin::Start};

/// dyno requests waiting for their start, per peer and in all: each holds its pids and
/// a timer for up to an hour, and any local user may send them.
pub(crate) const MAX_WAITING_PER_PEER: usize = 8;
pub(crate) const MAX_WAITING: usize = 64;

/// A dyno request waiting for its synchronized start.
pub(crate) struct Waiting {
    pub at: Instant,
    pub start: Start,
    /// Who asked, for the limits.
    pub peer: Peer,
}

/// dyno's requests waiting for their start, soonest first.
#[derive(Default)]
pub(crate) struct Scheduled {
    waiting: Vec<Waiting>,
}

impl Scheduled {
    /// Whether `peer` may add a request now.
    pub(crate) fn admit(&self, peer: Peer) -> Result<()> {
        admit(&self.waiting, peer)
    }

    /// Adds `start` from `peer`, due at `at`, within the bounds.
    pub(crate) fn add(&mut self, start: Start, at: Instant, peer: Peer) -> Result<()> {
        admit(&self.waiting, peer)?;
        let i = self.waiting.partition_point(|w| w.at <= at);
        self.waiting.insert(i, Waiting { at, start, peer });
        Ok(())
    }

    /// When the soonest starts.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.waiting.first().map(|w| w.at)
    }

    /// Those whose time came, taken.
    pub(crate) fn due(&mut self) -> Vec<Waiting> {
        let due = self.waiting.partition_point(|w| w.at <= Instant::now());
        self.waiting.drain(..due).collect()
    }

    /// Every one, taken (the daemon stops).
    pub(crate) fn take_all(&mut self) -> Vec<Waiting> {
        std::mem::take(&mut self.waiting)
    }

    /// Whether one waiting writes to `log`.
    pub(crate) fn writes_to(&self, log: &Path) -> bool {
        (self.waiting.iter()).any(|w| w.start.origin.output() == Some(log))
    }

    /// What `rocsync status` shows of them.
    pub(crate) fn status(&self) -> Vec<protocol::Scheduled> {
        let now = Instant::now();
        (self.waiting.iter())
            .map(|w| protocol::Scheduled {
                session: w.start.spec.name.clone(),
                starts_in_ms: w.at.saturating_duration_since(now).as_millis() as u64,
            })
            .collect()
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::triggers::{origin::Origin, origin::TraceSpec};
    use std::time::Duration;

    #[test]
    fn requests_waiting_are_bounded_per_peer_and_in_all() {
        let start = || {
            let spec = TraceSpec::of(1, Duration::from_millis(1), "t".into());
            Start::new(spec, Origin::Sampled)
        };
        let at = Instant::now();
        let mut waiting = Vec::new();
        let nobody = Peer::Uid(65534);
        for _ in 0..MAX_WAITING_PER_PEER {
            admit(&waiting, nobody).unwrap();
            waiting.push(Waiting {
                at,
                start: start(),
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
                start: start(),
                peer,
            });
            uid += 1;
        }
        let e = admit(&waiting, Peer::Uid(4242)).unwrap_err().to_string();
        assert!(e.contains("64 dyno traces wait"), "{e}");
    }
}
