//! NCCL/RCCL calls in one trace: per communicator of each process, its collectives (how
//! many, by operation, the range of their numbers) and the time its threads were blocked
//! waiting for them — a synchronisation whose stream's last enqueued work (as far as the
//! probes see) was one of its collectives; and the other calls (set-up, destroy, group).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::read::report::capture::{Capture, Observed, us, waits_on_event};

/// A communicator of one process.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CommFigures {
    pub pid: u32,
    /// Its handle in the process.
    pub comm: String,
    /// Its id, the same on every rank (NCCL RAS's `hash`); `None` when set up before
    /// the capture.
    pub hash: Option<String>,
    pub rank: Option<u64>,
    pub size: Option<u64>,
    pub collectives: u64,
    pub first_seq: Option<u64>,
    pub last_seq: Option<u64>,
    /// By operation, named as NCCL RAS names them (`AllReduce`).
    pub collective_counts: BTreeMap<String, u64>,
    /// Synchronisations that waited for its collectives, and their time blocked.
    pub waits_after: u64,
    pub blocked_after_total_us: f64,
    pub blocked_after_max_us: f64,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct NcclFigures {
    pub communicators: Vec<CommFigures>,
    /// NCCL/RCCL calls that are not collectives (set-up, destroy, group), by API.
    pub other_calls: BTreeMap<String, u64>,
}

type Key = (u32, u64);

impl NcclFigures {
    pub fn of(c: &Capture) -> NcclFigures {
        let mut f = NcclFigures::default();
        let mut comms: BTreeMap<Key, CommFigures> = BTreeMap::new();
        // Each stream's collectives in time, with their communicator: (pid, stream).
        let mut on_stream: BTreeMap<(u32, u64), Vec<(i64, Key)>> = BTreeMap::new();
        let mut of_pid: BTreeMap<u32, Vec<(i64, Key)>> = BTreeMap::new();
        for n in &c.nccl {
            let (Some(seq), Some(handle)) = (n.seq, n.comm) else {
                *f.other_calls.entry(n.api.to_string()).or_default() += 1;
                continue;
            };
            let key = (n.pid, handle);
            let e = comms.entry(key).or_insert_with(|| CommFigures {
                pid: n.pid,
                comm: format!("{handle:#x}"),
                hash: None,
                rank: None,
                size: None,
                collectives: 0,
                first_seq: None,
                last_seq: None,
                collective_counts: BTreeMap::new(),
                waits_after: 0,
                blocked_after_total_us: 0.0,
                blocked_after_max_us: 0.0,
            });
            e.hash = e.hash.take().or(n.id.map(|i| format!("{i:#x}")));
            e.rank = e.rank.or(n.rank);
            e.size = e.size.or(n.nranks);
            e.collectives += 1;
            e.first_seq = Some(e.first_seq.map_or(seq, |s| s.min(seq)));
            e.last_seq = Some(e.last_seq.map_or(seq, |s| s.max(seq)));
            let op = n.api.trim_start_matches("nccl").to_string();
            *e.collective_counts.entry(op).or_default() += 1;
            if let Some(s) = n.stream {
                on_stream
                    .entry((n.pid, s))
                    .or_default()
                    .push((n.start_ns, key));
            }
            of_pid.entry(n.pid).or_default().push((n.start_ns, key));
        }
        for v in on_stream.values_mut().chain(of_pid.values_mut()) {
            v.sort_unstable();
        }
        let mut blocked: BTreeMap<Key, (u64, i64, i64)> = BTreeMap::new();
        // A query polls and returns at once: no wait, though CUPTI's rows (and ours)
        // call `cudaEventQuery` an "Event Sync".
        let waits = (c.calls.iter()).filter(|o| o.sync.is_some() && !o.api.ends_with("Query"));
        for o in waits {
            if let Some(key) = waited_for(o, &on_stream, &of_pid) {
                let b = blocked.entry(key).or_default();
                b.0 += 1;
                b.1 += o.blocked_ns;
                b.2 = b.2.max(o.blocked_ns);
            }
        }
        for (key, (n, total, max)) in blocked {
            if let Some(e) = comms.get_mut(&key) {
                (
                    e.waits_after,
                    e.blocked_after_total_us,
                    e.blocked_after_max_us,
                ) = (n, us(total), us(max));
            }
        }
        f.communicators = comms.into_values().collect();
        f
    }
}

/// The collective before `t` in `v` (sorted by time), if one.
fn last_before(v: Option<&Vec<(i64, Key)>>, t: i64) -> Option<Key> {
    let v = v?;
    let i = v.partition_point(|(at, _)| *at <= t);
    i.checked_sub(1).map(|i| v[i].1)
}

/// The communicator whose collective the synchronisation `o` waited for: the last one
/// enqueued on the stream it waits on (a stream's synchronize: its own; a wait on an
/// event: the recording stream, before the record), or on any stream of its process (a
/// device's synchronize).
fn waited_for(
    o: &Observed,
    on_stream: &BTreeMap<(u32, u64), Vec<(i64, Key)>>,
    of_pid: &BTreeMap<u32, Vec<(i64, Key)>>,
) -> Option<Key> {
    let kind = o.sync.as_deref()?;
    match kind {
        "Stream Sync" => last_before(on_stream.get(&(o.pid, o.stream?)), o.start_ns),
        "Context Sync" => last_before(of_pid.get(&o.pid), o.start_ns),
        k if waits_on_event(k) => {
            let p = o.producer?;
            last_before(on_stream.get(&(o.pid, p.stream)), p.record_ns)
        }
        _ => None,
    }
}
