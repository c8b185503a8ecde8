//! What a trace knows of the NCCL/RCCL communicators its calls ran in: learned from their
//! set-up calls (the Kineto writer, the raw reader) or handed to every sink
//! ([`super::Sink::communicator`]) from the probes' state.

use std::collections::HashMap;

use rocsync_common::Op;

use crate::calls::ingest::Call;

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
pub(crate) fn joined(c: &Call) -> Option<Comm> {
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
fn ranks(rank: u32, nranks: u32) -> (Option<u32>, Option<u32>) {
    match nranks > 0 && nranks <= rocsync_common::MAX_RANKS && rank < nranks {
        true => (Some(rank), Some(nranks)),
        false => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use rocsync_common::Api;

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
    }
}
