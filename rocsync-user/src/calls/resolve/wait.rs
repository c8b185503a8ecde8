//! The wait rule, applied to calls in correlation order, per process.

use rustc_hash::FxHashMap as HashMap;

use rocsync_common::Op;

use super::row::{Producer, Row, SyncKind, Unresolved};
use crate::calls::ingest::Call;

/// `hipStreamLegacy`/`cudaStreamLegacy`: the null stream by another name.
const STREAM_LEGACY: u64 = 1;
/// `hipStreamPerThread`/`cudaStreamPerThread`.
const STREAM_PER_THREAD: u64 = 2;

pub fn sync_kind(op: Op) -> Option<SyncKind> {
    Some(match op {
        Op::StreamWaitEvent => SyncKind::StreamWaitEvent,
        Op::EventSynchronize => SyncKind::EventSynchronize,
        Op::EventQuery => SyncKind::EventQuery,
        Op::StreamSynchronize => SyncKind::StreamSynchronize,
        Op::DeviceSynchronize => SyncKind::DeviceSynchronize,
        _ => return None,
    })
}

/// A stream as resolution tells them apart: the per-thread default stream is one per
/// thread, never the legacy null stream nor another thread's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum StreamKey {
    Handle(u64),
    PerThread(u32),
}

fn stream_key(c: &Call, handle: u64) -> StreamKey {
    match handle {
        STREAM_PER_THREAD => StreamKey::PerThread(c.tid),
        0 if c.api.per_thread_stream() => StreamKey::PerThread(c.tid),
        STREAM_LEGACY => StreamKey::Handle(0),
        h => StreamKey::Handle(h),
    }
}

/// What is known of an event's latest record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Latest {
    /// None since the handle was first seen in this capture.
    Nothing,
    Recorded(Producer),
    /// Re-recorded on an agent the capture filters out.
    Filtered,
    /// Re-recorded, but whether it succeeded is unknown (its exit was lost).
    Unknown,
}

#[derive(Clone, Copy, Debug)]
struct Event {
    /// Per-process ordinal of this lifetime of the handle.
    id: u64,
    latest: Latest,
    /// The handle was destroyed (or created) within the capture: no earlier record counts.
    fresh: bool,
    /// A record of it failed since it was last recorded (or ever): a wait then says so.
    failed: bool,
}

/// Everything known about one process at a point of the correlation order.
#[derive(Default)]
struct Process {
    /// Current device per thread (a thread starts on device 0).
    device: HashMap<u32, i32>,
    /// Live streams: (device, stream) → index.
    streams: HashMap<(i32, StreamKey), i64>,
    stream_device: HashMap<u64, i32>,
    next_stream_index: HashMap<i32, i64>,
    events: HashMap<u64, Event>,
    next_event_id: u64,
}

impl Process {
    fn thread_device(&self, tid: u32) -> i32 {
        self.device.get(&tid).copied().unwrap_or(0)
    }

    fn stream_device(&self, tid: u32, key: StreamKey) -> i32 {
        match key {
            StreamKey::Handle(h) if h > STREAM_PER_THREAD => self
                .stream_device
                .get(&h)
                .copied()
                .unwrap_or_else(|| self.thread_device(tid)),
            _ => self.thread_device(tid),
        }
    }

    /// The stream's index on its device, numbering streams in order of first appearance.
    fn stream_index(&mut self, device: i32, key: StreamKey) -> i64 {
        let next = self.next_stream_index.entry(device).or_insert(1);
        *self.streams.entry((device, key)).or_insert_with(|| {
            *next += 1;
            *next - 1
        })
    }

    /// A destroyed stream's handle, when reused, is a new stream with a new index.
    fn forget_stream(&mut self, stream: u64) {
        if let Some(d) = self.stream_device.remove(&stream) {
            self.streams.remove(&(d, StreamKey::Handle(stream)));
        } else {
            self.streams
                .retain(|(_, k), _| *k != StreamKey::Handle(stream));
        }
    }

    fn event(&mut self, handle: u64) -> &mut Event {
        let next = &mut self.next_event_id;
        self.events.entry(handle).or_insert_with(|| {
            *next += 1;
            Event {
                id: *next,
                latest: Latest::Nothing,
                fresh: false,
                failed: false,
            }
        })
    }
}

/// Calls pushed in correlation order, one row out per call. Its state is bounded by what
/// is live (threads, streams, events), not by the capture.
#[derive(Default)]
pub struct Resolver {
    processes: HashMap<u32, Process>,
    /// Every process was traced from its start: an event never recorded in the capture
    /// was never recorded at all.
    from_start: bool,
    /// The greatest correlation id known lost: a record older than it may be stale.
    last_lost: u64,
}

impl Resolver {
    pub fn new(from_start: bool) -> Self {
        Self {
            from_start,
            ..Default::default()
        }
    }

    /// A correlation id that never arrived (in order: every later wait is after it).
    pub fn lost(&mut self, correlation: u64) {
        self.last_lost = self.last_lost.max(correlation);
    }

    /// The next call in correlation order.
    pub fn push(&mut self, c: &Call) -> Row {
        let from_start = self.from_start;
        let last_lost = self.last_lost;
        let p = self.processes.entry(c.pid).or_default();
        step(p, c, from_start, last_lost, true)
    }

    /// A call delivered after its place in the order: described with today's state, but
    /// it changes none (a late record never replaces a newer one).
    pub fn push_late(&mut self, c: &Call) -> Row {
        let (from_start, last_lost) = (self.from_start, self.last_lost);
        let p = self.processes.entry(c.pid).or_default();
        Row {
            late: true,
            ..step(p, c, from_start, last_lost, false)
        }
    }
}

/// `*ErrorNotReady` (HIP's and CUDA's): an event query's answer, not a failure.
const NOT_READY: i64 = 600;

fn step(p: &mut Process, c: &Call, from_start: bool, last_lost: u64, apply: bool) -> Row {
    let op = c.api.op();
    let ok = c.ok();
    // A wait on an event that failed waited on nothing: no dependency, no sync row (its
    // runtime row keeps the code).
    let failed = c
        .ret
        .is_some_and(|r| r != 0 && !(op == Op::EventQuery && r == NOT_READY));
    let sync = sync_kind(op).filter(|k| !(failed && k.waits_on_event()));
    if apply {
        state_before(p, c, op, ok);
    }
    let key = c.stream().map(|s| stream_key(c, s));
    let device = match key {
        Some(k) => p.stream_device(c.tid, k),
        None => p.thread_device(c.tid),
    };
    let stream_index = key.map(|k| p.stream_index(device, k));
    let event = c.event().filter(|&e| e != 0);
    let event_id = event.map(|e| p.event(e).id);
    if apply {
        state_after(p, c, op, ok, device, stream_index, from_start);
    }
    let (mut producer, mut unresolved) = (None, None);
    if let (Some(kind), Some(e)) = (sync, c.event())
        && kind.waits_on_event()
    {
        match p.events.get(&e).map(|ev| (ev.latest, ev.fresh, ev.failed)) {
            Some((Latest::Recorded(pr), ..)) if pr.correlation > last_lost => producer = Some(pr),
            Some((Latest::Recorded(_) | Latest::Unknown, ..)) => {
                unresolved = Some(Unresolved::ProducerLost)
            }
            Some((Latest::Filtered, ..)) => unresolved = Some(Unresolved::ProducerFiltered),
            // Its only records since the capture (or since it was made) failed.
            Some((Latest::Nothing, _, true)) => unresolved = Some(Unresolved::RecordFailed),
            Some((Latest::Nothing, fresh, _)) if fresh || from_start => {
                unresolved = Some(Unresolved::NeverRecorded)
            }
            _ if from_start => unresolved = Some(Unresolved::NeverRecorded),
            _ => unresolved = Some(Unresolved::BeforeCapture),
        }
    }
    // An event sync applies to the device of the stream that recorded the event.
    let device = match (sync, producer) {
        (Some(SyncKind::EventSynchronize | SyncKind::EventQuery), Some(pr)) => pr.device,
        _ => device,
    };
    Row {
        call: *c,
        sync,
        device,
        stream_index,
        event_id,
        producer,
        unresolved,
        barrier: None,
        late: false,
    }
}

/// State a call defines before it is described (a created stream, a new device).
fn state_before(p: &mut Process, c: &Call, op: Op, ok: bool) {
    match op {
        Op::StreamCreate | Op::StreamCreateWithFlags | Op::StreamCreateWithPriority if ok => {
            let s = c.args[0];
            p.forget_stream(s);
            let d = p.thread_device(c.tid);
            p.stream_device.insert(s, d);
        }
        Op::SetDevice | Op::GetDevice if ok => {
            p.device.insert(c.tid, c.args[0] as i32);
        }
        _ => {}
    }
}

/// State a call changes for later calls (records, destroys).
fn state_after(
    p: &mut Process,
    c: &Call,
    op: Op,
    ok: bool,
    device: i32,
    stream: Option<i64>,
    from_start: bool,
) {
    match op {
        Op::EventRecord | Op::EventRecordWithFlags => {
            let latest = if c.filtered {
                Latest::Filtered
            } else if ok {
                Latest::Recorded(Producer {
                    correlation: c.correlation,
                    stream_index: stream.unwrap_or(-1),
                    stream: c.args[1],
                    tid: c.tid,
                    device,
                    mid_ns: c.enter_ns + c.exit_ns.map_or(0, |x| x.saturating_sub(c.enter_ns) / 2),
                })
            } else if c.ret.is_none() {
                Latest::Unknown
            } else {
                // A failed record leaves the event as it was; with no record before it, a
                // wait says it failed rather than that there was none.
                p.event(c.args[0]).failed = true;
                return;
            };
            p.event(c.args[0]).latest = latest;
        }
        Op::EventDestroy if ok => {
            // The handle may come back for a new event, which starts with no record.
            p.events.remove(&c.args[0]);
            if !from_start {
                // Attached: remember that no record before the capture counts for it
                // (bounded by the handles the allocator hands out).
                p.event(c.args[0]).fresh = true;
            }
        }
        Op::StreamDestroy if ok => p.forget_stream(c.args[0]),
        _ => {}
    }
}
