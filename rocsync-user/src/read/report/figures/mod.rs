//! The report's figures, computed from a [`Capture`]: plain values, printed as text or
//! serialised as the `--json` document.

pub(super) mod collectives;
pub(super) mod losses;
pub(super) mod packets;

use std::collections::BTreeMap;

use serde::Serialize;

use super::{
    capture::{Capture, Observed, us, waits_on_event},
    word::Word,
};
use crate::read::report::figures::{
    collectives::NcclFigures, losses::Lost, packets::PacketFigures,
};

/// How many of the longest waits are listed.
pub(super) const LONGEST: usize = 10;

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Figures {
    /// What the trace lost (counters above zero, a trace ended early, calls not
    /// recorded), each with the figures it touches.
    pub lost: Vec<Lost>,
    /// The daemon's word, for a trace it took unasked (a hang, stall, rank behind).
    pub trigger: Option<Word>,
    pub calls: u64,
    pub per_api: Vec<ApiFigures>,
    pub longest_waits: Vec<Wait>,
    pub dependencies: Vec<Dependency>,
    /// Waits on an event that name no producer, by reason.
    pub unresolved: BTreeMap<String, u64>,
    /// NCCL/RCCL calls: per communicator, and the others.
    pub collectives: NcclFigures,
    /// HSA packets.
    pub packets: PacketFigures,
    /// Every drop counter the file carries.
    pub losses: BTreeMap<String, u64>,
    /// What the report read but could not use, by reason.
    pub unusable: BTreeMap<String, u64>,
    /// Events of the trace the report does not use, by kind.
    pub not_used: BTreeMap<String, u64>,
    /// What the report cut to its bounds, by reason.
    pub cut: BTreeMap<String, u64>,
}

/// A stream: its handle, and its number on its device as Perfetto shows its track
/// (`stream 2`), where the trace gives one.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Stream {
    pub handle: String,
    pub index: Option<i64>,
}

impl Stream {
    fn of(handle: u64, index: Option<i64>) -> Stream {
        Stream {
            handle: format!("{handle:#x}"),
            index,
        }
    }
}

/// Who waits: a stream (a stream wait event) or a thread (an event's synchronize or
/// query).
#[derive(Clone, Debug, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Waiter {
    Stream { handle: String, index: Option<i64> },
    Thread { tid: u32, name: Option<String> },
}

/// Calls of one API on one device (none for calls that are not synchronisations).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ApiFigures {
    pub api: String,
    pub device: Option<i32>,
    pub calls: u64,
    /// Time blocked in the call, µs: nearest-rank percentiles.
    pub blocked_p50_us: f64,
    pub blocked_p99_us: f64,
    pub blocked_max_us: f64,
    pub blocked_total_us: f64,
}

/// A synchronisation and what it waited for.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Wait {
    pub api: String,
    pub kind: String,
    pub correlation: u64,
    pub pid: u32,
    pub tid: u32,
    pub device: Option<i32>,
    /// The thread's name, where the trace has one.
    pub thread_name: Option<String>,
    /// The waiting (or synchronised) stream, if the call names one.
    pub stream: Option<Stream>,
    /// When it started, µs since the first call.
    pub at_us: f64,
    pub blocked_us: f64,
    pub producer: Option<Producer>,
    pub unresolved: Option<String>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Producer {
    pub correlation: u64,
    pub stream: Stream,
    pub tid: u32,
    /// From the middle of the record call to the start of the wait.
    pub since_record_us: f64,
}

/// Waits by one waiter on records of one stream.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Dependency {
    pub waiter: Waiter,
    /// The recording stream.
    pub producer: Stream,
    pub pid: u32,
    pub waits: u64,
    pub blocked_total_us: f64,
    pub blocked_max_us: f64,
}

impl Figures {
    pub fn of(c: &Capture) -> Figures {
        let syncs: Vec<&Observed> = c.calls.iter().filter(|o| o.sync.is_some()).collect();
        let mut longest = syncs.clone();
        // Longest first; equal ones in call order, so the list is the same every time.
        longest.sort_by_key(|o| (std::cmp::Reverse(o.blocked_ns), o.correlation));
        Figures {
            lost: losses::lost(&c.losses, &c.lost_besides),
            trigger: c.word.clone(),
            calls: c.calls.len() as u64,
            per_api: per_api(&c.calls),
            longest_waits: (longest.into_iter().take(LONGEST))
                .map(|o| wait(o, c))
                .collect(),
            dependencies: dependencies(&syncs, c),
            unresolved: syncs.iter().filter_map(|o| o.unresolved.as_deref()).fold(
                BTreeMap::new(),
                |mut m, r| {
                    *m.entry(r.to_string()).or_default() += 1;
                    m
                },
            ),
            collectives: NcclFigures::of(c),
            packets: PacketFigures::of(&c.packets),
            losses: c.losses.clone(),
            unusable: c.unusable.clone(),
            not_used: c.not_used.clone(),
            cut: c.cut.clone(),
        }
    }
}

/// Nearest-rank percentile of sorted values.
pub(super) fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn per_api(calls: &[Observed]) -> Vec<ApiFigures> {
    let mut groups: BTreeMap<(&str, Option<i32>), Vec<i64>> = BTreeMap::new();
    for o in calls {
        groups
            .entry((&*o.api, o.device))
            .or_default()
            .push(o.blocked_ns);
    }
    groups
        .into_iter()
        .map(|((api, device), mut t)| {
            t.sort_unstable();
            ApiFigures {
                api: api.to_string(),
                device,
                calls: t.len() as u64,
                blocked_p50_us: us(percentile(&t, 50.0)),
                blocked_p99_us: us(percentile(&t, 99.0)),
                blocked_max_us: us(*t.last().unwrap_or(&0)),
                blocked_total_us: us(t.iter().sum()),
            }
        })
        .collect()
}

fn thread_name(c: &Capture, pid: u32, tid: u32) -> Option<String> {
    c.thread_names.get(&(pid, tid)).map(|n| n.to_string())
}

fn wait(o: &Observed, c: &Capture) -> Wait {
    Wait {
        api: o.api.to_string(),
        kind: o.sync.as_deref().unwrap_or_default().to_string(),
        correlation: o.correlation,
        pid: o.pid,
        tid: o.tid,
        device: o.device,
        thread_name: thread_name(c, o.pid, o.tid),
        stream: o.stream.map(|s| Stream::of(s, o.stream_index)),
        at_us: us(o.start_ns),
        blocked_us: us(o.blocked_ns),
        producer: o.producer.map(|p| Producer {
            correlation: p.correlation,
            stream: Stream::of(p.stream, p.stream_index),
            tid: p.tid,
            since_record_us: us(o.start_ns - p.record_ns),
        }),
        unresolved: o.unresolved.as_deref().map(String::from),
    }
}

/// Who waits on whom: resolved waits on an event, by (process, waiter, recording stream).
pub(super) fn dependencies(syncs: &[&Observed], c: &Capture) -> Vec<Dependency> {
    type Key = (u32, Waiter, (u64, Option<i64>));
    let mut m: BTreeMap<Key, (u64, i64, i64)> = BTreeMap::new();
    for o in syncs {
        let (Some(kind), Some(p)) = (&o.sync, o.producer) else {
            continue;
        };
        if !waits_on_event(kind) {
            continue;
        }
        let waiter = match (&**kind, o.stream) {
            ("Stream Wait Event", Some(s)) => Waiter::Stream {
                handle: format!("{s:#x}"),
                index: o.stream_index,
            },
            _ => Waiter::Thread {
                tid: o.tid,
                name: thread_name(c, o.pid, o.tid),
            },
        };
        let e = (m.entry((o.pid, waiter, (p.stream, p.stream_index)))).or_default();
        e.0 += 1;
        e.1 += o.blocked_ns;
        e.2 = e.2.max(o.blocked_ns);
    }
    m.into_iter()
        .map(|((pid, waiter, (s, i)), (n, total, max))| Dependency {
            waiter,
            producer: Stream::of(s, i),
            pid,
            waits: n,
            blocked_total_us: us(total),
            blocked_max_us: us(max),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<i64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 50);
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&[7], 99.0), 7);
        assert_eq!(percentile(&[], 50.0), 0);
        assert_eq!(percentile(&[1, 2, 3], 50.0), 2);
    }
}
