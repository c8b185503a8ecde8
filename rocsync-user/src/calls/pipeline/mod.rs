//! The one path from probe records to outputs, shared by `run`, `attach`, `convert` and
//! the benchmarks:
//!
//! ```text
//! ring bytes ─decode─▶ ingest (pair entry/exit per thread, order by correlation)
//!            ─▶ resolve (wait rule, barrier links) ─▶ emit (Sink: Kineto, raw)
//! ```
//! `convert` enters after ingest, with the raw capture's items in the order the live
//! pipeline delivered them, and so writes the same trace. Every stage counts what it
//! loses in one [`CaptureStats`].

pub mod cadence;
mod entering;

use std::io;

use rocsync_common::{
    Api, Decoded, EXIT_OUT_READ, EntryRecord, ExitRecord, OutParam, PROCESS_FORK, decode,
};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::calls::{
    emit::Sink,
    ingest::{
        Call, Packet, Queue, Released, Sequencer, pair::Pairing, sequence::Exit,
        threads::NewThreads,
    },
    resolve::{Barriers, Resolver, Row},
    stats::CaptureStats,
};

/// What the capture loop must act on, besides records the pipeline consumes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notice {
    /// The dynamic loader of `pid` changed its link map; `stopped` when the probe
    /// stopped the process (the capture continues it once new libraries are probed).
    LinkMap { pid: u32, stopped: bool },
    /// A followed process forked `child`, which the kernel traces from its first call.
    Forked { parent: u32, child: u32 },
    /// A traced process's main thread exited.
    Exited { pid: u32 },
    /// Another thread of a traced process exited, named so (`comm`, NUL-padded).
    ThreadExited { pid: u32, tid: u32, comm: [u8; 16] },
}

/// Calls a replay holds out of order at most. A capture's own raw file holds none (it is
/// written in order, its gaps marked lost); a hand-made one may be shuffled within this.
pub const REPLAY_WINDOW: usize = 4096;

pub struct Pipeline<S: Sink> {
    pairing: Pairing,
    sequencer: Sequencer,
    resolver: Resolver,
    barriers: Barriers,
    /// Rows released in flight, until their call returns.
    deferred: HashMap<u64, Row>,
    /// The queues whose record came (created, or found at a first doorbell): a packet of
    /// another has no track to go on, and is counted instead.
    queues: HashSet<u64>,
    sink: S,
    pub stats: CaptureStats,
    /// The first output error; the capture stops on it, keeping what was written.
    error: Option<io::Error>,
    /// After stop: exits of calls entered while inactive are expected, not losses.
    stopping: bool,
    /// Where the capture names its threads: the threads first seen.
    new_threads: Option<NewThreads>,
}

impl<S: Sink> Pipeline<S> {
    /// `from_start`: every process is traced from its first call (`run`), so an event
    /// never recorded in the capture was never recorded.
    pub fn new(sink: S, from_start: bool) -> Self {
        Self {
            pairing: Pairing::default(),
            sequencer: Sequencer::new(),
            resolver: Resolver::new(from_start),
            barriers: Barriers::default(),
            deferred: HashMap::default(),
            queues: HashSet::default(),
            sink,
            stats: CaptureStats::default(),
            error: None,
            stopping: false,
            new_threads: None,
        }
    }

    /// Tells the threads its calls come from as each is first seen
    /// ([`Pipeline::take_new_threads`]), for the capture to read their names.
    pub fn name_threads(&mut self) {
        self.new_threads.get_or_insert_default();
    }

    /// The threads first seen since the last take (none unless [`Pipeline::name_threads`]).
    pub fn take_new_threads(&mut self) -> Vec<(u32, u32)> {
        self.new_threads
            .as_mut()
            .map(NewThreads::take)
            .unwrap_or_default()
    }

    /// Its records begin while calls are in flight (the daemon switches a running
    /// process's recording on; a flight recorder's span begins where it begins; `attach`
    /// records its targets once probed): an unmatched exit before its thread's first
    /// entry is a call begun before, not an entry lost. Not so in `run`, whose probes see
    /// every call from the command's first.
    pub fn begins_mid_call(&mut self) {
        self.pairing.follow_threads();
    }

    /// Its calls' ids start at `first`, before any record (a daemon trace that begins
    /// while the probes number other calls).
    pub fn start_at(&mut self, first: u64) {
        self.sequencer = Sequencer::starting_at(first);
    }

    /// An id the probes gave another process's call: not this pipeline's, not lost.
    pub fn skip(&mut self, correlation: u64) {
        let mut out = Vec::new();
        self.sequencer.skip(correlation, &mut |r| out.push(r));
        self.release(out);
    }

    /// One ring record. Returns what the capture loop must act on.
    pub fn record(&mut self, bytes: &[u8]) -> Option<Notice> {
        match decode(bytes) {
            Ok(Decoded::Entry(e)) => self.entry(&e),
            Ok(Decoded::Exit(x)) => self.exit(&x),
            Ok(Decoded::Queue(q)) => self.queue(&Queue::from(&q)),
            Ok(Decoded::Packet(p)) => self.packet(&Packet::from(&p)),
            Ok(Decoded::LinkMap(r)) => {
                return Some(Notice::LinkMap {
                    pid: r.pid,
                    stopped: r.stopped != 0,
                });
            }
            Ok(Decoded::Process(r)) if r.event == PROCESS_FORK => {
                return Some(Notice::Forked {
                    parent: r.pid,
                    child: r.child,
                });
            }
            Ok(Decoded::Process(r)) => return Some(Notice::Exited { pid: r.pid }),
            // The drain that read it has read the call ring too.
            Ok(Decoded::Wake) => self.stats.wakes += 1,
            // The daemon's alone (a capture sets no stall threshold): nothing of a call.
            Ok(Decoded::Stall(_)) => {}
            Ok(Decoded::Thread(r)) => {
                return Some(Notice::ThreadExited {
                    pid: r.pid,
                    tid: r.tid,
                    comm: r.comm,
                });
            }
            Err(_) => self.stats.undecodable += 1,
        }
        None
    }

    pub fn entry(&mut self, e: &EntryRecord) {
        let Some(call) = Call::entered(e) else {
            self.stats.undecodable += 1;
            // Its thread's next unmatched exit may be this call's: not one begun before.
            self.pairing.seen(e.pid, e.tid);
            return;
        };
        if let Some(t) = &mut self.new_threads {
            t.entered(call.pid, call.tid);
        }
        let at = (call.correlation, call.api);
        self.pairing
            .entered(call.pid, call.tid, at, Some(e.losses()));
        let mut out = Vec::new();
        self.sequencer.entered(call, &mut |r| out.push(r));
        self.release(out);
    }

    pub fn exit(&mut self, x: &ExitRecord) {
        let Some(api) = Api::from_u32(x.api) else {
            self.stats.undecodable += 1;
            return;
        };
        let m = self.pairing.returned(x.pid, x.tid, api, x.losses);
        let mut out = Vec::new();
        for corr in m.orphaned {
            self.stats.unpaired_entries += 1;
            self.sequencer.exit_lost(corr, &mut |r| out.push(r));
        }
        match m.correlation {
            Some(corr) => {
                let read = x.flags & EXIT_OUT_READ != 0;
                let exit = Exit {
                    exit_ns: x.exit_ns,
                    ret: x.ret,
                    out: (read && api.out_param() != OutParam::None).then_some(x.out),
                };
                if !self.sequencer.returned(corr, exit, &mut |r| out.push(r)) {
                    self.stats.unpaired_exits += 1;
                }
            }
            // Past the end, calls entered after it return: none of its.
            None if self.stopping => {}
            None if m.began_before => self.stats.calls_begun_before += 1,
            None => self.stats.unpaired_exits += 1,
        }
        self.release(out);
    }

    pub fn queue(&mut self, q: &Queue) {
        if q.created {
            self.stats.queues += 1;
        }
        if q.discovered {
            self.stats.queues_discovered += 1;
        }
        if q.created || q.discovered {
            self.queues.insert(q.queue);
        }
        let r = self.sink.queue(q);
        self.keep_first(r);
    }

    pub fn packet(&mut self, p: &Packet) {
        if !self.queues.contains(&p.queue) {
            self.stats.packets_unknown_queue += 1;
            return;
        }
        let kind = crate::calls::ingest::aql::decode(&p.bytes).kind.name();
        *self.stats.packets.entry(kind).or_default() += 1;
        self.barriers.packet(p);
        let r = self.sink.packet(p);
        self.keep_first(r);
    }

    /// Periodic: ids missing twice in a row are declared lost, letting the order move.
    pub fn tick(&mut self) {
        let mut out = Vec::new();
        self.sequencer.tick(&mut |r| out.push(r));
        self.release(out);
    }

    /// The capture was switched off in the kernel: calls entered before still complete.
    pub fn stopping(&mut self) {
        self.stopping = true;
    }

    /// The probes assigned correlation ids up to `last` (their counter at the end): ids
    /// after the last one seen are counted lost too.
    pub fn assigned_up_to(&mut self, last: u64) {
        self.sequencer.assigned_up_to(last);
    }

    /// Calls entered and not yet returned.
    pub fn open_calls(&self) -> usize {
        self.pairing.open_calls()
    }

    fn release(&mut self, items: Vec<Released>) {
        for item in items {
            let r = self.resolve(item);
            self.keep_first(r);
        }
    }

    fn resolve(&mut self, item: Released) -> io::Result<()> {
        match item {
            Released::Call(c) => {
                let mut row = self.resolver.push(&c);
                self.barriers.link(&mut row);
                self.stats.row(&row);
                self.sink.row(&row)
            }
            Released::Deferred(c) => {
                let row = self.resolver.push(&c);
                self.deferred.insert(c.correlation, row);
                self.sink.deferred(&row)
            }
            Released::Completion(corr, exit) => {
                let Some(mut row) = self.deferred.remove(&corr) else {
                    // A return whose call was never written: counted, never dropped unsaid.
                    self.stats.unpaired_exits += 1;
                    return Ok(());
                };
                exit.apply(&mut row.call);
                self.barriers.link(&mut row);
                self.stats.row(&row);
                self.sink.completed(&row)
            }
            Released::Lost(first, count) => {
                self.stats.lost_ids += count;
                self.resolver.lost(first.saturating_add(count - 1));
                self.sink.lost(first, count)
            }
            Released::Late(c) => {
                self.stats.late += 1;
                let mut row = self.resolver.push_late(&c);
                self.barriers.link(&mut row);
                self.stats.row(&row);
                self.sink.row(&row)
            }
        }
    }

    fn keep_first(&mut self, r: io::Result<()>) {
        if let Err(e) = r
            && self.error.is_none()
        {
            self.error = Some(e);
        }
    }

    /// Where rows go (read: how much is written).
    pub fn sink(&self) -> &S {
        &self.sink
    }

    pub fn sink_mut(&mut self) -> &mut S {
        &mut self.sink
    }

    /// Whether an output failed (what was written before is kept).
    pub fn failed(&self) -> bool {
        self.error.is_some()
    }

    /// The first output error, if any (the capture loop stops on it).
    pub fn take_error(&mut self) -> Option<io::Error> {
        self.error.take()
    }

    /// End of capture: everything still pending in order; calls that never returned are
    /// written in flight. Returns the sink and the account, and the first output error
    /// (what was written before it is kept).
    pub fn finish_keeping(mut self) -> (S, CaptureStats, Option<io::Error>) {
        let mut out = Vec::new();
        // A call its thread went on from without its return read: its exit record is
        // lost (however it went), counted so, never written as if still in flight.
        for corr in self.pairing.take_overtaken() {
            self.stats.unpaired_entries += 1;
            self.sequencer.exit_lost(corr, &mut |r| out.push(r));
        }
        self.sequencer.finish(&mut |r| out.push(r));
        self.release(out);
        let mut rest: Vec<Row> = self.deferred.drain().map(|(_, r)| r).collect();
        rest.sort_by_key(|r| r.call.correlation);
        for row in rest {
            self.stats.row(&row);
            let r = self.sink.completed(&row);
            self.keep_first(r);
        }
        (self.sink, self.stats, self.error)
    }

    /// [`Pipeline::finish_keeping`], failing on an output error.
    pub fn finish(self) -> io::Result<(S, CaptureStats)> {
        match self.finish_keeping() {
            (_, _, Some(e)) => Err(e),
            (sink, stats, None) => Ok((sink, stats)),
        }
    }
}
