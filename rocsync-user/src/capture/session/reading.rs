//! Reading what the probes wrote: the ring (HSA, loader and process records), then the
//! call ring, in batches so that the loop looks at its ends between them.

use aya::maps::{MapData, RingBuf};

use super::Session;

/// Call records read between two looks at the loop's ends (a few milliseconds' work).
const DRAIN_BATCH: u64 = 8192;

impl Session {
    /// Reads the ring, then at most [`DRAIN_BATCH`] call records: the loop looks at its
    /// ends between batches ([`Session::behind`] says more is waiting).
    pub(super) fn drain(&mut self, ring: &mut RingBuf<MapData>) {
        // The ring first, then the calls reserved before it was read: the packets a call
        // submits (in the ring) reach the pipeline before the call's exit.
        let calls_until = self.probes.calls_reserved();
        self.drain_ring(ring);
        let until = calls_until.min(self.probes.calls_read() + DRAIN_BATCH);
        // Call records announce nothing: the pipeline takes them all.
        self.probes.drain_calls(until, |bytes| {
            let _ = self.pipeline.record(bytes);
        });
        self.behind = self.probes.calls_read() < calls_until;
        self.name_new_threads();
    }

    /// Reads the name of each thread first seen in this drain while it may still live
    /// (`comm`, a procfs file: no read of it blocks).
    fn name_new_threads(&mut self) {
        for (pid, tid) in self.pipeline.take_new_threads() {
            // Gone already: written `thread TID`.
            if let Some(name) = crate::os::procfs::thread_name(pid, tid) {
                let info = self.processes.entry(pid).or_default();
                info.threads.insert(tid, name);
            }
        }
    }

    /// Reads everything the probes wrote up to now.
    pub(super) fn drain_all(&mut self, ring: &mut RingBuf<MapData>) {
        self.drain(ring);
        while self.behind {
            self.drain(ring);
        }
    }

    fn drain_ring(&mut self, ring: &mut RingBuf<MapData>) {
        while let Some(item) = ring.next() {
            let mut buf = [0u8; 128];
            let n = item.len().min(buf.len());
            buf[..n].copy_from_slice(&item[..n]);
            let len = item.len();
            drop(item);
            if len > buf.len() {
                self.pipeline.stats.undecodable += 1;
                continue;
            }
            if let Some(notice) = self.pipeline.record(&buf[..n]) {
                self.notice(notice);
            }
        }
    }
}
