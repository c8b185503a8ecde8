//! Which local rank is behind: the communicators the probes keep of every tracked
//! process (`CommState`: its id, the same on every rank, and its last collective's
//! number), compared with the collective a blocked call waits on.

use rocsync_common::CommState;
use serde_json::{Value, json};

/// The tracked processes (`tracked`: the caller admits only the waiter's own user's, as
/// anyone can forge a communicator id) in the communicator of `collective` (a chain's
/// [`super::chain::collective`]) whose last collective is older than it but not none:
/// `[{pid, rank, seq, comm}]`, the furthest behind first, at most the communicator's other
/// ranks. None when the communicator's id is unknown.
pub fn behind(
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
pub fn said_behind(behind: &[Value]) -> Option<String> {
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

/// The last collective each local rank entered, for `/metrics`: (comm id, rank, pid,
/// seq) of the communicators whose id is known, of tracked processes.
pub fn sequences(
    comms: &[(u32, u64, CommState)],
    tracked: impl Fn(u32) -> bool,
) -> Vec<(String, String, u32, u64)> {
    let mut out: Vec<_> = comms
        .iter()
        .filter(|(pid, _, c)| c.id != 0 && tracked(*pid))
        .map(|(pid, _, c)| {
            let rank = if c.rank == u32::MAX {
                "unknown".to_string()
            } else {
                c.rank.to_string()
            };
            (format!("{:#x}", c.id), rank, *pid, c.seq)
        })
        .collect();
    out.sort();
    out
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
        let seqs = sequences(&comms, |pid| pid != 14);
        assert_eq!(seqs[0], ("0xabc".into(), "0".into(), 10, 21));
        assert_eq!(seqs.len(), 4);
    }
}
