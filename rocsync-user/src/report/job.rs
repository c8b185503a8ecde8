//! `rocsync report DIR`: the traces of one job's ranks (several nodes' uploads, `attach`
//! or `run` files) side by side — each communicator's ranks, where each one is, and the
//! laggard: the rank behind and the collective the others wait in.
//!
//! Ranks are put together by their communicator's id (the same on every rank). A rank
//! whose communicator was set up before its capture has no id and numbers its
//! collectives from the capture's start: it is aligned to a communicator by the order
//! and signatures (name, type, size) of its collectives, when exactly one shift fits;
//! otherwise the report says it cannot.

use std::{collections::BTreeMap, path::Path};

use anyhow::{Context as _, Result, bail};
use serde::Serialize;

use super::{
    held::Held,
    ranks::{self, Ranks, Said, Seen, Sig},
};
use crate::input::{MAX_HELD, decompressed, listed, open_regular};

/// Collectives two ranks must share to be aligned by their signatures.
const MIN_OVERLAP: usize = 2;
/// Shifts tried per communicator: each is a pass over the rank's collectives.
const MAX_CANDIDATES: usize = 4096;

/// One rank of a communicator, in one trace.
#[derive(Clone, Debug, Serialize)]
pub struct Rank {
    pub file: String,
    pub pid: u64,
    pub rank: Option<u64>,
    pub nranks: Option<u64>,
    pub collectives: usize,
    /// Where it is: the collective it waits in or is at (the daemon's word), else the
    /// last one its trace holds; aligned.
    pub at: u64,
    /// `blocked`, `stalled`, `behind`, or `last_row`.
    pub how: &'static str,
    /// The collective it waits in, as the daemon named it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    #[serde(skip)]
    calls: Vec<(u64, Sig)>,
}

#[derive(Debug, Serialize)]
pub struct Communicator {
    /// Its id, or `unaligned-N` for ranks without one that could not be aligned.
    pub comm: String,
    pub ranks: Vec<Rank>,
    /// The line naming the rank behind, or saying none is.
    pub laggard: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Job {
    pub traces: usize,
    pub communicators: Vec<Communicator>,
    /// What could not be aligned, and why.
    pub notes: Vec<String>,
}

/// Reads every trace (`*.json`, `*.json.gz`) of `dir`: their collectives, all within
/// one bound in bytes.
pub fn read_dir(dir: &Path) -> Result<Job> {
    let files = listed(dir, &[".json", ".json.gz"])?;
    if files.is_empty() {
        bail!("{} holds no trace (*.json, *.json.gz)", dir.display());
    }
    let mut held = Held::new(MAX_HELD);
    let mut read = Vec::new();
    for f in &files {
        let path = shown(&f.display().to_string());
        let file = open_regular(f, "report reads the trace files of a directory")
            .with_context(|| format!("reading {path}"))?;
        let ranks = ranks::read(decompressed(file)?, &mut held)
            .with_context(|| format!("{path} is not a rocsync Kineto trace"))?;
        let name = f
            .file_name()
            .map_or_else(String::new, |n| shown(&n.to_string_lossy()));
        read.push((name, ranks));
    }
    Ok(job(read))
}

/// A file's name as the report prints it: its control characters escaped (a name is
/// whatever the directory's owner made it).
fn shown(name: &str) -> String {
    name.chars()
        .flat_map(|c| match c.is_control() {
            true => c.escape_default().collect::<Vec<_>>(),
            false => vec![c],
        })
        .collect()
}

/// The ranks of `traces` (file name, what it holds), put together.
pub fn job(traces: Vec<(String, Ranks)>) -> Job {
    let n = traces.len();
    let mut known: BTreeMap<String, Vec<Rank>> = BTreeMap::new();
    let mut unknown = Vec::new();
    for (file, t) in &traces {
        for ((pid, _), seen) in &t.comms {
            let said = t.said.iter().find(|s| s.pid == *pid && s.id == seen.id);
            let r = rank_of(file, *pid, seen, said);
            match &seen.id {
                Some(id) => known.entry(id.clone()).or_default().push(r),
                None => unknown.push(r),
            }
        }
        // A process the daemon named without a collective row of its own in the trace.
        for s in &t.said {
            let has_rows = t.comms.keys().any(|(p, _)| *p == s.pid);
            if let (false, Some(id)) = (has_rows, &s.id) {
                let r = rank_of(file, s.pid, &Seen::default(), Some(s));
                known.entry(id.clone()).or_default().push(r);
            }
        }
    }
    let mut notes = Vec::new();
    for (file, t) in &traces {
        if t.unused > 0 {
            notes.push(format!(
                "{file}: {} collective row(s) or daemon word(s) not used (a field no rocsync trace writes)",
                t.unused
            ));
        }
        // What was cut, said: the job's traces share one bound.
        for (why, n) in &t.cut {
            notes.push(format!("{file}: {n} {why}"));
        }
    }
    let mut unaligned: Vec<Vec<Rank>> = Vec::new();
    for mut r in unknown {
        let fits = fits(&r, &known, &unaligned);
        match fits.as_slice() {
            [(group, shift)] => {
                shift_by(&mut r, *shift);
                match group {
                    Target::Known(id) => known.get_mut(id).expect("listed").push(r),
                    Target::Unaligned(i) => unaligned[*i].push(r),
                }
            }
            [] => unaligned.push(vec![r]),
            many => {
                notes.push(format!(
                    "cannot align pid {} ({}): its {} collectives fit {} places (they repeat); \
                     a communicator id needs the capture to begin before ncclCommInitRank, or \
                     the daemon",
                    r.pid,
                    r.file,
                    r.calls.len(),
                    many.len()
                ));
                unaligned.push(vec![r]);
            }
        }
    }
    let mut communicators: Vec<Communicator> = known
        .into_iter()
        .map(|(comm, ranks)| communicator(comm, merged(ranks)))
        .collect();
    for (i, ranks) in unaligned.into_iter().enumerate() {
        communicators.push(communicator(format!("unaligned-{}", i + 1), ranks));
    }
    Job {
        traces: n,
        communicators,
        notes,
    }
}

fn rank_of(file: &str, pid: u64, seen: &Seen, said: Option<&Said>) -> Rank {
    let last = seen.calls.iter().map(|c| c.0).max().unwrap_or(0);
    Rank {
        file: file.to_string(),
        pid,
        rank: seen.rank,
        nranks: seen.nranks,
        collectives: seen.calls.len(),
        at: said.map_or(last, |s| s.seq),
        how: said.map_or("last_row", |s| s.how),
        api: said.and_then(|s| s.api.clone()),
        calls: seen.calls.clone(),
    }
}

/// A process in several traces (its hang trace and another's) is one rank: the
/// daemon's word first, then the furthest position.
fn merged(mut ranks: Vec<Rank>) -> Vec<Rank> {
    ranks.sort_by_key(|r| (r.pid, r.how == "last_row", std::cmp::Reverse(r.at)));
    ranks.dedup_by_key(|r| r.pid);
    ranks.sort_by_key(|r| (r.rank, r.pid));
    ranks
}

enum Target {
    Known(String),
    Unaligned(usize),
}

/// Every (communicator, shift) whose ranks' collectives `r`'s match by signature.
fn fits(
    r: &Rank,
    known: &BTreeMap<String, Vec<Rank>>,
    unaligned: &[Vec<Rank>],
) -> Vec<(Target, i64)> {
    let groups = known
        .iter()
        .map(|(id, g)| (Target::Known(id.clone()), g))
        .chain(
            unaligned
                .iter()
                .enumerate()
                .map(|(i, g)| (Target::Unaligned(i), g)),
        );
    let mut out = Vec::new();
    for (target, group) in groups {
        let Some(reference) = group.iter().max_by_key(|g| g.calls.len()) else {
            continue;
        };
        let theirs: BTreeMap<u64, &Sig> = reference.calls.iter().map(|(s, w)| (*s, w)).collect();
        let Some((first, sig)) = r.calls.first() else {
            continue;
        };
        // A shift that fits maps the rank's first collective onto one of the same
        // signature: those are the only candidates (never a walk over the numbers).
        let candidates = reference
            .calls
            .iter()
            .filter(|(_, w)| w == sig)
            .map(|(t, _)| *t as i64 - *first as i64)
            .take(MAX_CANDIDATES);
        let shifts = candidates.filter(|&d| {
            let overlap = r.calls.iter().filter_map(|(s, w)| {
                let t = *s as i64 + d;
                (t > 0).then(|| theirs.get(&(t as u64)).map(|tw| *tw == w))?
            });
            let (mut n, mut all) = (0, true);
            for same in overlap {
                n += 1;
                all &= same;
            }
            all && n >= MIN_OVERLAP
        });
        let shifts: Vec<i64> = shifts.collect();
        // Several shifts of one communicator are as ambiguous as several communicators.
        for d in shifts {
            let target = match &target {
                Target::Known(id) => Target::Known(id.clone()),
                Target::Unaligned(i) => Target::Unaligned(*i),
            };
            out.push((target, d));
        }
    }
    out
}

fn shift_by(r: &mut Rank, d: i64) {
    let shifted = |s: u64| (s as i64 + d).max(0) as u64;
    r.at = shifted(r.at);
    for c in &mut r.calls {
        c.0 = shifted(c.0);
    }
}

fn communicator(comm: String, ranks: Vec<Rank>) -> Communicator {
    let laggard = laggard(&comm, &ranks);
    Communicator {
        comm,
        ranks,
        laggard,
    }
}

/// `laggard: rank 1 (pid Q, FILE) at #20 of comm C; rank 0 (pid P) waits in
/// ncclAllReduce #21`, or that none is behind.
fn laggard(comm: &str, ranks: &[Rank]) -> Option<String> {
    if ranks.len() < 2 {
        return None;
    }
    let (lo, hi) = (
        ranks.iter().map(|r| r.at).min()?,
        ranks.iter().map(|r| r.at).max()?,
    );
    let who = |r: &Rank| {
        let rank = r.rank.map_or("rank ?".into(), |n| format!("rank {n}"));
        format!("{rank} (pid {}, {})", r.pid, r.file)
    };
    if lo == hi {
        return Some(format!(
            "laggard: none in comm {comm}: every rank is at #{hi}"
        ));
    }
    let behind: Vec<String> = ranks.iter().filter(|r| r.at == lo).map(who).collect();
    let ahead: Vec<String> = ranks.iter().filter(|r| r.at == hi).map(who).collect();
    let api = ranks
        .iter()
        .find_map(|r| r.api.clone().filter(|_| r.at == hi))
        .unwrap_or_else(|| "collective".into());
    Some(format!(
        "laggard: {} at #{lo} of comm {comm}; {} {} in {api} #{hi}",
        behind.join(", "),
        ahead.join(", "),
        if ahead.len() == 1 { "waits" } else { "wait" }
    ))
}

/// The job as text: each communicator's ranks, then its laggard line.
pub fn render(job: &Job) -> String {
    let mut s = format!(
        "job: {} trace(s), {} communicator(s)\n",
        job.traces,
        job.communicators.len()
    );
    for c in &job.communicators {
        s += &format!("\ncommunicator {}:\n", c.comm);
        s += "  rank  size  pid      collectives  at     how       file\n";
        for r in &c.ranks {
            let opt = |v: Option<u64>| v.map_or("?".into(), |v| v.to_string());
            s += &format!(
                "  {:<5} {:<5} {:<8} {:<12} #{:<5} {:<9} {}\n",
                opt(r.rank),
                opt(r.nranks),
                r.pid,
                r.collectives,
                r.at,
                r.how,
                r.file
            );
        }
        if let Some(l) = &c.laggard {
            s += l;
            s.push('\n');
        }
    }
    for n in &job.notes {
        s += &format!("note: {n}\n");
    }
    s
}

#[cfg(test)]
#[path = "job_tests.rs"]
mod tests;
