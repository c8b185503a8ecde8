//! HSA packets in one trace: how many AQL packets of each type each queue published, on
//! which agent, and the arrows between them — a barrier's dependency on a packet's
//! completion signal (`hsa_dep`), a stream wait's barrier packet (`hip_barrier`).

use std::{collections::BTreeMap, rc::Rc};

use serde::Serialize;

/// A queue: its agent (`None`: created before the capture) and handle.
type Queue = (Option<i64>, Rc<str>);

/// The packets as read: by (agent, queue), by type.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Packets {
    pub by_queue: BTreeMap<Queue, BTreeMap<Rc<str>, u64>>,
    pub barrier_dependencies: u64,
    pub call_barriers: u64,
}

impl Packets {
    pub fn add(&mut self, agent: Option<i64>, queue: Rc<str>, kind: Rc<str>) {
        let q = self.by_queue.entry((agent, queue)).or_default();
        *q.entry(kind).or_default() += 1;
    }
}

/// One queue's packets.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct QueueFigures {
    /// Its GPU agent; `None` for a queue created before the capture.
    pub agent: Option<i64>,
    pub queue: String,
    pub packets: u64,
    pub by_type: BTreeMap<String, u64>,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct PacketFigures {
    pub packets: u64,
    pub by_type: BTreeMap<String, u64>,
    pub queues: Vec<QueueFigures>,
    /// Barrier packets' dependencies on another packet's completion signal.
    pub barrier_dependencies: u64,
    /// Runtime waits whose barrier packet the trace links them to.
    pub call_barriers: u64,
}

impl PacketFigures {
    pub fn of(p: &Packets) -> PacketFigures {
        let mut f = PacketFigures {
            barrier_dependencies: p.barrier_dependencies,
            call_barriers: p.call_barriers,
            ..PacketFigures::default()
        };
        for ((agent, queue), types) in &p.by_queue {
            let by_type: BTreeMap<String, u64> =
                types.iter().map(|(k, v)| (k.to_string(), *v)).collect();
            for (k, v) in &by_type {
                *f.by_type.entry(k.clone()).or_default() += v;
            }
            let n = by_type.values().sum();
            f.packets += n;
            f.queues.push(QueueFigures {
                agent: *agent,
                queue: queue.to_string(),
                packets: n,
                by_type,
            });
        }
        f
    }
}
