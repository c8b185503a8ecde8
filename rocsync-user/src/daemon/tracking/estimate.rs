//! The counts the duty cycle estimates (`cycle.rs`): while the cycled files' probes are
//! off, each series of a cycled API (records, stream waits, destroys; by label group,
//! API and device) goes on at the rate of the period on before, scaled by the share of
//! its group's calls that the cycled files' processes made then (a group may hold
//! processes of other files, counted exactly). `/metrics` adds the estimates to the
//! kernel's counts and shows them apart (`rocsync_sync_calls_estimated_total`).

use std::collections::{BTreeMap, BTreeSet};

use rocsync_common::{Api, MetricKey};
use tokio::time::Instant;

/// A series: (label group, metrics slot).
type Series = (u32, u32);

/// What the kernel had counted at one moment.
pub struct Counts {
    pub at: Instant,
    /// The cycled APIs' series.
    pub series: BTreeMap<Series, u64>,
    /// Each tracked process's calls, its group, and whether a cycled file serves it.
    pub pids: BTreeMap<u32, (u32, u32, bool)>,
}

/// Whether `key`'s calls are cycled.
pub fn is_cycled(key: &MetricKey) -> bool {
    Api::from_u32(key.api).is_some_and(|a| a.return_optional() && !a.is_polling())
}

#[derive(Default)]
pub struct Estimates {
    /// Calls estimated so far, by series: added to the kernel's counts.
    pub added: BTreeMap<Series, u64>,
    /// What is not a whole call yet, by series.
    carried: BTreeMap<Series, f64>,
    /// The counts as the period on began.
    start: Option<Counts>,
    /// Calls per second of each series in the last period on (the cycled share).
    rates: BTreeMap<Series, f64>,
    /// Estimated up to here while the probes are off.
    until: Option<Instant>,
}

impl Estimates {
    /// The cycled files' probes went on: what they missed up to now estimated, and the
    /// period on measured from `now`.
    pub fn probed(&mut self, now: Counts) {
        self.extend(now.at);
        self.until = None;
        self.start = Some(now);
    }

    /// They went off: the rates of the period on that ends now.
    pub fn unprobed(&mut self, now: Counts) {
        self.rates.clear();
        if let Some(start) = self.start.take() {
            self.rates = rates(&start, &now);
        }
        self.until = Some(now.at);
    }

    /// Estimates what they miss up to `now` (still off).
    pub fn extend(&mut self, now: Instant) {
        let Some(until) = self.until else { return };
        let secs = now.saturating_duration_since(until).as_secs_f64();
        for (&series, &rate) in &self.rates {
            let carried = self.carried.entry(series).or_default();
            *carried += rate * secs;
            let whole = carried.floor();
            *carried -= whole;
            *self.added.entry(series).or_default() += whole as u64;
        }
        self.until = Some(now);
    }

    /// The probes are on again for good (the cycle ended): estimated up to `now`.
    pub fn stop(&mut self, now: Instant) {
        self.extend(now);
        self.until = None;
        self.start = None;
    }

    /// The probes are on again for good, its processes gone since the last estimate:
    /// nothing more estimated.
    pub fn halt(&mut self) {
        self.until = None;
        self.start = None;
    }

    /// Forgets the series of ended label groups (their counts went with them).
    pub fn forget_group(&mut self, group: u32) {
        self.added.retain(|(g, _), _| *g != group);
        self.carried.retain(|(g, _), _| *g != group);
        self.rates.retain(|(g, _), _| *g != group);
    }
}

/// Each series' calls per second from `a` to `b`, times the share of its group's calls
/// made by processes a cycled file serves.
fn rates(a: &Counts, b: &Counts) -> BTreeMap<Series, f64> {
    let secs = b.at.saturating_duration_since(a.at).as_secs_f64();
    if secs <= 0.0 {
        return BTreeMap::new();
    }
    // Per group: (calls of cycled processes, calls of all), over the period.
    let mut made: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    for (pid, &(calls, group, cycled)) in &b.pids {
        let Some(&(before, _, _)) = a.pids.get(pid) else {
            continue;
        };
        let n = u64::from(calls.wrapping_sub(before));
        let m = made.entry(group).or_default();
        m.0 += if cycled { n } else { 0 };
        m.1 += n;
    }
    let groups: BTreeSet<u32> = b.series.keys().map(|(g, _)| *g).collect();
    let share = |g: u32| match made.get(&g) {
        Some(&(cycled, all)) if all > 0 => cycled as f64 / all as f64,
        // No process of it measured both times: the cycled ones' alone, as far as known.
        _ => f64::from(u8::from(groups.contains(&g))),
    };
    (b.series.iter())
        .map(|(&s, &n)| {
            let delta = n.saturating_sub(a.series.get(&s).copied().unwrap_or(0));
            (s, delta as f64 * share(s.0) / secs)
        })
        .filter(|&(_, r)| r > 0.0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn counts(at: Instant, series: &[(Series, u64)], pids: &[(u32, u32, u32, bool)]) -> Counts {
        Counts {
            at,
            series: series.iter().copied().collect(),
            pids: pids.iter().map(|&(p, c, g, y)| (p, (c, g, y))).collect(),
        }
    }

    #[test]
    fn the_calls_off_are_the_rate_on_times_the_time_off_for_the_cycled_share() {
        let t = Instant::now();
        let s = Duration::from_secs(1);
        let mut e = Estimates::default();
        // Group 0: pid 1 (cycled) made 3 000 calls in the second on, pid 2 (another
        // file's) 1 000: three quarters of the series' 4 000 are the cycled process's.
        e.probed(counts(
            t,
            &[((0, 7), 100)],
            &[(1, 0, 0, true), (2, 0, 0, false)],
        ));
        e.unprobed(counts(
            t + s,
            &[((0, 7), 4_100)],
            &[(1, 3_000, 0, true), (2, 1_000, 0, false)],
        ));
        e.extend(t + 3 * s);
        assert_eq!(e.added[&(0, 7)], 6_000, "2 s off at 3 000/s");
        // On again after one more second: that second is estimated too; then nothing
        // more while on.
        e.probed(counts(t + 4 * s, &[((0, 7), 4_300)], &[]));
        assert_eq!(e.added[&(0, 7)], 9_000);
        e.extend(t + 9 * s);
        assert_eq!(e.added[&(0, 7)], 9_000, "on: counted, not estimated");
        e.forget_group(0);
        assert!(e.added.is_empty());
    }
}
