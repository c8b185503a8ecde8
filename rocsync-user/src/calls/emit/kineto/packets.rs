//! HSA rows: a track per queue on its agent's process, a row per published AQL packet,
//! and arrows from the packet whose completion signal a barrier waits on.

use std::io::{self, Write};

use rocsync_common::UNKNOWN_AGENT;
use rustc_hash::FxHashMap as HashMap;

use super::rows::{Position, Rows};
use crate::calls::ingest::{Packet, Queue, aql, aql::Body};

/// HSA queue tracks on a GPU process: beside stream, sync and device tracks.
pub(super) const QUEUE_TID_BASE: i64 = 3_000_000;
const PACKET_DEP_CAT: &str = "hsa_dep";
/// The GPU process of queues whose agent is unknown (created before the capture).
pub(super) const UNKNOWN_AGENT_PID: i32 = 4_000_000;
/// API-level wait → the barrier packet it submitted.
pub(super) const CALL_PACKET_CAT: &str = "hip_barrier";

/// The HSA queues a trace has seen created, and the packets barriers may wait on.
#[derive(Default)]
pub(super) struct Queues {
    /// Queue → (agent ordinal, track).
    tracks: HashMap<u64, (i32, i64)>,
    /// Completion signal → the packet that signals it, for barrier arrows.
    signal_producers: HashMap<u64, Position>,
}

impl Queues {
    /// A queue created: it gets a track on its agent's process.
    pub(super) fn track(&mut self, q: &Queue) {
        if !q.created || self.tracks.contains_key(&q.queue) {
            return;
        }
        let agent = if q.ordinal == UNKNOWN_AGENT {
            UNKNOWN_AGENT_PID
        } else {
            q.ordinal as i32
        };
        let n = self.tracks.values().filter(|(a, _)| *a == agent).count() as i64;
        self.tracks.insert(q.queue, (agent, QUEUE_TID_BASE + n));
    }

    /// A queue's (agent ordinal, track), once it was seen created.
    pub(super) fn track_of(&self, queue: u64) -> Option<(i32, i64)> {
        self.tracks.get(&queue).copied()
    }

    /// One published AQL packet: a row on its queue's track, and an arrow from the packet
    /// whose completion signal a barrier waits on.
    pub(super) fn row<W: Write>(&mut self, rows: &mut Rows<W>, r: &Packet) -> io::Result<()> {
        let Some((agent, tid)) = self.track_of(r.queue) else {
            return Ok(());
        };
        let p = aql::decode(&r.bytes);
        let pid = agent as i64;
        let ts = rows.ts(r.ns);
        rows.tracks.insert((agent, tid));
        let j = rows.slice("hsa_packet", p.kind.name(), pid, tid, ts, 0);
        j.s("\"agent\":");
        if agent == UNKNOWN_AGENT_PID {
            j.s("null");
        } else {
            j.i(pid);
        }
        j.s(",\"queue\":")
            .hex(r.queue)
            .s(",\"write_index\":")
            .u(r.index)
            .s(",\"packet_type\":\"")
            .s(p.kind.name())
            .s("\"");
        match &p.body {
            Body::Kernel {
                grid,
                workgroup,
                kernel_object,
                kernarg_address,
            } => {
                j.s(",\"grid\":[")
                    .u(grid[0] as u64)
                    .s(",")
                    .u(grid[1] as u64)
                    .s(",")
                    .u(grid[2] as u64);
                j.s("],\"workgroup\":[")
                    .u(workgroup[0] as u64)
                    .s(",")
                    .u(workgroup[1] as u64);
                j.s(",")
                    .u(workgroup[2] as u64)
                    .s("],\"kernel_object\":")
                    .hex(*kernel_object);
                j.s(",\"kernarg_address\":").hex(*kernarg_address);
            }
            Body::BarrierValue {
                value, mask, cond, ..
            } => {
                j.s(",\"value\":")
                    .i(*value)
                    .s(",\"mask\":")
                    .hex(*mask as u64)
                    .s(",\"condition\":\"")
                    .s(condition(*cond))
                    .s("\"");
            }
            Body::AgentDispatch {
                function,
                args,
                return_address,
            } => {
                j.s(",\"function\":").u(*function as u64).s(",\"args\":[");
                for (i, a) in args.iter().enumerate() {
                    if i > 0 {
                        j.s(",");
                    }
                    j.hex(*a);
                }
                j.s("],\"return_address\":").hex(*return_address);
            }
            Body::Barrier { .. } | Body::Other => {}
        }
        if !p.deps().is_empty() {
            j.s(",\"dep_signals\":[");
            for (i, d) in p.deps().iter().enumerate() {
                if i > 0 {
                    j.s(",");
                }
                j.hex(*d);
            }
            j.s("]");
        }
        if p.completion_signal != 0 {
            j.s(",\"completion_signal\":").hex(p.completion_signal);
        }
        j.s("}}");
        for d in p.deps() {
            if let Some(&from) = self.signal_producers.get(d) {
                rows.arrow(from, (pid, tid, ts), PACKET_DEP_CAT);
            }
        }
        if p.completion_signal != 0 {
            self.signal_producers
                .insert(p.completion_signal, (pid, tid, ts));
        }
        rows.j.end()
    }
}

/// `hsa_signal_condition_t`, as the packet's field holds it.
fn condition(c: u32) -> &'static str {
    match c {
        0 => "eq",
        1 => "ne",
        2 => "lt",
        3 => "gte",
        _ => "unknown",
    }
}
