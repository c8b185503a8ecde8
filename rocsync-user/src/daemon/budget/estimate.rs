//! The counts the duty cycle estimates (`cycle.rs`): while the cycled files' probes are
//! off, each series of a cycled API (records, stream waits, destroys; by label group,
//! API and device) goes on at the rate of the period on before, scaled by the share of
//! its group's calls that the cycled files' processes made then (a group may hold
//! processes of other files, counted exactly), and by how much more CPU time those
//! processes spent on their own work while off than while on (their CPU time less their
//! probed calls at the daemon's price): a loop the probes slowed makes more calls
//! unprobed, one that waits on its GPU does not. Calls the kernel still counted while
//! off (probes being detached) are not estimated again. `/metrics` adds the estimates to the
//! kernel's counts and shows them apart (`rocsync_sync_calls_estimated_total`).

use std::collections::{BTreeMap, BTreeSet};

use rocsync_common::{Api, MetricKey};
use tokio::time::Instant;

/// A series: (label group, metrics slot).
type Series = (u32, u32);

/// What the kernel had counted at one moment.
pub(crate) struct Counts {
    pub at: Instant,
    /// The cycled APIs' series.
    pub series: BTreeMap<Series, u64>,
    /// Each tracked process's calls, its group, and whether a cycled file serves it.
    pub pids: BTreeMap<u32, (u32, u32, bool)>,
    /// The cycled processes' CPU time (ns), and what one of their probed calls costs.
    pub cpu: BTreeMap<u32, (u64, f64)>,
}

/// The most the CPU time's scaling multiplies an estimate by (another thread of the
/// process busy only while off says little of the calls).
const MOST_SCALED: f64 = 2.0;

/// Whether `key`'s calls are cycled.
pub(crate) fn is_cycled(key: &MetricKey) -> bool {
    Api::from_u32(key.api).is_some_and(|a| a.return_optional() && !a.is_polling())
}

#[derive(Default)]
pub(crate) struct Estimates {
    /// Calls estimated so far, by series: added to the kernel's counts.
    pub added: BTreeMap<Series, u64>,
    /// The counts as the period on began.
    start: Option<Counts>,
    /// Calls per second of each series in the last period on (the cycled share), and
    /// that share.
    rates: BTreeMap<Series, (f64, f64)>,
    /// The cycled processes' own CPU time per second in the last period on.
    work_on: Option<f64>,
    /// The counts as the probes went off, while they are.
    off_from: Option<Counts>,
    /// Calls estimated since then, by series: each estimate is of the whole span off
    /// (its CPU time over the span, not a second's ticks), less what was added before.
    span: BTreeMap<Series, f64>,
}

/// Below this much CPU time of their own per second on (20 of its 10 ms ticks), the
/// processes' CPU time is too coarse to scale by: not scaled.
const LEAST_WORK: f64 = 0.2e9;

impl Estimates {
    /// The cycled files' probes went on: what they missed up to now estimated, and the
    /// period on measured from `now`.
    pub(crate) fn probed(&mut self, now: Counts) {
        self.extend(&now);
        self.end_span();
        self.start = Some(now);
    }

    /// They went off: the rates of the period on that ends now.
    pub(crate) fn unprobed(&mut self, now: Counts) {
        self.rates.clear();
        self.work_on = None;
        if let Some(start) = self.start.take() {
            self.rates = rates(&start, &now);
            self.work_on = work_per_second(&start, &now);
        }
        self.span.clear();
        self.off_from = Some(now);
    }

    /// Estimates what they miss up to `now` (still off, or going on).
    pub(crate) fn extend(&mut self, now: &Counts) {
        let Some(from) = &self.off_from else { return };
        let secs = now.at.saturating_duration_since(from.at).as_secs_f64();
        let scale = match (self.work_on, work_per_second(from, now)) {
            (Some(on), Some(off)) if on >= LEAST_WORK => (off / on).clamp(0.0, MOST_SCALED),
            _ => 1.0,
        };
        for (&series, &(rate, share)) in &self.rates {
            // The probes went on firing while they were detached: those calls were
            // counted, and are not estimated again.
            let counted = now.series.get(&series).copied().unwrap_or(0);
            let counted = counted.saturating_sub(from.series.get(&series).copied().unwrap_or(0));
            let whole = (rate * secs * scale - counted as f64 * share)
                .max(0.0)
                .floor();
            // Counters only go up: an estimate of the span below what was added stays.
            let done = self.span.entry(series).or_default();
            if whole > *done {
                *self.added.entry(series).or_default() += (whole - *done) as u64;
                *done = whole;
            }
        }
    }

    fn end_span(&mut self) {
        self.off_from = None;
        self.span.clear();
    }

    /// The probes are on again for good (the cycle ended): estimated up to `now`.
    pub(crate) fn stop(&mut self, now: Counts) {
        self.extend(&now);
        self.halt();
    }

    /// The probes are on again for good, its processes gone since the last estimate:
    /// nothing more estimated.
    pub(crate) fn halt(&mut self) {
        self.end_span();
        self.start = None;
    }

    /// Forgets the series of ended label groups (their counts went with them).
    pub(crate) fn forget_group(&mut self, group: u32) {
        self.added.retain(|(g, _), _| *g != group);
        self.span.retain(|(g, _), _| *g != group);
        self.rates.retain(|(g, _), _| *g != group);
    }
}

/// The CPU time per second the cycled processes (those in both) spent on their own work
/// from `a` to `b`: their CPU time less their probed calls at their price. `None` when
/// none was measured both times.
fn work_per_second(a: &Counts, b: &Counts) -> Option<f64> {
    let secs = b.at.saturating_duration_since(a.at).as_secs_f64();
    let mut work = None;
    for (pid, &(cpu, price)) in &b.cpu {
        let (Some(&(before, _)), Some(calls), Some(calls_before)) =
            (a.cpu.get(pid), b.pids.get(pid), a.pids.get(pid))
        else {
            continue;
        };
        let probed = f64::from(calls.0.wrapping_sub(calls_before.0)) * price;
        let own = cpu.saturating_sub(before) as f64 - probed;
        *work.get_or_insert(0.0) += own.max(0.0);
    }
    work.filter(|_| secs > 0.0).map(|w| w / secs)
}

/// Each series' calls per second from `a` to `b`, times the share of its group's calls
/// made by processes a cycled file serves.
fn rates(a: &Counts, b: &Counts) -> BTreeMap<Series, (f64, f64)> {
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
            (s, (delta as f64 * share(s.0) / secs, share(s.0)))
        })
        .filter(|&(_, (r, _))| r > 0.0)
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
            cpu: BTreeMap::new(),
        }
    }

    /// With each pid's CPU time (ns) and a price of 1 µs a probed call.
    fn with_cpu(mut c: Counts, cpu: &[(u32, u64)]) -> Counts {
        c.cpu = cpu.iter().map(|&(p, ns)| (p, (ns, 1_000.0))).collect();
        c
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
        e.extend(&counts(t + 3 * s, &[((0, 7), 4_100)], &[]));
        assert_eq!(e.added[&(0, 7)], 6_000, "2 s off at 3 000/s");
        // On again after one more second: that second is estimated too, but for the 200
        // calls the kernel counted in it (probes still detaching), three quarters of
        // them the cycled process's; then nothing more while on.
        e.probed(counts(t + 4 * s, &[((0, 7), 4_300)], &[]));
        assert_eq!(e.added[&(0, 7)], 9_000 - 150);
        e.extend(&counts(t + 9 * s, &[((0, 7), 9_000)], &[]));
        assert_eq!(e.added[&(0, 7)], 8_850, "on: counted, not estimated");
        e.forget_group(0);
        assert!(e.added.is_empty());
    }

    /// A loop on the CPU that its probes slow: 100 000 probed calls (100 ms at 1 µs) of
    /// its second on left it 900 ms of its own; off, it had the whole second, so it made
    /// a ninth more calls than the second on. A loop waiting on its GPU spent as much of
    /// its own time off as on: the rate on stands.
    #[test]
    fn the_time_off_is_scaled_by_the_cpu_time_the_process_had_for_itself() {
        let t = Instant::now();
        let s = Duration::from_secs(1);
        let on = |e: &mut Estimates, cpu_on: u64| {
            e.probed(with_cpu(
                counts(t, &[((0, 7), 0)], &[(1, 0, 0, true)]),
                &[(1, 0)],
            ));
            e.unprobed(with_cpu(
                counts(t + s, &[((0, 7), 50_000)], &[(1, 100_000, 0, true)]),
                &[(1, cpu_on)],
            ));
        };
        // Its CPU time (ns) in the second on, and in each of the two seconds off: the
        // calls estimated for those two.
        let estimated = |cpu_on: u64, cpu_off: u64| {
            let mut e = Estimates::default();
            on(&mut e, cpu_on);
            e.extend(&with_cpu(
                counts(t + 3 * s, &[], &[(1, 100_000, 0, true)]),
                &[(1, cpu_on + 2 * cpu_off)],
            ));
            e.added[&(0, 7)]
        };
        // 50 000/s for 2 s, times 1 s / 0.9 s of its own.
        assert_eq!(estimated(1_000_000_000, 1_000_000_000), 111_111);
        assert_eq!(estimated(300_000_000, 200_000_000), 100_000);
        // 50 ms of its own a second on, 130 off: five ticks against thirteen says little,
        // and the rate on stands.
        assert_eq!(estimated(150_000_000, 130_000_000), 100_000);
    }
}
