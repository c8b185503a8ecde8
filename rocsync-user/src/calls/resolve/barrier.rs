//! Links each stream wait to the barrier packet it submitted: HIP over HSA publishes a
//! barrier-AND on the waiting stream's queue, from the waiting thread, inside the call.

use std::collections::VecDeque;

use rustc_hash::FxHashMap as HashMap;

use super::row::{BarrierRef, Row, SyncKind};
use crate::calls::ingest::{Packet, aql};

/// Barriers remembered per thread for the call that submitted them.
const RECENT: usize = 64;

#[derive(Default)]
pub struct Barriers {
    recent: HashMap<(u32, u32), VecDeque<BarrierRef>>,
}

impl Barriers {
    /// A packet published: barriers are remembered for the call that submitted them.
    pub fn packet(&mut self, p: &Packet) {
        if !aql::decode(&p.bytes).kind.is_barrier() {
            return;
        }
        let recent = self.recent.entry((p.pid, p.tid)).or_default();
        if recent.len() == RECENT {
            recent.pop_front();
        }
        recent.push_back(BarrierRef {
            queue: p.queue,
            index: p.index,
            ns: p.ns,
        });
    }

    /// Sets the barrier a returned stream wait submitted: published by its thread within
    /// its call.
    pub fn link(&self, row: &mut Row) {
        let c = &row.call;
        if row.sync != Some(SyncKind::StreamWaitEvent) {
            return;
        }
        let Some(exit) = c.exit_ns else { return };
        row.barrier = self.recent.get(&(c.pid, c.tid)).and_then(|recent| {
            recent
                .iter()
                .find(|b| (c.enter_ns..=exit).contains(&b.ns))
                .copied()
        });
    }
}
