//! Where the pipeline is entered after ingest, not from probe records: a raw capture's
//! items (`convert`), a call entered before the pipeline began (the daemon's in-flight
//! hang or stall), a communicator set up before it, complete calls (tests, synthetic
//! input).

use crate::calls::{
    emit::{Sink, comms::Comm, raw::Item},
    ingest::Call,
    pipeline::{Pipeline, REPLAY_WINDOW},
};

impl<S: Sink> Pipeline<S> {
    /// An item of a raw capture. Calls go through the sequencer again: a capture's own
    /// file is already in order (nothing is held), a hand-written one may not be. Past
    /// [`REPLAY_WINDOW`] calls waiting, the id they wait for is declared lost: a file has
    /// no ticks, so memory is bounded by that window, not by the file.
    pub fn replay(&mut self, item: Item) {
        let mut out = Vec::new();
        match item {
            Item::Call { call, deferred, .. } => {
                self.sequencer.entered(call, &mut |r| out.push(r));
                if deferred {
                    self.sequencer.defer_in_flight(&mut |r| out.push(r));
                }
            }
            // A return of no call in the file (a hand-made one): counted, not dropped.
            Item::Completion(corr, exit) => {
                if !self.sequencer.returned(corr, exit, &mut |r| out.push(r)) {
                    self.stats.unpaired_exits += 1;
                }
            }
            Item::Lost(first, count) => self.sequencer.lost(first, count, &mut |r| out.push(r)),
            Item::Queue(q) => self.queue(&q),
            Item::Packet(p) => self.packet(&p),
            Item::Trailer(t) => {
                self.stats.kernel = t.kernel;
                self.stats.unpaired_entries += t.unpaired_entries;
                self.stats.unpaired_exits += t.unpaired_exits;
                self.stats.calls_begun_before += t.calls_begun_before;
                self.stats.undecodable += t.undecodable;
            }
        }
        if self.sequencer.pending() > REPLAY_WINDOW {
            self.sequencer.give_up_head(&mut |r| out.push(r));
        }
        self.release(out);
    }

    /// A synchronisation entered before this pipeline began, known from elsewhere (the
    /// daemon's in-flight entry of a hang, a stall's return): its row, with id 0 (the
    /// probes gave it none), and, in flight, its exit still to come on its thread.
    pub fn entered_before(&mut self, call: Call) {
        debug_assert!(call.correlation == 0 && call.api.op().waits());
        if call.exit_ns.is_none() {
            self.pairing
                .entered(call.pid, call.tid, (0, call.api), None);
        }
        let mut out = Vec::new();
        self.sequencer.outside(call, &mut |r| out.push(r));
        self.release(out);
    }

    /// A communicator of `pid` set up before this pipeline began (the probes' state).
    pub fn communicator(&mut self, pid: u32, handle: u64, comm: Comm) {
        let _ = self.sink.communicator(pid, handle, comm);
    }

    /// A complete call, in any order (tests, synthetic input).
    pub fn call(&mut self, call: Call) {
        let mut out = Vec::new();
        self.sequencer.entered(call, &mut |r| out.push(r));
        self.release(out);
    }
}
