//! `rocsync report DIR`: the traces of one job's ranks (every node's uploads, `attach` or
//! `run` files) side by side — each communicator's ranks, where each one is, and the
//! verdict ([`crate::read::report::job::verdict`]).
//!
//! Ranks are put together by their communicator's id (the same on every rank). A rank
//! whose communicator was set up before its capture has no id and numbers its
//! collectives from the capture's start: it is aligned to a communicator by the order
//! and signatures (name, type, size) of its collectives, when exactly one shift fits;
//! otherwise the report says it cannot. The folder is read as a neighbour may have
//! planted it ([`crate::read::input::walk`]): what is not a trace is passed over and said.

pub(super) mod align;
pub(super) mod rank;
pub(super) mod ranks;
pub(super) mod text;
pub(super) mod verdict;

use std::{collections::BTreeMap, path::Path};

use anyhow::{Result, bail};
use serde::Serialize;

use crate::read::input::{MAX_HELD, decompressed, walk};
use crate::read::report::{
    job::{
        align::{Groups, MAX_GROUPS_TRIED, Target, shift_by},
        rank::{Rank, Stack, Trace},
        ranks::{Ranks, Said, Seen},
        verdict::Communicator,
    },
    load::held::Held,
};

/// A file passed over, and why.
#[derive(Debug, Serialize)]
pub(super) struct Skipped {
    pub file: String,
    pub why: String,
}

#[derive(Debug, Serialize)]
pub(super) struct Job {
    pub traces_count: usize,
    pub traces: Vec<Trace>,
    pub skipped: Vec<Skipped>,
    pub communicators_count: usize,
    pub communicators: Vec<Communicator>,
    /// What could not be aligned or was cut, and why.
    pub notes: Vec<String>,
}

/// Reads every trace (`*.json`, `*.json.gz`) under `dir` (its node folders too): their
/// collectives and the daemon's words, all within one bound in bytes.
pub(super) fn read_dir(dir: &Path) -> Result<Job> {
    let mut held = Held::new(MAX_HELD);
    let (mut read, mut skipped) = (Vec::new(), Vec::new());
    let mut progress = crate::read::report::load::progress::Progress::new("reading the traces");
    let walked = walk::each_file(dir, &[".json", ".json.gz"], |path, file| {
        let name = shown(&path.display().to_string());
        progress.item();
        let ranks = decompressed(file).and_then(|input| ranks::read(input, &mut held));
        match ranks {
            Ok(r) => read.push((name, r)),
            Err(e) => skipped.push(Skipped {
                file: name,
                why: format!("not a rocsync trace: {}", first_line(&format!("{e:#}"))),
            }),
        }
    })?;
    progress.done();
    for p in walked.passed {
        let file = shown(&p.path.display().to_string());
        skipped.push(Skipped {
            file,
            why: p.why.into(),
        });
    }
    if read.is_empty() {
        let said: Vec<String> = (skipped.iter().take(10))
            .map(|s| format!("\n  {}: {}", s.file, s.why))
            .collect();
        bail!(
            "{} holds no rocsync trace (*.json, *.json.gz){}",
            dir.display(),
            said.concat()
        );
    }
    let mut job = job(read);
    if walked.others > 0 {
        let n = walked.others;
        job.notes.push(format!(
            "{n} other file(s) not read (not *.json, *.json.gz)"
        ));
    }
    job.skipped = skipped;
    Ok(job)
}

/// An error's first line, at most 200 characters: what a skipped file's line says.
fn first_line(e: &str) -> String {
    e.lines().next().unwrap_or("").chars().take(200).collect()
}

/// A name as the report prints it: its control characters escaped (a name is whatever
/// the directory's owner made it).
pub(super) fn shown(name: &str) -> String {
    name.chars()
        .flat_map(|c| match c.is_control() {
            true => c.escape_default().collect::<Vec<_>>(),
            false => vec![c],
        })
        .collect()
}

/// The node of a trace: the first folder of its path below the one named.
fn host_of(file: &str) -> Option<String> {
    let (first, _) = file.split_once('/')?;
    Some(first.to_string())
}

/// The ranks of `traces` (file name, what it holds), put together.
pub(super) fn job(traces: Vec<(String, Ranks)>) -> Job {
    let mut known: BTreeMap<String, Vec<Rank>> = BTreeMap::new();
    let mut unknown = Vec::new();
    let mut notes = Vec::new();
    let mut used = Vec::new();
    for (file, t) in &traces {
        let mut pids: Vec<u64> = t.comms.keys().map(|(p, _)| *p).collect();
        for ((pid, _), seen) in &t.comms {
            let said = t.said.iter().find(|s| s.pid == *pid && s.id == seen.id);
            let r = rank_of(file, *pid, seen, said, t);
            match &seen.id {
                Some(id) => known.entry(id.clone()).or_default().push(r),
                None => unknown.push(r),
            }
        }
        // A process the daemon named without a collective row of its own in the trace.
        for s in &t.said {
            let has_rows = t.comms.keys().any(|(p, _)| *p == s.pid);
            if let (false, Some(id)) = (has_rows, &s.id) {
                let r = rank_of(file, s.pid, &Seen::default(), Some(s), t);
                known.entry(id.clone()).or_default().push(r);
                pids.push(s.pid);
            }
        }
        pids.extend(t.word.as_ref().and_then(|w| w.pid));
        pids.sort_unstable();
        pids.dedup();
        used.push(Trace {
            file: file.clone(),
            host: host_of(file),
            pids,
            collectives: t.comms.values().map(|s| s.calls.len()).sum(),
            trigger: t.word.as_ref().map(|w| w.kind),
            rank: t.distributed.0,
        });
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
    let mut groups = Groups::new(&known);
    let mut unaligned: Vec<Vec<Rank>> = Vec::new();
    let mut untried = 0;
    for mut r in unknown {
        let (fits, all_tried) = groups.fits(&r, &known, &unaligned);
        untried += u64::from(!all_tried);
        match fits.as_slice() {
            [(group, shift)] => {
                shift_by(&mut r, *shift);
                match group {
                    Target::Known(id) => {
                        let g = known.get_mut(id).expect("listed");
                        groups.joined(Target::Known(id.clone()), &r, g);
                        g.push(r);
                    }
                    Target::Unaligned(i) => {
                        groups.joined(Target::Unaligned(*i), &r, &unaligned[*i]);
                        unaligned[*i].push(r);
                    }
                }
            }
            [] => {
                groups.joined(Target::Unaligned(unaligned.len()), &r, &[]);
                unaligned.push(vec![r]);
            }
            many => {
                notes.push(format!(
                    "cannot align pid {} ({}): its {} collectives fit {} or more places (they repeat); \
                     a communicator id needs the capture to begin before ncclCommInitRank, or \
                     the daemon",
                    r.pid,
                    r.file,
                    r.calls.len(),
                    many.len()
                ));
                groups.joined(Target::Unaligned(unaligned.len()), &r, &[]);
                unaligned.push(vec![r]);
            }
        }
    }
    if untried > 0 {
        notes.push(format!(
            "{untried} rank(s) without a communicator id were compared with the first \
             {MAX_GROUPS_TRIED} communicators sharing their first collective only"
        ));
    }
    let without: Vec<&Trace> = used.iter().filter(|t| t.collectives == 0).collect();
    let mut communicators: Vec<Communicator> = known
        .into_iter()
        .map(|(comm, ranks)| verdict::communicator(Some(comm), None, merged(ranks), &without))
        .collect();
    for (i, ranks) in unaligned.into_iter().enumerate() {
        let c = verdict::communicator(None, Some(i as u64 + 1), ranks, &without);
        communicators.push(c);
    }
    Job {
        traces_count: used.len(),
        traces: used,
        skipped: Vec::new(),
        communicators_count: communicators.len(),
        communicators,
        notes,
    }
}

fn rank_of(file: &str, pid: u64, seen: &Seen, said: Option<&Said>, t: &Ranks) -> Rank {
    let last = seen.calls.iter().map(|c| c.0).max().unwrap_or(0);
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for (_, sig) in &seen.calls {
        let api = sig.what.split(' ').next().unwrap_or("");
        *counts
            .entry(api.trim_start_matches("nccl").into())
            .or_default() += 1;
    }
    let word = t.word.as_ref().filter(|w| w.pid == Some(pid));
    let stack = word.and_then(|w| w.stacks.as_ref()).and_then(Stack::of);
    Rank {
        rank: seen.rank.or(said.and_then(|s| s.rank)),
        host: host_of(file),
        pid,
        file: file.to_string(),
        nranks: seen.nranks.or(said.and_then(|s| s.nranks)),
        collectives: seen.calls.len(),
        collective_counts: counts,
        at: said.map_or(last, |s| s.seq),
        how: said.map_or("last_row", |s| s.how),
        api: said.and_then(|s| s.api.clone()),
        place: word.and_then(|w| w.place.clone()),
        stack,
        calls: seen.calls.clone(),
    }
}

/// A process in several traces (its hang trace and another's) is one rank: the
/// daemon's word first, then the furthest position.
fn merged(mut ranks: Vec<Rank>) -> Vec<Rank> {
    ranks.sort_by_key(|r| (r.pid, r.how == "last_row", std::cmp::Reverse(r.at)));
    ranks.dedup_by(|later, first| {
        let same = later.pid == first.pid;
        if same && first.stack.is_none() {
            first.stack = later.stack.take();
            first.place = first.place.take().or(later.place.take());
        }
        same
    });
    ranks.sort_by_key(|r| (r.rank, r.pid));
    ranks
}

#[cfg(test)]
mod tests;
