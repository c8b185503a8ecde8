//! Sampled windows: every tracked process recorded for a window, once a period, the
//! first at a random point of the period so a fleet's nodes spread.

use std::time::Duration;

use tokio::time::Instant;

use crate::daemon::triggers::{origin::Origin, origin::Start, origin::TraceSpec};

/// When the next window starts (none: sampling is off).
#[derive(Default)]
pub(crate) struct Sampling {
    pub next: Option<Instant>,
}

impl Sampling {
    /// The schedule of `sampling` (window, period), from now.
    pub(crate) fn new(sampling: Option<(Duration, Duration)>) -> Self {
        Self {
            next: sampling.map(|(_, every)| first_sample(every)),
        }
    }

    /// The window due now, if any, and the next one scheduled (`sampling`: as
    /// configured now: a reload may have turned it off).
    pub(crate) fn due(&mut self, sampling: Option<(Duration, Duration)>) -> Option<Start> {
        let next = self.next.filter(|&t| t <= Instant::now())?;
        let Some((window, every)) = sampling else {
            self.next = None;
            return None;
        };
        self.next = Some(next + every);
        let spec = TraceSpec {
            pids: Vec::new(),
            cgroup: None,
            pod: None,
            agents: Default::default(),
            duration: window,
            name: "sample".into(),
        };
        Some(Start::new(spec, Origin::Sampled))
    }
}

/// The first sampled window of a schedule `every` long: at a random point of the
/// period, so a fleet's nodes spread.
fn first_sample(every: Duration) -> Instant {
    Instant::now() + every.mul_f64(random_fraction())
}

/// A number in [0, 1) that differs between runs (std's hasher keys are random).
fn random_fraction() -> f64 {
    use std::hash::{BuildHasher as _, Hasher as _};
    let h = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    (h >> 11) as f64 / (1u64 << 53) as f64
}
