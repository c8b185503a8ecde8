//! The flight recorder: every tracked process's calls kept in memory for the last N
//! seconds (and at most `MAX_BYTES`), so `rocsync trace --flight` writes what just
//! happened — the seconds before a hang or a slow step — without having asked in advance.
//!
//! Records are kept back to back in chunks of at most `CHUNK_SPAN`'s reading, shared
//! with the dumps that write them: a dump takes the chunks in O(chunks) (not a copy of up
//! to 256 MiB) and is written off the daemon's loop while the recorder keeps recording
//! (one dump at a time, so memory stays within twice the cap).

mod dump;

use std::{
    collections::{HashMap, VecDeque},
    sync::Arc,
    time::Duration,
};

use rocsync_common::{Decoded, decode};
use tokio::time::Instant;

pub(crate) use dump::dump;

/// Memory the recorder may hold; beyond it the oldest records go first, counted.
pub(crate) const MAX_BYTES: usize = 256 << 20;
/// A chunk holds what was read within this span (so what is kept is the last N seconds
/// to within it), and at most `CHUNK_BYTES`.
const CHUNK_SPAN: Duration = Duration::from_millis(50);
const CHUNK_BYTES: usize = 1 << 20;

/// Records read within one short span, each after its length (u32, native-endian).
#[derive(Default)]
pub(crate) struct Chunk {
    bytes: Vec<u8>,
    records: u64,
    /// Returns not kept within it: their calls' entries were not probed (the duty cycle).
    returns_unentered: u64,
    /// When its first and its last record were read.
    span: Option<(Instant, Instant)>,
}

impl Chunk {
    fn push(&mut self, record: &[u8], now: Instant) {
        self.bytes
            .extend_from_slice(&(record.len() as u32).to_ne_bytes());
        self.bytes.extend_from_slice(record);
        self.records += 1;
        self.span = Some((self.span.map_or(now, |(first, _)| first), now));
    }

    /// Its records, in the order they were read.
    pub(crate) fn records(&self) -> impl Iterator<Item = &[u8]> + Clone {
        let mut rest = self.bytes.as_slice();
        std::iter::from_fn(move || {
            let (len, tail) = rest.split_first_chunk::<4>()?;
            let (record, tail) = tail.split_at(u32::from_ne_bytes(*len) as usize);
            rest = tail;
            Some(record)
        })
    }
}

pub(crate) struct FlightRecorder {
    span: Duration,
    sealed: VecDeque<Arc<Chunk>>,
    open: Chunk,
    /// Held in `sealed` and `open`.
    bytes: usize,
    /// Records dropped for memory before their time was up.
    pub evicted: u64,
    /// The highest correlation id it may lack without losing it: the probes' counter
    /// when it began (ids before were never its), then the highest call it forgot.
    /// `None`: unknown (every id before its first held call is then taken as forgotten).
    known_from: Option<u64>,
    /// Each thread's last kept entry of a cycled API (a record, wait or destroy), until
    /// its return: see [`FlightRecorder::keep_call`].
    entered: HashMap<(u32, u32), u16>,
}

/// Threads [`FlightRecorder::entered`] holds at most: past it, forgotten at once (their
/// next returns are then not kept, counted).
const THREADS_HELD: usize = 1 << 16;

/// Whether the duty cycle takes `api`'s probes off and on (`budget/cycle.rs`).
fn cycled(api: u32) -> bool {
    rocsync_common::Api::from_u32(api).is_some_and(|a| a.return_optional() && !a.is_polling())
}

impl FlightRecorder {
    /// `from`: the last correlation id the probes had given when it begins.
    pub(crate) fn new(span: Duration, from: Option<u64>) -> Self {
        Self {
            span,
            sealed: VecDeque::new(),
            open: Chunk::default(),
            bytes: 0,
            evicted: 0,
            known_from: from,
            entered: HashMap::new(),
        }
    }

    /// See the field; a dump counts the ids after it that it lacks as lost.
    pub(crate) fn known_from(&self) -> Option<u64> {
        self.known_from
    }

    /// How far back it keeps.
    pub(crate) fn span(&self) -> Duration {
        self.span
    }

    /// Keeps a call's record, but not the return of a record, wait or destroy whose entry
    /// it did not keep: the duty cycle puts their returns back before their entries, and
    /// a call entered between returns with no entry (not a lost record: a call of the
    /// period off, estimated there). Counted in its chunk; the dump says them.
    pub(crate) fn keep_call(&mut self, record: &[u8], decoded: &Decoded) {
        match decoded {
            Decoded::Entry(e) if cycled(u32::from(e.api)) => {
                if self.entered.len() >= THREADS_HELD {
                    self.entered.clear();
                }
                self.entered.insert((e.pid, e.tid), e.api);
            }
            Decoded::Exit(x) if cycled(x.api) => {
                let thread = (x.pid, x.tid);
                if self.entered.get(&thread).map(|&a| u32::from(a)) != Some(x.api) {
                    self.open.returns_unentered += 1;
                    return;
                }
                self.entered.remove(&thread);
            }
            _ => {}
        }
        self.keep(record);
    }

    /// A process exited: its threads' entries are forgotten.
    pub(crate) fn exited(&mut self, pid: u32) {
        self.entered.retain(|&(p, _), _| p != pid);
    }

    /// Keeps a ring record; forgets what is older than the span, or over the memory cap.
    pub(crate) fn keep(&mut self, record: &[u8]) {
        let now = Instant::now();
        let full = self.open.bytes.len() + 4 + record.len() > CHUNK_BYTES;
        if full
            || self
                .open
                .span
                .is_some_and(|(first, _)| now - first >= CHUNK_SPAN)
        {
            self.seal();
        }
        self.bytes += 4 + record.len();
        self.open.push(record, now);
        self.forget(now);
    }

    /// Forgets what the span left behind while nothing new is read (the daemon's prune
    /// tick): forgotten only as records came, the last seconds of a load were held for
    /// good once it stopped (+18 MB in use after the soak). Returns the bytes let go.
    pub(crate) fn expire(&mut self) -> usize {
        let (now, before) = (Instant::now(), self.bytes);
        if (self.open.span).is_some_and(|(first, _)| now - first >= CHUNK_SPAN) {
            self.seal();
        }
        self.forget(now);
        // Threads of gone processes leave the table's room behind.
        if self.entered.capacity() > 4 * self.entered.len() + 1024 {
            self.entered.shrink_to_fit();
        }
        before - self.bytes
    }

    /// What it holds now, oldest first, for a dump; it goes on recording meanwhile.
    pub(crate) fn chunks(&mut self) -> Vec<Arc<Chunk>> {
        self.forget(Instant::now());
        self.seal();
        self.sealed.iter().cloned().collect()
    }

    fn seal(&mut self) {
        if self.open.records > 0 {
            self.sealed
                .push_back(Arc::new(std::mem::take(&mut self.open)));
        }
    }

    /// Drops the oldest chunks while their last record is older than the span, or while
    /// over the cap (those counted: dropped before their time).
    fn forget(&mut self, now: Instant) {
        while let Some(oldest) = self.sealed.front() {
            let last = oldest.span.map_or(now, |(_, last)| last);
            let expired = now.duration_since(last) > self.span;
            if !expired && self.bytes <= MAX_BYTES {
                break;
            }
            self.bytes -= oldest.bytes.len();
            if !expired {
                self.evicted += oldest.records;
            }
            let forgot = oldest.records().filter_map(|r| match decode(r) {
                Ok(Decoded::Entry(e)) => Some(e.correlation),
                _ => None,
            });
            if let (Some(known), Some(id)) = (self.known_from, forgot.max()) {
                self.known_from = Some(known.max(id));
            }
            self.sealed.pop_front();
        }
    }
}

/// What a dump writes: the recorder's chunks, and the last correlation id the probes had
/// given when it was asked (ids after the last record read are lost, not unmade).
pub(crate) struct Held {
    pub chunks: Vec<Arc<Chunk>>,
    pub assigned: Option<u64>,
    /// [`FlightRecorder::known_from`] when it was asked.
    pub known_from: Option<u64>,
    /// The records of live HSA queues made before the window (their packets need them).
    pub queues: Vec<Vec<u8>>,
    /// The largest a file of it may grow (`--trace-max-bytes`, as for any trace).
    pub max_bytes: u64,
    /// The calls the duty cycle's spans within its span estimated (none recorded).
    pub duty_cycled: u64,
}

/// The returns `chunks` did not keep: their calls' entries were not probed.
pub(crate) fn returns_unentered(chunks: &[Arc<Chunk>]) -> u64 {
    chunks.iter().map(|c| c.returns_unentered).sum()
}

/// The records of `chunks`, oldest first.
pub(crate) fn records(chunks: &[Arc<Chunk>]) -> impl Iterator<Item = &[u8]> + Clone {
    chunks.iter().flat_map(|c| c.records())
}

#[cfg(test)]
mod tests {
    use super::{dump::first_expected, *};

    fn firsts(f: &mut FlightRecorder) -> Vec<u8> {
        records(&f.chunks()).map(|r| r[0]).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn keeps_the_last_span_only() {
        let mut f = FlightRecorder::new(Duration::from_secs(2), Some(0));
        f.keep(&[1; 8]);
        tokio::time::advance(Duration::from_secs(1)).await;
        f.keep(&[2; 8]);
        tokio::time::advance(Duration::from_millis(1500)).await;
        f.keep(&[3; 8]);
        assert_eq!(firsts(&mut f), vec![2, 3], "the first is older than 2 s");
        assert_eq!(f.evicted, 0, "expiry is no loss");
    }

    #[tokio::test(start_paused = true)]
    async fn what_the_span_left_behind_is_let_go_when_nothing_more_comes() {
        let mut f = FlightRecorder::new(Duration::from_secs(2), Some(0));
        f.keep(&[1; 8]);
        tokio::time::advance(Duration::from_millis(100)).await;
        f.keep(&[2; 8]);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(f.expire(), 0, "within the span");
        // The load stops: no record comes to make it forget, the tick does.
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(f.expire(), 2 * (4 + 8));
        assert_eq!((f.bytes, f.sealed.len(), f.open.records), (0, 0, 0));
        assert_eq!(f.evicted, 0, "expiry is no loss");
    }

    #[tokio::test(start_paused = true)]
    async fn records_come_back_whole_and_in_order() {
        let mut f = FlightRecorder::new(Duration::from_secs(10), Some(0));
        let sent: Vec<Vec<u8>> = (0..3000u32)
            .map(|i| vec![(i % 251) as u8; 1 + (i as usize * 7) % 700])
            .collect();
        for (i, r) in sent.iter().enumerate() {
            f.keep(r);
            if i % 100 == 0 {
                tokio::time::advance(Duration::from_millis(20)).await;
            }
        }
        let chunks = f.chunks();
        assert!(chunks.len() > 1, "sealed by span and by size");
        let got: Vec<&[u8]> = records(&chunks).collect();
        assert_eq!(got, sent.iter().map(Vec::as_slice).collect::<Vec<_>>());
    }

    #[tokio::test(start_paused = true)]
    async fn a_dump_keeps_its_chunks_while_recording_goes_on() {
        let mut f = FlightRecorder::new(Duration::from_secs(1), Some(0));
        f.keep(&[1; 8]);
        let dump = f.chunks();
        tokio::time::advance(Duration::from_secs(3)).await;
        f.keep(&[2; 8]);
        assert_eq!(firsts(&mut f), vec![2], "the recorder forgot the first");
        assert_eq!(records(&dump).map(|r| r[0]).collect::<Vec<_>>(), vec![1]);
    }

    #[tokio::test(start_paused = true)]
    async fn the_cap_drops_the_oldest_and_counts_them() {
        let mut f = FlightRecorder::new(Duration::from_secs(3600), Some(0));
        let record = vec![7u8; 60_000];
        let n = MAX_BYTES / record.len() + 100;
        for _ in 0..n {
            f.keep(&record);
        }
        let kept = records(&f.chunks()).count() as u64;
        assert!(f.bytes <= MAX_BYTES + CHUNK_BYTES, "{} held", f.bytes);
        assert_eq!(kept + f.evicted, n as u64, "every record kept or counted");
        assert!(f.evicted >= 100);
    }

    #[test]
    fn a_dump_accounts_for_every_id_after_what_the_recorder_may_lack() {
        // Began at id 0, forgot nothing: ids before its first held call are lost.
        assert_eq!(first_expected(Some(102), Some(0), Some(500)), 1);
        // Forgot up to 90: 91 on are its to hold.
        assert_eq!(first_expected(Some(95), Some(90), Some(500)), 91);
        // Its first held call older than the last it forgot (read in another order).
        assert_eq!(first_expected(Some(88), Some(90), Some(500)), 88);
        // Holding nothing: every id it was given since is lost.
        assert_eq!(first_expected(None, Some(7), Some(500)), 8);
        // Unknown beginning: from its first held call, as before.
        assert_eq!(first_expected(Some(102), None, Some(500)), 102);
        assert_eq!(first_expected(None, None, Some(500)), 501);
    }

    #[tokio::test(start_paused = true)]
    async fn what_it_forgets_moves_what_it_may_lack() {
        let mut f = FlightRecorder::new(Duration::from_secs(1), Some(0));
        let entry = |id: u64| {
            let e = rocsync_common::EntryRecord {
                kind: rocsync_common::RECORD_ENTRY,
                api: rocsync_common::Api::HipStreamSynchronize as u16,
                correlation: id,
                ..Default::default()
            };
            // SAFETY: the bytes of a plain record.
            unsafe {
                std::slice::from_raw_parts(
                    (&raw const e).cast::<u8>(),
                    size_of::<rocsync_common::EntryRecord>(),
                )
            }
            .to_vec()
        };
        f.keep(&entry(5));
        f.keep(&entry(3));
        tokio::time::advance(Duration::from_millis(1200)).await;
        f.keep(&entry(9));
        let _ = f.chunks();
        assert_eq!(f.known_from(), Some(5));
    }
}
