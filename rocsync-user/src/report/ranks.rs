//! One rank's collectives, as a trace rocsync wrote holds them: its NCCL/RCCL rows
//! (`cpu_op`, named as PyTorch's `record_param_comms` rows: `Seq`, `Comms Id`, `Rank`, …)
//! and what the daemon said of it (a hang or stall waiting in a collective, a rank
//! traced for being behind). Read as it streams by, as [`super::kineto`] reads.

use std::{collections::BTreeMap, io::BufRead};

use anyhow::{Result, bail};
use serde::{
    Deserialize, Deserializer as _,
    de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor},
};
use serde_json::Value;

use crate::input::Squeezed;

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

/// One trace's ranks: by (pid, communicator handle).
#[derive(Debug, Default)]
pub struct Ranks {
    pub comms: BTreeMap<(u64, String), Seen>,
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

#[derive(Default)]
struct Read {
    rows: Vec<Event>,
    rocsync: Option<Value>,
    has_events: bool,
}

impl<'de> Visitor<'de> for &mut Read {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a trace: an object with a traceEvents array")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "traceEvents" => {
                    self.has_events = true;
                    map.next_value_seed(Events(self))?;
                }
                "rocsync" => self.rocsync = Some(map.next_value()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

struct Events<'a>(&'a mut Read);

impl<'de> DeserializeSeed<'de> for Events<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Events<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a traceEvents array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        // Only the collectives are kept (a few per step); every other row passes by.
        while let Some(e) = seq.next_element::<Event>()? {
            if e.cat == "cpu_op" && e.args.contains_key("Seq") {
                self.0.rows.push(e);
            }
        }
        Ok(())
    }
}

pub fn read(input: impl BufRead) -> Result<Ranks> {
    let mut trace = Read::default();
    let mut de = serde_json::Deserializer::from_reader(Squeezed::new(input));
    de.deserialize_map(&mut trace)?;
    de.end()?;
    if !trace.has_events {
        bail!("it has no traceEvents array");
    }
    if !trace.rocsync.as_ref().is_some_and(Value::is_object) {
        bail!("it has no rocsync object: report reads traces rocsync wrote");
    }
    let mut ranks = Ranks::default();
    for e in &trace.rows {
        let a = &e.args;
        let (Some(pid), Some(comm), Some(seq)) = (
            e.pid.as_u64(),
            a.get("comm").and_then(Value::as_str),
            a.get("Seq").and_then(Value::as_u64),
        ) else {
            continue;
        };
        let seen = ranks.comms.entry((pid, comm.to_string())).or_default();
        seen.id = a.get("Comms Id").and_then(Value::as_str).map(String::from);
        seen.rank = a.get("Rank").and_then(Value::as_u64);
        seen.nranks = a.get("Group size").and_then(Value::as_u64);
        let field = |k: &str| a.get(k).map_or(String::new(), Value::to_string);
        let what = format!(
            "{} {} {}",
            e.name.as_str().unwrap_or("?"),
            field("dtype"),
            field("In msg nelems")
        );
        seen.calls.push((seq, what));
    }
    let parameters = trace.rocsync.as_ref().map(|r| &r["parameters"]);
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
        if let (Some(pid), Some(seq)) = (o["pid"].as_u64(), c["seq"].as_u64()) {
            ranks.said.push(Said {
                pid,
                seq,
                id: c["comm"].as_str().map(String::from),
                how: name,
                api: c["api"].as_str().map(String::from),
            });
        }
    }
    Ok(ranks)
}
