//! Which profiler runtime row is which rocsync call. Both sides see the same calls of a
//! thread in the same order; once the clocks are aligned, a row and a call of the same
//! thread and API (HIP and CUDA names alike, per-thread variants folded) are one when
//! they start within [`FINE_NS`] of each other, paired in order: the k-th row of a
//! thread and API with the (k + shift)-th call, the shift most rows agree on. A pair
//! whose starts are farther apart is still one where the row's span holds the call's or
//! the call's the row's: the profiler took its start elsewhere in the call (its thread
//! preempted between its timestamp and the probe, either way round).

use std::collections::{HashMap, HashSet};

use rocsync_common::Op;

use super::{
    clock::{Alignment, FINE_NS},
    profile::RuntimeRow,
};
use crate::calls::resolve::Row;

/// Profiler correlation ↔ rocsync correlation, both ways.
#[derive(Default)]
pub(super) struct Matches {
    pub to_rocsync: HashMap<i64, u64>,
    pub to_profiler: HashMap<u64, i64>,
    /// Hooked-API rows of the profiler with no call (outside the capture, or lost).
    pub rows_unmatched: usize,
    /// Calls inside the profiler's time with no row.
    pub calls_unmatched: usize,
    /// |profiler start − aligned rocsync start| of the pairs, ns, sorted.
    pub residuals: Vec<i64>,
}

/// A thread and what its calls do.
type Key = (i64, Op);
/// A row's (start, correlation, duration), or a call's (start, correlation, end), ns on
/// the profiler's clock.
type Span<C> = (i64, C, i64);

/// Pairs `rows` (one process's hooked-API rows) with `calls` (that process's resolved
/// rows) under `clock`.
pub(super) fn pair(
    rows: &[&RuntimeRow],
    calls: &[Row],
    epoch: impl Fn(u64) -> i64,
    clock: &Alignment,
) -> Matches {
    let mut by_key: HashMap<Key, Vec<Span<i64>>> = HashMap::new();
    for r in rows {
        if let Some(op) = r.op {
            by_key
                .entry((r.tid, op))
                .or_default()
                .push((r.start_ns, r.correlation, r.dur_ns));
        }
    }
    let mut calls_by_key: HashMap<Key, Vec<Span<u64>>> = HashMap::new();
    for c in calls {
        let t = clock.to_profiler(epoch(c.call.enter_ns));
        let end = c.call.exit_ns.map_or(t, |x| clock.to_profiler(epoch(x)));
        calls_by_key
            .entry((c.call.tid as i64, c.call.api.op()))
            .or_default()
            .push((t, c.call.correlation, end));
    }
    let (lo, hi) = rows.iter().fold((i64::MAX, i64::MIN), |(lo, hi), r| {
        (lo.min(r.start_ns), hi.max(r.start_ns + r.dur_ns))
    });
    let ops: HashSet<Op> = by_key.keys().map(|k| k.1).collect();
    let mut m = Matches::default();
    for (key, mut ps) in by_key {
        ps.sort_unstable();
        let mut cs = calls_by_key.remove(&key).unwrap_or_default();
        cs.sort_unstable();
        // Both sides hold the same calls in the same order: the index shift most rows'
        // nearest call agrees on pairs them, even where calls are closer together than
        // the two clocks' jitter.
        let mut votes: HashMap<isize, usize> = HashMap::new();
        for (i, &(p, _, _)) in ps.iter().enumerate() {
            let j = cs.partition_point(|c| c.0 < p);
            for j in [j.wrapping_sub(1), j] {
                if let Some(c) = cs.get(j)
                    && (c.0 - p).abs() <= FINE_NS
                {
                    *votes.entry(j as isize - i as isize).or_default() += 1;
                }
            }
        }
        let shift = votes
            .into_iter()
            .max_by_key(|&(k, n)| (n, -k.abs()))
            .map_or(0, |(k, _)| k);
        let mut used = vec![false; cs.len()];
        for (i, &(p, pc, dur)) in ps.iter().enumerate() {
            let j = i as isize + shift;
            // One span holds the other: a neighbour call that merely touches the row (calls
            // back to back, a pair shifted by a lost row) is not it.
            let holds = |a: i64, a_end: i64, b: i64, b_end: i64| {
                a - FINE_NS <= b && b_end <= a_end + FINE_NS
            };
            let one = |t: i64, end: i64| {
                (t - p).abs() <= FINE_NS || holds(p, p + dur, t, end) || holds(t, end, p, p + dur)
            };
            match usize::try_from(j).ok().and_then(|j| Some((j, cs.get(j)?))) {
                Some((j, &(t, rc, end))) if one(t, end) => {
                    used[j] = true;
                    m.to_rocsync.insert(pc, rc);
                    m.to_profiler.insert(rc, pc);
                    m.residuals.push((t - p).abs());
                }
                _ => m.rows_unmatched += 1,
            }
        }
        m.calls_unmatched += cs
            .iter()
            .zip(&used)
            .filter(|(c, u)| !**u && c.0 >= lo && c.0 <= hi)
            .count();
    }
    // Calls of APIs the profiler writes rows for (CUPTI writes none for cudaEventDestroy).
    for ((_, op), cs) in &calls_by_key {
        if ops.contains(op) {
            m.calls_unmatched += cs.iter().filter(|c| c.0 >= lo && c.0 <= hi).count();
        }
    }
    m.residuals.sort_unstable();
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calls::ingest::Call;
    use rocsync_common::Api;

    const MS: i64 = 1_000_000;

    fn call(correlation: u64, enter_ns: u64, exit_ns: u64) -> Row {
        Row::of(Call {
            api: Api::HipStreamSynchronize,
            pid: 1,
            tid: 1,
            correlation,
            enter_ns,
            exit_ns: Some(exit_ns),
            ret: Some(0),
            args: [0; 3],
            filtered: false,
        })
    }

    /// `rows` paired with `calls` on one clock.
    fn paired(rows: &[RuntimeRow], calls: &[Row]) -> Matches {
        let clock = Alignment {
            offset_ns: 0,
            at_ns: 0,
            ppb: 0.0,
        };
        pair(
            &rows.iter().collect::<Vec<_>>(),
            calls,
            |ns| ns as i64,
            &clock,
        )
    }

    fn row(correlation: i64, start_ns: i64, dur_ns: i64) -> RuntimeRow {
        RuntimeRow {
            name: "hipStreamSynchronize".into(),
            op: Some(Api::HipStreamSynchronize.op()),
            pid: 1,
            tid: 1,
            start_ns,
            dur_ns,
            correlation,
            external_id: None,
            ts_text: String::new(),
            dur_text: String::new(),
        }
    }

    /// Calls 10 ms apart, 20 µs long; the profiler's second row began 3 ms before its
    /// call (its timestamp taken, then the thread preempted) and spans it: still that
    /// call's row. A row that spans no call stays unmatched.
    #[test]
    fn a_row_that_began_long_before_its_call_but_spans_it_is_that_calls() {
        let calls: Vec<Row> = (0..3u64)
            .map(|k| call(k + 1, k * 10 * MS as u64, k * 10 * MS as u64 + 20_000))
            .collect();
        let rows = [
            row(101, 0, 20_000),
            row(102, 7 * MS, 3 * MS + 20_000),
            row(103, 20 * MS, 20_000),
        ];
        let m = paired(&rows, &calls);
        assert_eq!(m.to_rocsync.get(&102), Some(&2));
        assert_eq!(
            (m.rows_unmatched, m.calls_unmatched, m.to_rocsync.len()),
            (0, 0, 3)
        );
        assert_eq!(m.residuals.last(), Some(&(3 * MS)));

        // Calls back to back, the first one's lost: its row (begun 100 µs late, ended
        // 5 µs into the next call by the clocks' error) only touches the next call, and is
        // not that call's.
        let next = [call(2, 2 * MS as u64, 4 * MS as u64 - 10_000)];
        let touching = [row(101, 100_000, 2 * MS - 95_000)];
        let m = paired(&touching, &next);
        assert_eq!((m.rows_unmatched, m.to_rocsync.len()), (1, 0));

        // Shorter, it ends before its call begins: not that call's.
        let rows = [
            row(101, 0, 20_000),
            row(102, 7 * MS, MS),
            row(103, 20 * MS, 20_000),
        ];
        let m = paired(&rows, &calls);
        assert_eq!(
            (m.rows_unmatched, m.calls_unmatched, m.to_rocsync.len()),
            (1, 1, 2)
        );
    }
}
