//! NCCL/RCCL rows: one per call, its arguments named as PyTorch's `record_param_comms`
//! rows name them (`Collective name`, `dtype`, `In msg nelems`, `Group size`, `Rank`,
//! `Seq`, `Comms Id`, …), so that Kineto, HTA and Chakra users read them as theirs. A
//! collective has no return probe: its row is an instant (dur 0) at its entry.

use std::{io, io::Write};

use rocsync_common::{Api, Op};

use super::rows::Rows;
use crate::calls::{
    emit::comms::{Comms, joined},
    resolve::Row,
};

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

/// Writes one NCCL call's row, learning the communicator a set-up made.
pub(super) fn row<W: Write>(rows: &mut Rows<W>, comms: &mut Comms, r: &Row) -> io::Result<()> {
    let c = &r.call;
    comms.learn(c);
    rows.threads.insert((c.pid, c.tid));
    let end = c.exit_ns.unwrap_or(rows.last_ns).max(c.enter_ns);
    rows.last_ns = rows.last_ns.max(end);
    let dur = i64::try_from(end - c.enter_ns).unwrap_or(i64::MAX);
    let ts = rows.ts(c.enter_ns);
    // A set-up that failed or is still in flight (a rank waiting for the others in
    // its bootstrap) names the communicator it was joining.
    let comm = (comms.get(c.pid, c.args[0]).copied()).or_else(|| joined(c));
    let j = rows.slice(
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
    rows.j.end()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_type_is_named_as_pytorch_names_it() {
        assert_eq!(dtype_name(7), "Float");
        assert_eq!(dtype_name(200), "unknown");
    }
}
