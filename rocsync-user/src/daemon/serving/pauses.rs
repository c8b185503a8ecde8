//! Listeners that rest after a failed accept: out of descriptors, a connection stays
//! queued and accept fails again at once, so retrying in the loop would spin.

use std::time::Duration;

use tokio::time::Instant;

/// The listeners, as [`Pauses`] indexes them.
pub(in crate::daemon) const METRICS: usize = 0;
pub(in crate::daemon) const REQUESTS: usize = 1;
pub(in crate::daemon) const DYNO: usize = 2;
/// How long a listener rests after a failed accept: out of descriptors, the connection
/// stays queued and accept fails again at once, so retrying in the loop would spin.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Listeners paused after a failed accept, until when, and the accepts failed in a row
/// of each: said at the first and when it recovers, not ten times a second.
#[derive(Default)]
pub(in crate::daemon) struct Pauses {
    paused: [Option<Instant>; 3],
    failed: [u64; 3],
}

impl Pauses {
    pub(in crate::daemon) fn accepting(&self, listener: usize) -> bool {
        self.paused[listener].is_none()
    }

    /// The connection, or the listener paused.
    pub(in crate::daemon) fn accepted<C>(
        &mut self,
        listener: usize,
        conn: std::io::Result<C>,
    ) -> Option<C> {
        let failed = std::mem::take(&mut self.failed[listener]);
        match conn {
            Ok(c) => {
                if failed > 0 {
                    crate::say!(
                        "rocsync daemon: accepting connections again ({failed} accepts failed)"
                    );
                }
                Some(c)
            }
            Err(e) => {
                if failed == 0 {
                    crate::say!(
                        "rocsync daemon: warning: cannot accept connections ({e}); retrying every {ACCEPT_PAUSE:?}"
                    );
                }
                self.failed[listener] = failed + 1;
                self.paused[listener] = Some(Instant::now() + ACCEPT_PAUSE);
                None
            }
        }
    }

    /// When the first paused listener resumes.
    pub(in crate::daemon) fn resumes_at(&self) -> Option<Instant> {
        self.paused.iter().flatten().min().copied()
    }

    pub(in crate::daemon) fn resume(&mut self) {
        let now = Instant::now();
        for p in &mut self.paused {
            *p = p.filter(|&at| at > now);
        }
    }
}
