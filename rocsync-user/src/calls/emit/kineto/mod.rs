//! Kineto-compatible Chrome-trace JSON: opens in Perfetto, parsed by HTA and Chakra.
//!
//! Per call, a CPU runtime row (`cat:"cuda_runtime"`, pid/tid = OS ids) with the runtime's
//! fields; per synchronisation, a CUPTI-shaped device row (`cat:"cuda_sync"`, pid =
//! device, small integer stream indices, integer `wait_on_*`), linked to its runtime row
//! by an `ac2g` flow; per resolved wait, a `hip_sync_dep` flow from the record to the
//! wait ([`calls`]). Per HSA packet, a row on its queue's track with its arrows
//! ([`packets`]). Rows are written as they come (the writer streams); process and thread
//! metadata follow them.

mod calls;
pub(crate) mod collectives;
mod meta;
mod packets;

pub(crate) use calls::{DEVICE_TID, SYNC_TID_OFFSET};

use std::{
    collections::{BTreeMap, BTreeSet},
    io::{self, Write},
};

use rustc_hash::FxHashMap as HashMap;

use super::{Sink, json::JsonBuf};
use crate::calls::{
    ingest::{Packet, Queue},
    resolve::Row,
};

const DAY_NS: i64 = 86_400_000_000_000;

/// Where a row is: (pid, tid, ts in trace µs·1000).
pub type Position = (i64, i64, i64);

/// What the trace says about the capture besides its rows.
pub struct TraceInfo<'a> {
    /// Process names by pid (for `process_name` rows).
    pub process_names: &'a BTreeMap<u32, String>,
    /// The `rocsync` object: version, command line, parameters, counts and drops.
    pub rocsync: serde_json::Value,
    /// The `distributedInfo` object (HTA reads the rank from it).
    pub distributed: serde_json::Value,
    pub trace_name: &'a str,
}

/// Streams rows into a trace file.
pub struct KinetoWriter<W: Write> {
    j: JsonBuf<W>,
    first: bool,
    /// `baseTimeNanoseconds`; `ts` are relative to it.
    base: i64,
    clock_offset: i64,
    threads: BTreeSet<(u32, u32)>,
    /// Threads' names as the kernel had them when rocsync first saw each (`comm`).
    thread_names: BTreeMap<(u32, u32), String>,
    tracks: BTreeSet<(i32, i64)>,
    /// Queue → (agent ordinal, track).
    queues: HashMap<u64, (i32, i64)>,
    /// Completion signal → the packet that signals it, for barrier arrows.
    signal_producers: HashMap<u64, Position>,
    next_flow: u64,
    /// The latest time seen: stands in for the end of calls still in flight.
    last_ns: u64,
    /// NCCL communicators, for their calls' rows.
    pub(crate) comms: collectives::Comms,
}

impl<W: Write> KinetoWriter<W> {
    /// Writes the header. The base time is the start of the UTC day of `first_ns`
    /// (CLOCK_MONOTONIC), so `ts` stay small and exact as doubles.
    pub fn new(out: W, clock_offset_ns: i64, first_ns: u64) -> io::Result<Self> {
        let wall = first_ns as i64 + clock_offset_ns;
        let base = wall - wall.rem_euclid(DAY_NS);
        let mut j = JsonBuf::new(out);
        j.s("{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [],\n")
            .s("  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": ")
            .i(base)
            .s(",\n  \"traceEvents\": [\n");
        Ok(Self {
            j,
            first: true,
            base,
            clock_offset: clock_offset_ns,
            threads: BTreeSet::new(),
            thread_names: BTreeMap::new(),
            tracks: BTreeSet::new(),
            queues: HashMap::default(),
            signal_producers: HashMap::default(),
            next_flow: packets::PACKET_FLOW_BASE,
            last_ns: first_ns,
            comms: collectives::Comms::default(),
        })
    }

    /// Names the threads' tracks (`thread_name`) as the kernel named them; a thread not
    /// named here is `thread TID`.
    pub fn name_threads(&mut self, names: impl IntoIterator<Item = ((u32, u32), String)>) {
        self.thread_names.extend(names);
    }

    /// Bytes of the trace so far (before any compression).
    pub fn bytes(&self) -> u64 {
        self.j.bytes()
    }

    /// Trace time (ns since the base) of a CLOCK_MONOTONIC instant; saturating, so a
    /// hostile raw file cannot overflow it.
    fn ts(&self, mono_ns: u64) -> i64 {
        i64::try_from(mono_ns)
            .unwrap_or(i64::MAX)
            .saturating_add(self.clock_offset)
            .saturating_sub(self.base)
    }

    /// Trace time in µs (as rows' `ts`) of a CLOCK_MONOTONIC instant.
    pub fn trace_us(&self, mono_ns: u64) -> f64 {
        self.ts(mono_ns) as f64 / 1e3
    }

    /// Writes rows made elsewhere, whole (a blocked thread's stack: `stacks::rows`).
    pub fn raw_rows(&mut self, rows: &[serde_json::Value]) {
        for row in rows {
            let text = row.to_string();
            self.begin().s(&text);
        }
    }

    fn begin(&mut self) -> &mut JsonBuf<W> {
        if !self.first {
            self.j.s(",\n");
        }
        self.first = false;
        self.j.s("    ")
    }

    /// Starts a complete event (`"ph":"X"`), up to the opening of its args.
    fn slice(
        &mut self,
        cat: &str,
        name: &str,
        pid: i64,
        tid: i64,
        ts: i64,
        dur: i64,
    ) -> &mut JsonBuf<W> {
        let j = self.begin();
        j.s("{\"ph\":\"X\",\"cat\":\"")
            .s(cat)
            .s("\",\"name\":\"")
            .s(name)
            .s("\",\"pid\":")
            .i(pid)
            .s(",\"tid\":")
            .i(tid)
            .s(",\"ts\":")
            .us(ts)
            .s(",\"dur\":")
            .us(dur)
            .s(",\"args\":{")
    }

    fn flow(&mut self, ph: &str, id: u64, at: Position, cat: &str) {
        let j = self.begin();
        j.s("{\"ph\":\"")
            .s(ph)
            .s("\",\"id\":")
            .u(id)
            .s(",\"pid\":")
            .i(at.0)
            .s(",\"tid\":")
            .i(at.1)
            .s(",\"ts\":")
            .us(at.2)
            .s(",\"cat\":\"")
            .s(cat)
            .s("\",\"name\":\"")
            .s(cat)
            .s(if ph == "f" { "\",\"bp\":\"e\"}" } else { "\"}" });
    }

    /// An arrow between two rows, with an id of the packet range.
    fn arrow(&mut self, from: Position, to: Position, cat: &str) {
        let id = self.next_flow;
        self.next_flow += 1;
        self.flow("s", id, from, cat);
        self.flow("f", id, to, cat);
    }
}

impl<W: Write> Sink for KinetoWriter<W> {
    fn row(&mut self, row: &Row) -> io::Result<()> {
        self.call_row(row)
    }

    /// Written once complete: a row's duration needs its end.
    fn deferred(&mut self, _row: &Row) -> io::Result<()> {
        Ok(())
    }

    fn completed(&mut self, row: &Row) -> io::Result<()> {
        self.call_row(row)
    }

    fn lost(&mut self, _first: u64, _count: u64) -> io::Result<()> {
        Ok(())
    }

    fn queue(&mut self, q: &Queue) -> io::Result<()> {
        self.queue_track(q);
        Ok(())
    }

    fn packet(&mut self, p: &Packet) -> io::Result<()> {
        self.packet_row(p)
    }
}
