//! Clock alignment. Kineto writes µs since `baseTimeNanoseconds` on its own clock (an
//! approximate, TSC-derived system clock on CUDA; host API rows the same way on ROCm);
//! rocsync writes CLOCK_MONOTONIC with the REALTIME−MONOTONIC offset measured at its
//! start. Both are the epoch in name only: they differ by an offset (and a drift of
//! a few ppm). Calls both sides saw fix it: the offset is the one under which the most
//! profiler rows find a rocsync call of the same thread and API at the same time, then a
//! line fitted through those pairs absorbs the drift.

use std::collections::HashMap;

use anyhow::{Result, bail};
use rocsync_common::Op;

/// How far apart the two epochs may be at most: farther, they are not the same run.
pub(super) const SEARCH_NS: i64 = 2_000_000_000;
/// A profiler row and a call are one when their starts are this close (once aligned).
pub(super) const COARSE_NS: i64 = 300_000;
pub(super) const FINE_NS: i64 = 100_000;
/// A drift is fitted only over pairs at least this far apart.
const MIN_DRIFT_SPAN_NS: i64 = 10_000_000_000;

/// A point of each side: (thread, op) → sorted epoch start times.
pub(super) type Series = HashMap<(i64, Op), Vec<i64>>;

/// profiler time ≈ rocsync time + `offset_ns` + `ppb` × (rocsync time − `at_ns`) / 1e9.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Alignment {
    pub offset_ns: i64,
    pub at_ns: i64,
    pub ppb: f64,
}

impl Alignment {
    pub(super) fn to_profiler(self, rocsync_ns: i64) -> i64 {
        let dt = (rocsync_ns - self.at_ns) as f64;
        rocsync_ns + self.offset_ns + (dt * self.ppb / 1e9) as i64
    }
}

/// The nearest time in sorted `v` to `t`, and how far it is.
pub(super) fn nearest(v: &[i64], t: i64) -> Option<(usize, i64)> {
    let i = v.partition_point(|&x| x < t);
    [i.checked_sub(1), (i < v.len()).then_some(i)]
        .into_iter()
        .flatten()
        .map(|j| (j, (v[j] - t).abs()))
        .min_by_key(|&(_, d)| d)
}

/// How many profiler rows have a call within `tol` once calls are shifted by `delta`.
fn score(profile: &Series, calls: &Series, delta: i64, tol: i64) -> usize {
    profile
        .iter()
        .filter_map(|(k, ps)| Some((ps, calls.get(k)?)))
        .map(|(ps, cs)| {
            ps.iter()
                .filter(|&&p| nearest(cs, p - delta).is_some_and(|(_, d)| d <= tol))
                .count()
        })
        .sum()
}

/// The span of all times of a series.
fn span(s: &Series) -> Option<(i64, i64)> {
    let lo = s.values().filter_map(|v| v.first()).min()?;
    let hi = s.values().filter_map(|v| v.last()).max()?;
    Some((*lo, *hi))
}

/// The alignment under which the profiler's rows and rocsync's calls line up, or why none
/// does.
pub(super) fn align(profile: &Series, calls: &Series) -> Result<Alignment> {
    let (Some((p0, p1)), Some((c0, c1))) = (span(profile), span(calls)) else {
        bail!("nothing to align: no call of a hooked API on one side");
    };
    if c1 + SEARCH_NS < p0 || p1 + SEARCH_NS < c0 {
        bail!(
            "the capture and the profiler trace do not overlap in time (capture {}–{} s, profiler {}–{} s on the epoch): not the same run?",
            c0 / 1_000_000_000,
            c1 / 1_000_000_000,
            p0 / 1_000_000_000,
            p1 / 1_000_000_000
        );
    }
    // Candidate offsets: each sampled profiler row against the calls of its thread and API
    // near it.
    let mut candidates: Vec<i64> = Vec::new();
    for (k, ps) in profile {
        let Some(cs) = calls.get(k) else { continue };
        let step = (ps.len() / 16).max(1);
        for &p in ps.iter().step_by(step) {
            let lo = cs.partition_point(|&c| c < p - SEARCH_NS);
            let hi = cs.partition_point(|&c| c <= p + SEARCH_NS);
            let near = &cs[lo..hi];
            let skip = near.len().saturating_sub(64) / 2;
            candidates.extend(near.iter().skip(skip).take(64).map(|&c| p - c));
        }
    }
    candidates.sort_unstable();
    candidates.dedup();
    // Coarse: the offsets a quarter of the tolerance apart, by rows matched.
    let mut coarse = candidates.clone();
    coarse.dedup_by(|a, b| (*a - *b).abs() < COARSE_NS / 4);
    let best = coarse
        .iter()
        .map(|&d| (score(profile, calls, d, COARSE_NS), d))
        .max_by_key(|&(s, d)| (s, -d.abs()));
    let Some((hits, delta)) = best.filter(|&(s, _)| s > 0) else {
        bail!(
            "no call of the capture lines up with the profiler's rows (same thread, same API, same time): not the same run or not the same process?"
        );
    };
    let inside: usize = profile
        .values()
        .flatten()
        .filter(|&&p| p >= c0 + delta - COARSE_NS && p <= c1 + delta + COARSE_NS)
        .count();
    if hits * 2 < inside || hits < 2 {
        bail!(
            "only {hits} of the profiler's {inside} rows in the capture's time line up with a call: not the same run?"
        );
    }
    // Fine: calls may be closer together than the coarse tolerance, so the coarse pick can
    // be off by a neighbour's distance. Of the exact pairwise offsets near it, the one
    // that puts rows nearest their calls (each row's distance capped, so that a row with
    // no call counts no more than a far one) is the clocks' offset.
    let delta = candidates
        .iter()
        .filter(|&&d| (d - delta).abs() <= COARSE_NS)
        .map(|&d| (distance(profile, calls, d), (d - delta).abs(), d))
        .min()
        .map_or(delta, |(_, _, d)| d);
    Ok(fit(profile, calls, delta))
}

/// Summed distance of each profiler row to its nearest call once calls are shifted by
/// `delta`, each capped at [`FINE_NS`].
fn distance(profile: &Series, calls: &Series, delta: i64) -> i64 {
    profile
        .iter()
        .filter_map(|(k, ps)| Some((ps, calls.get(k)?)))
        .flat_map(|(ps, cs)| {
            ps.iter()
                .map(move |&p| nearest(cs, p - delta).map_or(FINE_NS, |(_, d)| d.min(FINE_NS)))
        })
        .sum()
}

/// A least-squares line through the pairs matched under `delta`.
fn fit(profile: &Series, calls: &Series, delta: i64) -> Alignment {
    let mut pairs: Vec<(i64, i64)> = Vec::new();
    for (k, ps) in profile {
        let Some(cs) = calls.get(k) else { continue };
        for &p in ps {
            if let Some((j, d)) = nearest(cs, p - delta)
                && d <= COARSE_NS
            {
                pairs.push((cs[j], p - cs[j]));
            }
        }
    }
    let n = pairs.len() as f64;
    let at = pairs.iter().map(|p| p.0 as f64).sum::<f64>() / n;
    let mut offsets: Vec<i64> = pairs.iter().map(|p| p.1).collect();
    offsets.sort_unstable();
    let median = offsets[offsets.len() / 2];
    let (lo, hi) = pairs.iter().fold((i64::MAX, i64::MIN), |(lo, hi), p| {
        (lo.min(p.0), hi.max(p.0))
    });
    // Over a short capture a slope fits the jitter, not the clocks: the offset alone.
    if hi - lo < MIN_DRIFT_SPAN_NS {
        return Alignment {
            offset_ns: median,
            at_ns: at as i64,
            ppb: 0.0,
        };
    }
    let mean = pairs.iter().map(|p| p.1 as f64).sum::<f64>() / n;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for &(x, y) in &pairs {
        let dx = x as f64 - at;
        sxy += dx * (y as f64 - mean);
        sxx += dx * dx;
    }
    let ppb = if sxx > 0.0 { sxy / sxx * 1e9 } else { 0.0 };
    // Beyond 100 ppm it is no real clock's drift: keep the offset alone.
    if ppb.abs() > 100_000.0 {
        return Alignment {
            offset_ns: median,
            at_ns: at as i64,
            ppb: 0.0,
        };
    }
    Alignment {
        offset_ns: mean.round() as i64,
        at_ns: at as i64,
        ppb,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(points: &[(i64, Op, i64)]) -> Series {
        let mut s = Series::new();
        for &(t, op, ns) in points {
            s.entry((t, op)).or_default().push(ns);
        }
        s.values_mut().for_each(|v| v.sort_unstable());
        s
    }

    #[test]
    fn finds_the_offset_and_the_drift() {
        let calls: Vec<_> = (0..200)
            .map(|i| {
                (
                    7,
                    Op::StreamWaitEvent,
                    1_000_000_000 + i * 100_000_000 + (i % 7) * 37_000,
                )
            })
            .collect();
        // Profiler: 1.234 ms later, drifting 5 ppm, and 1 µs later still.
        let prof: Vec<_> = calls
            .iter()
            .map(|&(t, op, ns)| {
                (
                    t,
                    op,
                    ns + 1_234_000 + (ns - 1_000_000_000) / 200_000 + 1_000,
                )
            })
            .collect();
        let a = align(&series(&prof), &series(&calls)).unwrap();
        for &(_, _, ns) in &calls {
            let want = ns + 1_235_000 + (ns - 1_000_000_000) / 200_000;
            assert!((a.to_profiler(ns) - want).abs() < 2_000, "{a:?}");
        }
    }

    #[test]
    fn refuses_series_that_do_not_overlap() {
        let calls = series(&[(1, Op::EventRecord, 1_000), (1, Op::EventRecord, 2_000)]);
        let prof = series(&[(1, Op::EventRecord, 10_000_000_000_000)]);
        let e = align(&prof, &calls).unwrap_err().to_string();
        assert!(e.contains("do not overlap in time"), "{e}");
    }

    #[test]
    fn refuses_calls_that_do_not_line_up() {
        let calls = series(&[
            (1, Op::EventRecord, 1_000_000),
            (1, Op::EventRecord, 9_000_000),
        ]);
        let prof = series(&[(2, Op::EventQuery, 1_000_000)]);
        assert!(align(&prof, &calls).is_err());
    }
}
