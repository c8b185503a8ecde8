//! Which local rank is behind: the communicators the probes keep of every tracked
//! process (`CommState`: its id, the same on every rank, and its last collective's
//! number), compared with the collective a blocked call waits on.

use std::collections::{HashMap, HashSet};

use rocsync_common::CommState;
use serde_json::{Value, json};

/// Whose a process is, as communicators are joined by: its user and its cgroup (a pod's
/// containers, a systemd unit, a batch job's step). A communicator's id is public (in
/// `/metrics`) and its unique id is bytes any process may pass, so another user's, or
/// another pod's, process claiming a job's id counts in it for nothing.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Owner {
    pub uid: u32,
    pub cgroup: String,
}

/// `pid`'s [`Owner`]; `None` when it has gone.
pub(crate) fn owner(pid: u32) -> Option<Owner> {
    Some(Owner {
        uid: crate::os::procfs::uid(pid)?,
        cgroup: crate::os::procfs::cgroup(pid)?,
    })
}

/// The tracked processes (`tracked`: the caller admits only the waiter's own [`Owner`]'s,
/// as anyone can claim a communicator id) in the communicator of `collective` (a chain's
/// [`super::chain::collective`]) whose last collective is older than it but not none:
/// `[{pid, rank, seq, comm}]`, the furthest behind first, at most the communicator's other
/// ranks. None when the communicator's id is unknown.
pub(crate) fn behind(
    collective: &Value,
    comms: &[(u32, u64, CommState)],
    tracked: impl Fn(u32) -> bool,
) -> Vec<Value> {
    let (Some(id), Some(seq)) = (
        collective["comm"].as_str().and_then(parse_hex),
        collective["seq"].as_u64(),
    ) else {
        return Vec::new();
    };
    let mut late: Vec<_> = comms
        .iter()
        .filter(|(pid, _, c)| c.id == id && c.seq > 0 && c.seq < seq && tracked(*pid))
        .collect();
    late.sort_by_key(|(pid, _, c)| (c.seq, *pid));
    let others = collective["nranks"]
        .as_u64()
        .map_or(usize::MAX, |n| n.saturating_sub(1) as usize);
    late.iter()
        .take(others)
        .map(|(pid, _, c)| {
            let rank = (c.rank != u32::MAX).then_some(c.rank);
            json!({"pid": pid, "rank": rank, "seq": c.seq, "comm": format!("{id:#x}")})
        })
        .collect()
}

/// `; rank 1 (pid Q) is at #20` for the log, the furthest behind first.
pub(crate) fn said_behind(behind: &[Value]) -> Option<String> {
    let parts: Vec<String> = behind
        .iter()
        .map(|b| {
            let rank = b["rank"]
                .as_u64()
                .map_or("rank ?".into(), |r| format!("rank {r}"));
            format!("{rank} (pid {}) is at #{}", b["pid"], b["seq"])
        })
        .collect();
    (!parts.is_empty()).then(|| format!("; {}", parts.join(", ")))
}

/// Series of `rocsync_collective_seq` one user's processes may have: a job of 8 ranks
/// with a few tens of communicators each is far below it, and a user making
/// communicators without end (8 071 series from one, in 608 KB of `/metrics`) is held
/// to it.
pub(crate) const SERIES_PER_USER: usize = 256;

/// One `rocsync_collective_seq` series: (comm id, rank, pid, seq).
pub(crate) type Series = (String, String, u32, u64);

/// The last collective each local rank entered, for `/metrics`: (comm id, rank, pid,
/// seq) of the communicators whose id is known, of tracked processes (`uid`: the user
/// of a tracked process, `None` for the others), at most [`SERIES_PER_USER`] of each
/// user's (the lowest pids' first: a user's new processes do not push its older ones
/// out); and those left out, by (pid, handle).
pub(crate) fn sequences(
    comms: &[(u32, u64, CommState)],
    uid: impl Fn(u32) -> Option<u32>,
) -> (Vec<Series>, Vec<(u32, u64)>) {
    let mut known: Vec<_> = comms.iter().filter(|(_, _, c)| c.id != 0).collect();
    known.sort_by_key(|(pid, handle, _)| (*pid, *handle));
    let mut uids: HashMap<u32, Option<u32>> = HashMap::new();
    let mut shown: HashMap<u32, usize> = HashMap::new();
    let (mut out, mut left_out) = (Vec::new(), Vec::new());
    for (pid, handle, c) in known {
        let Some(user) = *uids.entry(*pid).or_insert_with(|| uid(*pid)) else {
            continue;
        };
        let n = shown.entry(user).or_default();
        if *n >= SERIES_PER_USER {
            left_out.push((*pid, *handle));
            continue;
        }
        *n += 1;
        let rank = if c.rank == u32::MAX {
            "unknown".to_string()
        } else {
            c.rank.to_string()
        };
        out.push((format!("{:#x}", c.id), rank, *pid, c.seq));
    }
    out.sort();
    (out, left_out)
}

/// Series of `rocsync_collective_seq` left out for their user's share
/// ([`SERIES_PER_USER`]), each counted once while it stays out.
#[derive(Debug, Default)]
pub(crate) struct LeftOut {
    out: HashSet<(u32, u64)>,
    pub total: u64,
}

impl LeftOut {
    /// A scrape left these (pid, handle) out.
    pub(crate) fn saw(&mut self, now: Vec<(u32, u64)>) {
        let now: HashSet<(u32, u64)> = now.into_iter().collect();
        self.total += now.difference(&self.out).count() as u64;
        self.out = now;
    }
}

fn parse_hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.strip_prefix("0x")?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comm(id: u64, rank: u32, seq: u64) -> CommState {
        CommState {
            id,
            seq,
            rank,
            nranks: 3,
            ..CommState::default()
        }
    }

    #[test]
    fn the_ranks_of_the_same_communicator_with_an_older_collective_are_behind() {
        let comms = [
            (10, 0x1, comm(0xabc, 0, 21)),
            (11, 0x2, comm(0xabc, 1, 20)),
            (12, 0x3, comm(0xabc, 2, 19)),
            (13, 0x4, comm(0xdef, 0, 1)), // another communicator
            (14, 0x5, comm(0xabc, 2, 2)), // not tracked
        ];
        let c = json!({"api": "ncclAllReduce", "seq": 21, "comm": "0xabc"});
        let b = behind(&c, &comms, |pid| pid != 14);
        // A communicator of 2 names one rank behind at most; one that entered no
        // collective (seq 0: a forged or idle set-up) is none.
        let two = json!({"api": "ncclAllReduce", "seq": 21, "comm": "0xabc", "nranks": 2});
        assert_eq!(behind(&two, &comms, |pid| pid != 14).len(), 1);
        let idle = [(15, 0x6, comm(0xabc, 1, 0))];
        assert!(behind(&c, &idle, |_| true).is_empty());
        let got: Vec<(u64, u64)> = b
            .iter()
            .map(|v| (v["pid"].as_u64().unwrap(), v["seq"].as_u64().unwrap()))
            .collect();
        assert_eq!(got, [(12, 19), (11, 20)]);
        assert_eq!(
            said_behind(&b).unwrap(),
            "; rank 2 (pid 12) is at #19, rank 1 (pid 11) is at #20"
        );
        // Unknown id: nobody is named.
        assert!(behind(&json!({"seq": 21, "comm": null}), &comms, |_| true).is_empty());
        let (seqs, left_out) = sequences(&comms, |pid| (pid != 14).then_some(0));
        assert_eq!(seqs[0], ("0xabc".into(), "0".into(), 10, 21));
        assert_eq!(seqs.len(), 4);
        assert!(left_out.is_empty());
    }

    /// One user's communicators without end fill its share of the series, not another
    /// user's: the rest are left out, and named.
    #[test]
    fn a_user_gets_its_share_of_the_series_and_the_rest_is_left_out() {
        let mut comms: Vec<(u32, u64, CommState)> = (0..1000u64)
            .map(|i| (1000 + (i / 64) as u32, i, comm(0x100 + i, 0, 1)))
            .collect();
        comms.push((5000, 7, comm(0xabc, 0, 3)));
        // Pids 1000… are uid 65534's, pid 5000 root's.
        let uid = |pid: u32| Some(if pid == 5000 { 0 } else { 65534 });
        let (seqs, left_out) = sequences(&comms, uid);
        assert_eq!(seqs.len(), SERIES_PER_USER + 1);
        assert!(seqs.contains(&("0xabc".into(), "0".into(), 5000, 3)));
        assert_eq!(left_out.len(), 1000 - SERIES_PER_USER);
        // The lowest pids' are shown.
        assert!(left_out.iter().all(|(pid, _)| *pid >= 1000 + 3));
        // Counted once while they stay out; one more left out next time, one more.
        let mut counted = LeftOut::default();
        counted.saw(left_out.clone());
        counted.saw(left_out.clone());
        assert_eq!(counted.total, (1000 - SERIES_PER_USER) as u64);
        let mut more = left_out;
        more.push((1, 1));
        counted.saw(more);
        assert_eq!(counted.total, (1000 - SERIES_PER_USER + 1) as u64);
    }
}
