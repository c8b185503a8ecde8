//! NCCL/RCCL rows: one per call, its arguments named as PyTorch's `record_param_comms`
//! rows name them (`Collective name`, `dtype`, `In msg nelems`, `Group size`, `Rank`,
//! `Seq`, `Comms Id`, …), so that Kineto, HTA and Chakra users read them as theirs. A
//! collective has no return probe: its row is an instant (dur 0) at its entry.

use std::{collections::HashMap, io, io::Write};

use rocsync_common::{Api, Op};

use super::KinetoWriter;
use crate::calls::{ingest::Call, resolve::Row};

/// What a trace knows of a communicator: from its set-up call, or from the probes'
/// state when it was set up before the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Comm {
    /// The id every rank derives alike; 0: unknown.
    pub id: u64,
    pub rank: Option<u32>,
    pub nranks: Option<u32>,
}

/// Communicators by (pid, handle).
#[derive(Debug, Default)]
pub(crate) struct Comms(HashMap<(u32, u64), Comm>);

impl Comms {
    pub(crate) fn insert(&mut self, pid: u32, handle: u64, comm: Comm) {
        self.0.insert((pid, handle), comm);
    }

    pub(crate) fn get(&self, pid: u32, handle: u64) -> Option<&Comm> {
        self.0.get(&(pid, handle))
    }

    /// The communicators, for the trace's `distributedInfo`: `[{comm, pid, rank,
    /// nranks}]`, `comm` null when its id is unknown.
    pub(crate) fn listed(&self) -> Vec<serde_json::Value> {
        self.0
            .iter()
            .map(|((pid, _), c)| {
                let id = (c.id != 0).then(|| format!("{:#x}", c.id));
                serde_json::json!({"comm": id, "pid": pid, "rank": c.rank, "nranks": c.nranks})
            })
            .collect()
    }

    /// Learns a communicator from its set-up call, once it returned with its handle.
    pub(crate) fn learn(&mut self, c: &Call) {
        if let Some(comm) = joined(c).filter(|_| c.ok()) {
            self.insert(c.pid, c.args[0], comm);
        }
    }
}

/// The communicator a set-up call makes (or, failed or in flight, tried to make).
fn joined(c: &Call) -> Option<Comm> {
    Some(match c.api.op() {
        Op::CommInitRank => {
            let (rank, nranks) = ranks((c.args[2] >> 32) as u32, c.args[2] as u32);
            Comm {
                id: c.args[1],
                rank,
                nranks,
            }
        }
        // Its rank and size are decided inside the library.
        Op::CommSplit => Comm {
            id: c.args[1],
            rank: None,
            nranks: None,
        },
        Op::CommInitAll => Comm {
            id: 0,
            rank: Some(0),
            nranks: Some(c.args[1] as u32),
        },
        _ => return None,
    })
}

/// A rank and a size as the call gave them, when they make sense (garbage is unknown).
pub(crate) fn ranks(rank: u32, nranks: u32) -> (Option<u32>, Option<u32>) {
    match nranks > 0 && nranks <= rocsync_common::MAX_RANKS && rank < nranks {
        true => (Some(rank), Some(nranks)),
        false => (None, None),
    }
}

/// PyTorch's name of the collective (`Collective name`).
pub(crate) fn collective_name(api: Api) -> &'static str {
    match api {
        Api::NcclAllReduce => "allreduce",
        Api::NcclBroadcast => "broadcast",
        Api::NcclReduce => "reduce",
        Api::NcclAllGather => "allgather",
        Api::NcclReduceScatter => "reduce_scatter",
        Api::NcclAllToAll | Api::NcclAlltoAll => "all_to_all",
        Api::NcclSend => "send",
        Api::NcclRecv => "recv",
        _ => "",
    }
}

/// `ncclDataType_t` as PyTorch names the scalar type (`dtype`).
pub(crate) fn dtype_name(t: u8) -> &'static str {
    const NAMES: [&str; 12] = [
        "Char",
        "Byte",
        "Int",
        "UInt32",
        "Long",
        "UInt64",
        "Half",
        "Float",
        "Double",
        "BFloat16",
        "Float8_e4m3fn",
        "Float8_e5m2",
    ];
    NAMES.get(t as usize).copied().unwrap_or("unknown")
}

impl<W: Write> KinetoWriter<W> {
    /// Writes one NCCL call's row.
    pub(super) fn nccl_row(&mut self, r: &Row) -> io::Result<()> {
        let c = &r.call;
        self.comms.learn(c);
        self.threads.insert((c.pid, c.tid));
        let end = c.exit_ns.unwrap_or(self.last_ns).max(c.enter_ns);
        self.last_ns = self.last_ns.max(end);
        let dur = i64::try_from(end - c.enter_ns).unwrap_or(i64::MAX);
        let ts = self.ts(c.enter_ns);
        // A set-up that failed or is still in flight (a rank waiting for the others in
        // its bootstrap) names the communicator it was joining.
        let comm = (self.comms.get(c.pid, c.args[0]).copied()).or_else(|| joined(c));
        let j = self.slice(
            "cpu_op",
            c.api.symbol(),
            c.pid as i64,
            c.tid as i64,
            ts,
            dur,
        );
        j.s("\"correlation\":").u(c.correlation);
        let op = c.api.op();
        if let Some(n) = c.numbered() {
            let count = c.args[2];
            let nranks = comm.and_then(|m| m.nranks).map(u64::from);
            let times = |n: Option<u64>| n.map(|k| count.saturating_mul(k));
            let (inn, out) = match c.api {
                Api::NcclAllGather => (Some(count), times(nranks)),
                Api::NcclReduceScatter => (times(nranks), Some(count)),
                _ => (Some(count), Some(count)),
            };
            j.s(",\"Collective name\":\"")
                .s(collective_name(c.api))
                .s("\",\"dtype\":\"")
                .s(dtype_name(n.datatype))
                .s("\"");
            if let Some(v) = inn {
                j.s(",\"In msg nelems\":").u(v);
            }
            if let Some(v) = out {
                j.s(",\"Out msg nelems\":").u(v);
            }
            j.s(",\"Seq\":").u(u64::from(n.seq));
            match c.api {
                Api::NcclSend => j.s(",\"Dst Rank\":").i(i64::from(n.extra)),
                Api::NcclRecv => j.s(",\"Src Rank\":").i(i64::from(n.extra)),
                Api::NcclBroadcast | Api::NcclReduce => j.s(",\"root\":").i(i64::from(n.extra)),
                _ => j.s(",\"op\":").i(i64::from(n.extra)),
            };
            j.s(",\"stream\":").hex(c.args[1]);
        }
        // A group call has no communicator; a set-up's is written only when it succeeds.
        let made = c.ok() && op != Op::Group;
        if matches!(op, Op::Collective | Op::PointToPoint | Op::CommEnd) || made {
            j.s(",\"comm\":").hex(c.args[0]);
        }
        if let Some(m) = comm.filter(|_| op != Op::Group) {
            j.s(",\"Comms Id\":");
            match m.id {
                0 => j.s("null"),
                id => j.hex(id),
            };
            if let Some(rank) = m.rank {
                j.s(",\"Rank\":").u(u64::from(rank));
            }
            if let Some(n) = m.nranks {
                j.s(",\"Group size\":").u(u64::from(n));
            }
        }
        if !c.api.entry_only() {
            match c.ret {
                Some(ret) => j.s(",\"ret\":").i(ret),
                None => j.s(",\"in_flight\":true"),
            };
        }
        j.s("}}");
        self.j.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(api: Api, args: [u64; 3], ret: i64) -> Call {
        Call {
            api,
            pid: 7,
            tid: 7,
            correlation: 1,
            enter_ns: 1,
            exit_ns: Some(2),
            ret: Some(ret),
            args,
            filtered: false,
        }
    }

    #[test]
    fn a_communicator_is_learned_from_its_returned_set_up_only() {
        let mut comms = Comms::default();
        comms.learn(&setup(Api::NcclCommInitRank, [0x10, 0xabc, 4 | 1 << 32], 0));
        assert_eq!(
            comms.get(7, 0x10),
            Some(&Comm {
                id: 0xabc,
                rank: Some(1),
                nranks: Some(4)
            })
        );
        comms.learn(&setup(Api::NcclCommSplit, [0x20, 0xdef, 0], 0));
        assert_eq!(comms.get(7, 0x20).unwrap().rank, None);
        comms.learn(&setup(Api::NcclCommInitRank, [0x30, 0x1, 2], 5));
        assert_eq!(comms.get(7, 0x30), None);
        assert_eq!(dtype_name(7), "Float");
        assert_eq!(dtype_name(200), "unknown");
    }
}
