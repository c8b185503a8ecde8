//! A communicator's answer, as `torchfrtrace` and xpu-timer give one: the furthest
//! collective any rank reached, which ranks are blocked in it (and the innermost frame
//! they share), which are not in it and where each of them is, which ranks have no trace,
//! and the verdict — a rank behind, all ranks launched #N and none completed, mismatched
//! collectives, or not enough traces. Field names follow NCCL RAS's JSON where they mean
//! the same (`hash`, `size`, `ranks_count`, `missing_ranks`, `collective_counts`).

use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde::Serialize;

use crate::read::report::job::rank::{Rank, Trace};

/// A communicator of the job.
#[derive(Debug, Serialize)]
pub(in crate::read::report) struct Communicator {
    /// Its id, the same on every rank (NCCL RAS's `hash`); `None` for ranks without one
    /// that could not be aligned.
    pub hash: Option<String>,
    /// For those: `unaligned-N`.
    pub unaligned: Option<u64>,
    /// Its ranks, as the ranks said (`Group size`).
    pub size: Option<u64>,
    pub ranks_count: usize,
    pub missing_ranks_count: usize,
    pub ranks: Vec<Rank>,
    /// Ranks of it that no trace holds.
    pub missing_ranks: Vec<Missing>,
    /// The furthest collective its ranks reached.
    pub collective: Option<Furthest>,
    pub verdict: Verdict,
}

#[derive(Debug, Serialize)]
pub(in crate::read::report) struct Missing {
    pub rank: u64,
}

/// A rank, named: where it is and what its thread is doing.
#[derive(Clone, Debug, Serialize)]
pub(in crate::read::report) struct Who {
    pub rank: Option<u64>,
    pub pid: u64,
    pub host: Option<String>,
    pub file: String,
    pub at: u64,
    pub how: &'static str,
    #[serde(rename = "where")]
    pub place: Option<String>,
}

impl Who {
    fn of(r: &Rank) -> Who {
        Who {
            rank: r.rank,
            pid: r.pid,
            host: r.host.clone(),
            file: r.file.clone(),
            at: r.at,
            how: r.how,
            place: r.place.clone(),
        }
    }
}

/// The furthest collective: `seq` (`#N`), its operation, who is blocked in it and who
/// is not in it.
#[derive(Debug, Serialize)]
pub(in crate::read::report) struct Furthest {
    pub seq: u64,
    pub op: Option<String>,
    /// The ranks at it that the daemon found blocked (or stalled) in it.
    pub blocked_ranks: Vec<Who>,
    /// The ranks at it, not found blocked (their trace's last collective).
    pub at_ranks: Vec<Who>,
    /// The ranks with a trace that have not entered it, the furthest behind first.
    pub not_entered_ranks: Vec<Who>,
    /// The innermost frame every blocked rank's stack has.
    pub common_frame: Option<String>,
}

/// What the traces say of the communicator.
#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(in crate::read::report) enum Verdict {
    /// Ranks in different operations at the same number.
    MismatchedCollectives { seq: u64, ranks: Vec<RankOp> },
    /// Ranks have not entered `seq`, which the others are in.
    RankBehind { seq: u64, behind: Vec<Who> },
    /// Ranks without a trace (or traces without a collective): no verdict.
    NotEnoughTraces {
        missing_ranks: Vec<u64>,
        /// Traces that hold no collective row (their process's rank unknown).
        traces_without_collectives: Vec<String>,
    },
    /// Every rank launched `seq` and is blocked in it: the collective itself, the
    /// network or a GPU is stuck (what NCCL RAS reports as running).
    NoneCompleted { seq: u64 },
    /// Every rank at `seq`, not every one blocked: no hang seen.
    InStep { seq: u64 },
}

#[derive(Debug, Serialize)]
pub(in crate::read::report) struct RankOp {
    pub rank: Option<u64>,
    pub pid: u64,
    pub op: String,
}

fn blocked(r: &Rank) -> bool {
    matches!(r.how, "blocked" | "stalled")
}

/// The communicator of `ranks`, its furthest collective and verdict; `without`: the
/// job's traces that hold no collective.
pub(in crate::read::report) fn communicator(
    hash: Option<String>,
    unaligned: Option<u64>,
    ranks: Vec<Rank>,
    without: &[&Trace],
) -> Communicator {
    let size = ranks.iter().filter_map(|r| r.nranks).max();
    let present: BTreeSet<u64> = ranks.iter().filter_map(|r| r.rank).collect();
    let missing: Vec<u64> = match size {
        // A size past what a job has is no count to list.
        Some(n) if n <= 1 << 20 => (0..n).filter(|r| !present.contains(r)).collect(),
        _ => Vec::new(),
    };
    let collective = furthest(&ranks);
    let verdict = verdict(&ranks, collective.as_ref(), size, &missing, without);
    Communicator {
        hash,
        unaligned,
        size,
        ranks_count: ranks.len(),
        missing_ranks_count: missing.len(),
        missing_ranks: missing.iter().map(|&rank| Missing { rank }).collect(),
        ranks,
        collective,
        verdict,
    }
}

fn furthest(ranks: &[Rank]) -> Option<Furthest> {
    let hi = ranks.iter().map(|r| r.at).max()?;
    let at: Vec<&Rank> = ranks.iter().filter(|r| r.at == hi).collect();
    let op = (at.iter().find_map(|r| r.api.clone())).or_else(|| {
        let sig = at.iter().find_map(|r| r.calls.iter().find(|c| c.0 == hi))?;
        sig.1.what.split(' ').next().map(String::from)
    });
    let mut behind: Vec<&Rank> = ranks.iter().filter(|r| r.at < hi).collect();
    behind.sort_by_key(|r| (r.at, r.rank, r.pid));
    let in_it: Vec<&Rank> = at.iter().copied().filter(|r| blocked(r)).collect();
    Some(Furthest {
        seq: hi,
        op,
        common_frame: common_frame(&in_it),
        blocked_ranks: in_it.iter().map(|r| Who::of(r)).collect(),
        at_ranks: at
            .iter()
            .filter(|r| !blocked(r))
            .map(|r| Who::of(r))
            .collect(),
        not_entered_ranks: behind.iter().map(|r| Who::of(r)).collect(),
    })
}

/// The innermost frame on every rank's blocked thread: of the first rank's frames,
/// innermost first, the first that every other rank has; else their `where`, if one.
fn common_frame(ranks: &[&Rank]) -> Option<String> {
    let frames = |r: &Rank| -> Vec<String> {
        match r.stack.as_ref().filter(|s| !s.frames.is_empty()) {
            Some(s) => s.frames.clone(),
            None => r.place.iter().cloned().collect(),
        }
    };
    let (first, rest) = ranks.split_first()?;
    let others: Vec<HashSet<String>> = rest
        .iter()
        .map(|r| frames(r).into_iter().collect())
        .collect();
    frames(first)
        .into_iter()
        .find(|f| others.iter().all(|o| o.contains(f)))
}

/// Mismatched operations at one number: the lowest such number and each rank's op.
fn mismatched(ranks: &[Rank]) -> Option<(u64, Vec<RankOp>)> {
    let mut at: BTreeMap<u64, Vec<(usize, &str)>> = BTreeMap::new();
    for (i, r) in ranks.iter().enumerate() {
        for (seq, sig) in &r.calls {
            at.entry(*seq)
                .or_default()
                .push((i, sig.what.split(' ').next()?));
        }
        // The daemon's word where the trace has no row of it (its rows say the same).
        let has_row = r.calls.iter().any(|c| c.0 == r.at);
        if let Some(api) = r.api.as_deref().filter(|_| r.how != "last_row" && !has_row) {
            at.entry(r.at).or_default().push((i, api));
        }
    }
    let (seq, ops) = at.into_iter().find(|(_, ops)| {
        let first = ops[0].1;
        ops.iter().any(|(_, o)| *o != first)
    })?;
    let mut ops: Vec<RankOp> = ops
        .into_iter()
        .map(|(i, op)| RankOp {
            rank: ranks[i].rank,
            pid: ranks[i].pid,
            op: op.to_string(),
        })
        .collect();
    ops.sort_by_key(|o| (o.rank, o.pid));
    ops.dedup_by(|a, b| a.pid == b.pid && a.op == b.op);
    Some((seq, ops))
}

fn verdict(
    ranks: &[Rank],
    top: Option<&Furthest>,
    size: Option<u64>,
    missing: &[u64],
    without: &[&Trace],
) -> Verdict {
    if let Some((seq, ranks)) = mismatched(ranks) {
        return Verdict::MismatchedCollectives { seq, ranks };
    }
    let Some(top) = top else {
        return not_enough(missing, without);
    };
    if !top.not_entered_ranks.is_empty() {
        return Verdict::RankBehind {
            seq: top.seq,
            behind: top.not_entered_ranks.clone(),
        };
    }
    // Every rank with a trace is at the furthest collective.
    let all_here = size.is_some_and(|n| missing.is_empty() && ranks.len() as u64 >= n);
    if !all_here {
        return not_enough(missing, without);
    }
    match top.at_ranks.is_empty() {
        true => Verdict::NoneCompleted { seq: top.seq },
        false => Verdict::InStep { seq: top.seq },
    }
}

fn not_enough(missing: &[u64], without: &[&Trace]) -> Verdict {
    Verdict::NotEnoughTraces {
        missing_ranks: missing.to_vec(),
        traces_without_collectives: without.iter().map(|t| t.file.clone()).collect(),
    }
}
