//! One rank's collectives, as a trace rocsync wrote holds them: its NCCL/RCCL rows
//! (`cpu_op`, named as PyTorch's `record_param_comms` rows: `Seq`, `Comms Id`, `Rank`, …)
//! and what the daemon said of it (a hang or stall waiting in a collective, a rank
//! traced for being behind). Read as it streams by, as [`super::kineto`] reads.

use std::{collections::BTreeMap, io::BufRead};

use anyhow::Result;
use serde::Deserialize;
use serde_json::Value;

use super::stream;

/// A communicator of one process, as its rows show it.
#[derive(Clone, Debug, Default)]
pub struct Seen {
    /// `Comms Id`: the same on every rank; `None` when set up before the capture.
    pub id: Option<String>,
    pub rank: Option<u64>,
    pub nranks: Option<u64>,
    /// Each collective: (its number, what it was: name, type and size).
    pub calls: Vec<(u64, String)>,
}

/// Collective rows one trace may hold for the report: past them it says so.
const MAX_ROWS: usize = 1 << 20;
/// A collective's number past this is no number a job reached (2^40: a million a
/// second for twelve days): its row is not used.
const MAX_SEQ: u64 = 1 << 40;

/// One trace's ranks: by (pid, communicator handle).
#[derive(Debug, Default)]
pub struct Ranks {
    pub comms: BTreeMap<(u64, String), Seen>,
    /// Rows not used: past [`MAX_ROWS`], or with a field no rocsync trace writes.
    pub unused: u64,
    /// The daemon's word on a process of it.
    pub said: Vec<Said>,
}

/// What the daemon said of a process in a trace's parameters.
#[derive(Clone, Debug)]
pub struct Said {
    pub pid: u64,
    /// The collective's number it waits in (a hang or a stall), or is at (behind).
    pub seq: u64,
    pub id: Option<String>,
    /// `blocked`, `stalled` or `behind`.
    pub how: &'static str,
    /// The collective waited in (blocked, stalled).
    pub api: Option<String>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct Event {
    cat: Value,
    name: Value,
    pid: Value,
    args: BTreeMap<String, Value>,
}

/// What the report keeps of a collective's row, and no more (a trace of millions).
struct Row {
    pid: u64,
    comm: String,
    seq: u64,
    id: Option<String>,
    rank: Option<u64>,
    nranks: Option<u64>,
    what: String,
}

/// A handle or an id as rocsync writes it: `0x` and at most 16 hex digits.
pub fn hex(v: Option<&Value>) -> Option<String> {
    let s = v?.as_str()?;
    let digits = s.strip_prefix("0x")?;
    let ok = !digits.is_empty() && digits.len() <= 16;
    (ok && digits.bytes().all(|b| b.is_ascii_hexdigit())).then(|| s.to_string())
}

/// A known API's name, as the trace may claim it.
pub fn api_name(v: &Value) -> Option<String> {
    let name = v.as_str()?;
    rocsync_common::Api::ALL
        .iter()
        .find(|a| a.symbol() == name)
        .map(|a| a.symbol().to_string())
}

impl Row {
    fn of(e: &Event) -> Option<Row> {
        let a = &e.args;
        let seq = a
            .get("Seq")
            .and_then(Value::as_u64)
            .filter(|&s| s <= MAX_SEQ)?;
        let small = |k: &str| a.get(k).and_then(Value::as_u64).filter(|&n| n <= 1 << 32);
        let field = |k: &str| a.get(k).map_or(String::new(), Value::to_string);
        Some(Row {
            pid: e.pid.as_u64()?,
            comm: hex(a.get("comm"))?,
            seq,
            id: hex(a.get("Comms Id")),
            rank: small("Rank"),
            nranks: small("Group size"),
            what: format!(
                "{} {} {}",
                api_name(&e.name)?,
                field("dtype"),
                field("In msg nelems")
            ),
        })
    }
}

pub fn read(input: impl BufRead) -> Result<Ranks> {
    // Only the collectives are kept (a few per step); every other row passes by.
    let (mut rows, mut unused) = (Vec::new(), 0);
    let rocsync = stream::read(input, |e: Event| {
        if e.cat != "cpu_op" || !e.args.contains_key("Seq") {
            return;
        }
        match Row::of(&e) {
            Some(r) if rows.len() < MAX_ROWS => rows.push(r),
            _ => unused += 1,
        }
    })?;
    let mut ranks = Ranks {
        unused,
        ..Ranks::default()
    };
    for r in rows {
        let seen = ranks.comms.entry((r.pid, r.comm)).or_default();
        seen.id = r.id;
        seen.rank = r.rank;
        seen.nranks = r.nranks;
        seen.calls.push((r.seq, r.what));
    }
    let parameters = Some(&rocsync["parameters"]);
    for (kind, name) in [
        ("hang", "blocked"),
        ("stall", "stalled"),
        ("behind", "behind"),
    ] {
        let Some(o) = parameters.map(|p| &p[kind]).filter(|o| o.is_object()) else {
            continue;
        };
        let c = if kind == "behind" {
            o
        } else {
            &o["collective"]
        };
        let seq = c["seq"].as_u64().filter(|&s| s <= MAX_SEQ);
        if let (Some(pid), Some(seq)) = (o["pid"].as_u64(), seq) {
            ranks.said.push(Said {
                pid,
                seq,
                id: hex(c.get("comm")),
                how: name,
                api: c.get("api").and_then(api_name),
            });
        } else {
            ranks.unused += 1;
        }
    }
    Ok(ranks)
}
