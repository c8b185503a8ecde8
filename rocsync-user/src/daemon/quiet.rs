//! The daemon's log, bounded per peer: any local user can make it refuse requests (the
//! dynolog port has no authentication) or map runtime copies it will not probe, and
//! each refusal was a line in root's journal (the soak: ~2 900 lines a minute). Each
//! peer gets [`BURST`] lines of a kind per [`WINDOW`]; past them the lines are counted,
//! and said as one line once the window has passed.

use std::{collections::HashMap, time::Duration};

use tokio::time::Instant;

pub(super) const BURST: u32 = 20;
pub(super) const WINDOW: Duration = Duration::from_secs(10);

struct Window {
    began: Instant,
    said: u32,
    held: u64,
}

/// Lines of one kind (`what`, e.g. "dyno refusals"), by peer.
pub(crate) struct Quiet {
    what: &'static str,
    peers: HashMap<String, Window>,
}

impl Quiet {
    pub(crate) fn new(what: &'static str) -> Self {
        Self {
            what,
            peers: HashMap::new(),
        }
    }

    /// Whether a line of `peer`'s may be said now (else it is counted).
    pub(crate) fn allow(&mut self, peer: &str, now: Instant) -> bool {
        self.flush(now);
        let w = self.peers.entry(peer.to_string()).or_insert(Window {
            began: now,
            said: 0,
            held: 0,
        });
        if w.said < BURST {
            w.said += 1;
            true
        } else {
            w.held += 1;
            false
        }
    }

    /// The lines of `peer`'s held back in its window.
    #[cfg(test)]
    pub(super) fn held(&self, peer: &str) -> u64 {
        self.peers.get(peer).map_or(0, |w| w.held)
    }

    /// Says every count held back, its window passed or not: the daemon stops, and a
    /// count kept for a later tick would never be said.
    pub(crate) fn say_held(&mut self) {
        self.flush(Instant::now() + WINDOW);
    }

    /// Says what each peer whose window has passed had held back, and forgets it.
    pub(crate) fn flush(&mut self, now: Instant) {
        let what = self.what;
        self.peers.retain(|peer, w| {
            if now.duration_since(w.began) < WINDOW {
                return true;
            }
            if w.held > 0 {
                crate::say!(
                    "rocsync daemon: {} more {what} from {peer} in {WINDOW:?} not shown",
                    w.held
                );
            }
            false
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_gets_a_burst_per_window_and_no_one_elses() {
        let mut q = Quiet::new("dyno refusals");
        let t = Instant::now();
        let said = (0..50).filter(|_| q.allow("uid 65534", t)).count();
        assert_eq!(said, BURST as usize);
        assert!(q.allow("uid 0", t), "another peer's lines are its own");
        assert_eq!(q.peers["uid 65534"].held, 50 - u64::from(BURST));
        q.flush(t + WINDOW);
        assert!(q.peers.is_empty());
        assert!(q.allow("uid 65534", t + WINDOW), "a new window");
    }

    /// Stopping within a window: its count is said, not lost with the daemon.
    #[test]
    fn a_count_held_is_said_when_the_daemon_stops() {
        let mut q = Quiet::new("retention removals");
        let t = Instant::now();
        let said = (0..BURST + 3).filter(|_| q.allow("the limits", t)).count();
        assert_eq!(said, BURST as usize);
        q.say_held();
        assert!(q.peers.is_empty(), "said and forgotten");
    }
}
