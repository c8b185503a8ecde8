//! dyno's requests with a synchronized start: each waits, with its pids, until its time
//! (at most an hour), bounded per peer and in all since any local user may send them.

use anyhow::{Result, bail};
use tokio::time::Instant;

use crate::daemon::{triggers::origin::Start, untrusted::Peer};

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

/// Whether `peer` may add a request to those `waiting`.
pub(crate) fn admit(waiting: &[Waiting], peer: Peer) -> Result<()> {
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
