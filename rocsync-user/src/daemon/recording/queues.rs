//! The HSA queues the tracked processes have now, as their latest record (created, or
//! found at a first doorbell). A trace that begins after a queue was made, or a flight
//! recorder dump whose window begins after it, needs that record to place the queue's
//! packets (its agent, its track): it is handed to them first.

use std::collections::{BTreeMap, BTreeSet};

use rocsync_common::{Decoded, QUEUE_DESTROYED, QueueRecord, decode};

#[derive(Default)]
pub(crate) struct LiveQueues {
    /// By (pid, doorbell signal): the record's bytes.
    by_doorbell: BTreeMap<(u32, u64), Vec<u8>>,
}

/// Most queues kept: ROCr makes a few per device and process; a process making more is
/// not followed into memory for ever (its extra queues are placed by their packets only).
const MAX_QUEUES: usize = 65_536;

impl LiveQueues {
    /// A queue record read from the ring.
    pub(crate) fn note(&mut self, bytes: &[u8], q: &QueueRecord) {
        let key = (q.pid, q.doorbell);
        if q.created == QUEUE_DESTROYED {
            self.by_doorbell.remove(&key);
        } else if self.by_doorbell.len() < MAX_QUEUES || self.by_doorbell.contains_key(&key) {
            self.by_doorbell.insert(key, bytes.to_vec());
        }
    }

    /// The records of `pids`' live queues.
    pub(crate) fn of<'a>(&'a self, pids: &'a [u32]) -> impl Iterator<Item = &'a [u8]> {
        self.by_doorbell
            .iter()
            .filter(|((pid, _), _)| pids.contains(pid))
            .map(|(_, r)| r.as_slice())
    }

    /// Every live queue's record but those `records` hold a record of (a dump's own).
    pub(crate) fn missing_from<'a>(&self, records: impl Iterator<Item = &'a [u8]>) -> Vec<Vec<u8>> {
        let present: BTreeSet<(u32, u64)> = records
            .filter_map(|r| match decode(r) {
                Ok(Decoded::Queue(q)) => Some((q.pid, q.doorbell)),
                _ => None,
            })
            .collect();
        self.by_doorbell
            .iter()
            .filter(|(k, _)| !present.contains(k))
            .map(|(_, r)| r.clone())
            .collect()
    }

    /// Forgets the queues of processes that are gone.
    pub(crate) fn retain_processes(&mut self, alive: impl Fn(u32) -> bool) {
        self.by_doorbell.retain(|(pid, _), _| alive(*pid));
    }
}

#[cfg(test)]
mod tests {
    use rocsync_common::{QUEUE_CREATED, QUEUE_DISCOVERED, RECORD_QUEUE};

    use super::*;

    fn record(pid: u32, doorbell: u64, created: u32) -> (Vec<u8>, QueueRecord) {
        let q = QueueRecord {
            kind: RECORD_QUEUE,
            pid,
            created,
            doorbell,
            size: 64,
            ..Default::default()
        };
        // SAFETY: the bytes of a plain `#[repr(C)]` record.
        let bytes = unsafe {
            std::slice::from_raw_parts((&raw const q).cast::<u8>(), size_of::<QueueRecord>())
        };
        (bytes.to_vec(), q)
    }

    #[test]
    fn live_queues_follow_creation_and_destruction_by_process() {
        let mut live = LiveQueues::default();
        for (pid, doorbell, created) in [
            (1, 10, QUEUE_CREATED),
            (1, 11, QUEUE_DISCOVERED),
            (2, 10, QUEUE_CREATED),
            (1, 10, QUEUE_DESTROYED),
        ] {
            let (bytes, q) = record(pid, doorbell, created);
            live.note(&bytes, &q);
        }
        let of_1: Vec<_> = live.of(&[1]).collect();
        assert_eq!(of_1, vec![record(1, 11, QUEUE_DISCOVERED).0.as_slice()]);
        // A dump that holds pid 2's queue gets only pid 1's from here.
        let held = record(2, 10, QUEUE_CREATED).0;
        assert_eq!(
            live.missing_from([held.as_slice()].into_iter()),
            vec![record(1, 11, QUEUE_DISCOVERED).0]
        );
        live.retain_processes(|pid| pid != 1);
        assert_eq!(live.of(&[1, 2]).count(), 1);
    }
}
