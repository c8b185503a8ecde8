//! One rank's collectives, as a trace rocsync wrote holds them: its NCCL/RCCL rows
//! (`cpu_op`, named as PyTorch's `record_param_comms` rows: `Seq`, `Comms Id`, `Rank`, …)
//! and what the daemon said of it (a hang or stall waiting in a collective, a rank
//! traced for being behind). Read as it streams by, as [`crate::read::report::load::kineto`] reads.

use std::{collections::BTreeMap, io::BufRead, mem::size_of, rc::Rc};

use anyhow::Result;
use serde::Deserialize;

use crate::read::report::{
    load::{
        fields::{Object, Scalar, api_name, hex},
        held::Held,
        stream,
    },
    word,
    word::Word,
};

/// A communicator of one process, as its rows show it.
#[derive(Clone, Debug, Default)]
pub(in crate::read::report) struct Seen {
    /// `Comms Id`: the same on every rank; `None` when set up before the capture.
    pub id: Option<String>,
    pub rank: Option<u64>,
    pub nranks: Option<u64>,
    /// Each collective: its number, and what it was.
    pub calls: Vec<(u64, Sig)>,
}

/// What a collective was, as ranks are aligned by: its name and type (held once for
/// every collective of them), and its size.
#[derive(Clone, Debug, PartialEq)]
pub(in crate::read::report) struct Sig {
    pub what: Rc<str>,
    pub size: Scalar,
}

/// A collective's number past this is no number a job reached (2^40: a million a
/// second for twelve days): its row is not used.
const MAX_SEQ: u64 = 1 << 40;

/// One trace's ranks: by (pid, communicator handle).
#[derive(Debug, Default)]
pub(in crate::read::report) struct Ranks {
    pub comms: BTreeMap<(u64, String), Seen>,
    /// Rows not used: with a field no rocsync trace writes.
    pub unused: u64,
    /// What was cut to the report's bounds, by reason.
    pub cut: BTreeMap<String, u64>,
    /// The daemon's word on a process of it, of its collective.
    pub said: Vec<Said>,
    /// The daemon's whole word (where the process was, its stacks).
    pub word: Option<Word>,
    /// The rank and world size its process said of itself (`distributedInfo`).
    pub distributed: (Option<u64>, Option<u64>),
}

/// What the daemon said of a process in a trace's parameters, of its collective.
#[derive(Clone, Debug)]
pub(in crate::read::report) struct Said {
    pub pid: u64,
    /// The collective's number it waits in (a hang or a stall), or is at (behind, stuck).
    pub seq: u64,
    pub id: Option<String>,
    /// `blocked`, `stalled`, `behind` or `stuck`.
    pub how: &'static str,
    /// The collective waited in (blocked, stalled).
    pub api: Option<String>,
    /// Its rank and the communicator's size, as the daemon read them.
    pub rank: Option<u64>,
    pub nranks: Option<u64>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct Event {
    cat: Scalar,
    name: Scalar,
    pid: Scalar,
    args: Object<Args>,
}

/// A collective row's fields, named as PyTorch's `record_param_comms` rows name them.
#[derive(Default, Deserialize)]
#[serde(default)]
struct Args {
    #[serde(rename = "Seq")]
    seq: Scalar,
    comm: Scalar,
    #[serde(rename = "Comms Id")]
    id: Scalar,
    #[serde(rename = "Rank")]
    rank: Scalar,
    #[serde(rename = "Group size")]
    nranks: Scalar,
    dtype: Scalar,
    #[serde(rename = "In msg nelems")]
    nelems: Scalar,
}

/// The daemon's word in a trace's `rocsync.parameters`.
#[derive(Default, Deserialize)]
#[serde(default)]
struct Rocsync {
    parameters: Object<word::Parameters>,
}

/// What the report keeps of a collective's row, and no more (a trace of millions).
struct Row {
    pid: u64,
    comm: String,
    seq: u64,
    id: Option<String>,
    rank: Option<u64>,
    nranks: Option<u64>,
    what: Sig,
}

/// What a collective row costs until the report is made: the row, its two handles, its
/// place in its rank's collectives and the job's copy of them (a size that is a string
/// costs its length besides).
const ROW_COST: usize = size_of::<Row>() + 2 * 32 + 2 * size_of::<(u64, Sig)>();

/// The row of `e`, a collective's: `None` for a field no rocsync trace writes; `Err`
/// past what the report holds.
fn row(e: &Event, a: &Args, held: &mut Held) -> Option<Result<Row, String>> {
    let seq = a.seq.as_u64().filter(|&s| s <= MAX_SEQ)?;
    let small = |v: &Scalar| v.as_u64().filter(|&n| n <= 1 << 32);
    let (pid, comm, api) = (e.pid.as_u64()?, hex(&a.comm)?, api_name(&e.name)?);
    // An array or object is no size rocsync writes.
    if a.nelems == Scalar::Other {
        return None;
    }
    let what = format!("{api} {}", a.dtype.json()?);
    let size = a.nelems.clone();
    let cost = ROW_COST + size.as_str().map_or(0, str::len);
    // Its name first: a row refused takes nothing of the budget.
    let kept = (held.name(&what)).and_then(|what| held.take(cost).map(|()| what));
    let kept = kept.map_err(|why| held.why(why, "collective rows"));
    Some(kept.map(|what| Row {
        pid,
        comm,
        seq,
        id: hex(&a.id),
        rank: small(&a.rank),
        nranks: small(&a.nranks),
        what: Sig { what, size },
    }))
}

/// Reads one trace's collectives, what they cost taken from `held` (shared by a job's
/// traces).
pub(in crate::read::report) fn read(input: impl BufRead, held: &mut Held) -> Result<Ranks> {
    // Only the collectives are kept (a few per step); every other row passes by.
    let (mut rows, mut unused) = (Vec::new(), 0);
    let mut cut: BTreeMap<String, u64> = BTreeMap::new();
    let trace: stream::Trace<Rocsync> = stream::read(input, |e: Event| {
        let Some(a) = e.args.0.as_ref().filter(|a| a.seq != Scalar::Absent) else {
            return;
        };
        if e.cat != "cpu_op" {
            return;
        }
        match row(&e, a, held) {
            Some(Ok(r)) => rows.push(r),
            Some(Err(why)) => *cut.entry(why).or_default() += 1,
            None => unused += 1,
        }
    })?;
    if trace.cut.strings > 0 {
        cut.insert(stream::cut_reason(), trace.cut.strings);
    }
    let mut ranks = Ranks {
        unused,
        cut,
        ..Ranks::default()
    };
    for r in rows {
        let seen = ranks.comms.entry((r.pid, r.comm)).or_default();
        seen.id = r.id;
        seen.rank = r.rank;
        seen.nranks = r.nranks;
        seen.calls.push((r.seq, r.what));
    }
    let small = |v: &Scalar| v.as_u64().filter(|&n| n <= 1 << 32);
    let d = &trace.distributed;
    ranks.distributed = (small(&d.rank), small(&d.world_size));
    let Some((w, cut)) = trace.rocsync.parameters.0.and_then(|p| p.word()) else {
        return Ok(ranks);
    };
    if cut > 0 {
        *ranks
            .cut
            .entry("stack frames, threads or steps past the report's bounds".into())
            .or_default() += cut;
    }
    let how = match w.kind {
        "hang" => "blocked",
        "stall" => "stalled",
        k => k,
    };
    let c = w.collective.as_ref().filter(|c| c.seq <= MAX_SEQ);
    match (w.pid, c) {
        (Some(pid), Some(c)) => ranks.said.push(Said {
            pid,
            seq: c.seq,
            id: c.comm.clone(),
            how,
            api: c.api.clone(),
            rank: c.rank,
            nranks: c.nranks,
        }),
        // A hang or stall not in a collective: where it is, without a number.
        (Some(_), None) if how == "blocked" || how == "stalled" => {}
        _ => ranks.unused += 1,
    }
    ranks.word = Some(w);
    Ok(ranks)
}
