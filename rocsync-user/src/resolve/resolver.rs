//! The resolution pass.

use rustc_hash::FxHashMap as HashMap;

use rocsync_common::Op;

use super::row::{Producer, Resolved, Row, SyncKind};
use crate::trace::call::Call;

/// `hipStreamLegacy`/`cudaStreamLegacy` and `…PerThread`: like the null stream, they
/// belong to the calling thread's current device.
const STREAM_LEGACY: u64 = 1;
const STREAM_PER_THREAD: u64 = 2;

pub fn sync_kind(op: Op) -> Option<SyncKind> {
    Some(match op {
        Op::StreamWaitEvent => SyncKind::StreamWaitEvent,
        Op::EventSynchronize => SyncKind::EventSynchronize,
        Op::StreamSynchronize => SyncKind::StreamSynchronize,
        Op::DeviceSynchronize => SyncKind::DeviceSynchronize,
        _ => return None,
    })
}

/// Everything known about one process at a point of the correlation order.
#[derive(Default)]
struct Process {
    /// Current device per thread (HIP's default is 0).
    device: HashMap<u32, i32>,
    /// Live streams: handle → (device, index).
    streams: HashMap<(i32, u64), i64>,
    stream_device: HashMap<u64, i32>,
    next_stream_index: HashMap<i32, i64>,
    /// Live events: handle → (lifetime ordinal, latest successful record).
    events: HashMap<u64, (u64, Option<Producer>)>,
    next_event_id: u64,
}

impl Process {
    fn thread_device(&self, tid: u32) -> i32 {
        self.device.get(&tid).copied().unwrap_or(0)
    }

    fn stream_device(&self, tid: u32, stream: u64) -> i32 {
        match stream {
            0 | STREAM_LEGACY | STREAM_PER_THREAD => self.thread_device(tid),
            s => self
                .stream_device
                .get(&s)
                .copied()
                .unwrap_or_else(|| self.thread_device(tid)),
        }
    }

    /// The stream's index on its device, numbering streams in order of first appearance.
    /// The null stream of each device and the per-thread stream get their own.
    fn stream_index(&mut self, device: i32, stream: u64) -> i64 {
        let next = self.next_stream_index.entry(device).or_insert(1);
        *self.streams.entry((device, stream)).or_insert_with(|| {
            *next += 1;
            *next - 1
        })
    }

    fn forget_stream(&mut self, stream: u64) {
        if let Some(d) = self.stream_device.remove(&stream) {
            self.streams.remove(&(d, stream));
        }
    }

    fn event(&mut self, handle: u64) -> &mut (u64, Option<Producer>) {
        let next = &mut self.next_event_id;
        self.events.entry(handle).or_insert_with(|| {
            *next += 1;
            (*next, None)
        })
    }
}

/// Resolves a capture. `calls` may be in any order; the rows come out in correlation
/// order.
pub fn resolve(calls: &[Call]) -> Resolved {
    let mut order: Vec<&Call> = calls.iter().collect();
    order.sort_unstable_by_key(|c| (c.correlation, c.pid));
    let mut r = Resolver::default();
    let rows = order.into_iter().map(|c| r.push(c)).collect();
    Resolved {
        rows,
        waits_resolved: r.waits_resolved,
        waits_unresolved: r.waits_unresolved,
    }
}

/// The incremental form: calls pushed in correlation order, one row out per call. Its
/// state is bounded by what is live (threads, streams, events), not by the capture.
#[derive(Default)]
pub struct Resolver {
    processes: HashMap<u32, Process>,
    pub waits_resolved: u64,
    pub waits_unresolved: u64,
}

impl Resolver {
    pub fn push(&mut self, c: &Call) -> Row {
        let p = self.processes.entry(c.pid).or_default();
        step(p, c, &mut self.waits_resolved, &mut self.waits_unresolved)
    }
}

/// Whether a call changes what later calls resolve to (so it cannot be passed over while
/// it is still in flight).
pub fn changes_state(op: Op) -> bool {
    sync_kind(op).is_none()
}

fn step(p: &mut Process, c: &Call, resolved: &mut u64, unresolved: &mut u64) -> Row {
    let op = c.api.op();
    let sync = sync_kind(op);
    let stream = c.stream();
    let event = c.event();
    let ok = c.ok();
    // Stream creation defines the stream (its handle is read at return).
    if ok
        && matches!(
            op,
            Op::StreamCreate | Op::StreamCreateWithFlags | Op::StreamCreateWithPriority
        )
    {
        let s = c.args[0];
        p.forget_stream(s);
        let d = p.thread_device(c.tid);
        p.stream_device.insert(s, d);
    }
    let device = match (stream, sync) {
        (Some(s), _) => p.stream_device(c.tid, s),
        _ => p.thread_device(c.tid),
    };
    let stream_index = stream.map(|s| p.stream_index(device, s));
    let event_id = event.filter(|&e| e != 0).map(|e| p.event(e).0);
    let mut producer = None;
    match op {
        Op::SetDevice | Op::GetDevice if ok => {
            p.device.insert(c.tid, c.args[0] as i32);
        }
        Op::EventRecord | Op::EventRecordWithFlags if ok => {
            let (e, s) = (c.args[0], c.args[1]);
            p.event(e).1 = Some(Producer {
                correlation: c.correlation,
                stream_index: stream_index.unwrap_or(-1),
                stream: s,
                tid: c.tid,
                device,
                mid_ns: c.enter_ns + c.exit_ns.map_or(0, |x| x.saturating_sub(c.enter_ns) / 2),
            });
        }
        Op::EventDestroy if ok => {
            // The handle may come back for a new event, which starts with no record.
            p.events.remove(&c.args[0]);
        }
        Op::StreamDestroy if ok => p.forget_stream(c.args[0]),
        _ => {}
    }
    if let (Some(kind), Some(e)) = (sync, event)
        && kind.waits_on_event()
    {
        producer = p.events.get(&e).and_then(|(_, r)| *r);
        if producer.is_some() {
            *resolved += 1;
        } else {
            *unresolved += 1;
        }
    }
    // An event sync applies to the device of the stream that recorded the event.
    let device = match (sync, producer) {
        (Some(SyncKind::EventSynchronize), Some(pr)) => pr.device,
        _ => device,
    };
    Row {
        call: *c,
        sync,
        device,
        stream_index,
        event_id,
        producer,
    }
}
