//! dyno's traces are guests: its port has no authentication, so any local user may ask,
//! and a trace that claimed its agents could keep root's `rocsync trace` refused for as
//! long as requests keep coming (measured: 24 of 25 refused over 10 minutes of
//! back-to-back 60 s requests). They claim none — recording beside any session, as
//! the daemon's own stall and hang traces — and are bounded instead: each peer has at
//! most [`PER_PEER`] recording, the node [`PER_NODE`]; past them dyno is answered busy.

use std::fmt;

use crate::daemon::{serving::peer::Peer, triggers::origin::Origin};

/// dyno traces one peer may have recording at once.
pub(crate) const PER_PEER: usize = 1;
/// dyno traces recording at once on the node.
pub(crate) const PER_NODE: usize = 4;

/// A dyno request past its bounds: dyno's own answer is "busy".
#[derive(Debug)]
pub(crate) struct Busy(String);

impl fmt::Display for Busy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Busy {}

/// Whether `peer` may start a dyno trace now, beside the traces `recording`.
pub(crate) fn admit<'a>(
    peer: Peer,
    recording: impl Iterator<Item = &'a Origin>,
) -> Result<(), Busy> {
    let peers: Vec<Peer> = recording
        .filter_map(|o| match o {
            Origin::Dyno { peer, .. } => Some(*peer),
            _ => None,
        })
        .collect();
    let of_peer = peers.iter().filter(|&&p| p == peer).count();
    if of_peer >= PER_PEER {
        return Err(Busy(format!(
            "{peer} has a dyno trace recording (at most {PER_PEER}): ask again once it is written"
        )));
    }
    if peers.len() >= PER_NODE {
        return Err(Busy(format!(
            "{} dyno traces are recording (at most {PER_NODE}): ask again once one is written",
            peers.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dyno(uid: u32) -> Origin {
        Origin::Dyno {
            log_file: "/x".into(),
            peer: Peer::Uid(uid),
        }
    }

    #[test]
    fn one_per_peer_and_four_on_the_node_whatever_else_records() {
        let recording = [dyno(1), Origin::Asked, Origin::Sampled];
        assert!(admit(Peer::Uid(2), recording.iter()).is_ok());
        let e = admit(Peer::Uid(1), recording.iter()).unwrap_err();
        assert!(
            e.to_string().contains("uid 1 has a dyno trace recording"),
            "{e}"
        );
        let full = [dyno(1), dyno(2), dyno(3), dyno(4)];
        let e = admit(Peer::Uid(5), full.iter()).unwrap_err();
        assert!(e.to_string().contains("4 dyno traces are recording"), "{e}");
    }
}
