//! Kineto-compatible Chrome-trace JSON: opens in Perfetto, parsed by HTA and Chakra.
//!
//! Per call, a CPU runtime row (`cat:"cuda_runtime"`, pid/tid = OS ids) with the runtime's
//! fields; per synchronisation, a CUPTI-shaped device row (`cat:"cuda_sync"`, pid =
//! device, small integer stream indices, integer `wait_on_*`), linked to its runtime row
//! by an `ac2g` flow; per resolved wait, a `hip_sync_dep` flow from the record to the
//! wait. Rows are written as they come (the writer streams); process and thread metadata
//! follow them.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    io::{self, Write},
};

use rocsync_common::{Api, Backend, Op, PacketRecord, QueueRecord};

use super::{
    json::JsonBuf,
    packet::{self, PacketType},
};
use crate::{
    backend::Runtime,
    resolve::{Resolved, Row, SyncKind},
    trace::call::Call,
};

/// Stream Sync rows get their own track, as Kineto does, so they never overlap the
/// stream's other rows.
const SYNC_TID_OFFSET: i64 = 1_000_000;
/// Track of device-wide rows (Event Sync, Context Sync). Not 1, as Kineto's CUDA side
/// writes it: ROCm stream indices start at 1.
const DEVICE_TID: i64 = 2_000_000;
/// GPU processes sort after CPU ones (Kineto's kExceedMaxPid).
const GPU_SORT_BASE: i64 = 5_000_000;
/// Record→wait flow ids: disjoint from the `ac2g` ids (correlations), below 2^53.
const DEP_FLOW_BASE: u64 = 1 << 40;
const DEP_CAT: &str = "hip_sync_dep";
const DAY_NS: i64 = 86_400_000_000_000;
/// HSA queue tracks on a GPU process: beside stream, sync and device tracks.
const QUEUE_TID_BASE: i64 = 3_000_000;
/// Packet→barrier flow ids: a range of their own.
const PACKET_FLOW_BASE: u64 = 1 << 41;
const PACKET_DEP_CAT: &str = "hsa_dep";
/// API-level wait → the barrier packet it submitted.
const CALL_PACKET_CAT: &str = "hip_barrier";

/// Where a row is: (pid, tid, ts in trace µs·1000).
pub type Position = (i64, i64, i64);

/// What the trace says about the capture besides its rows.
pub struct TraceInfo<'a> {
    /// CLOCK_REALTIME − CLOCK_MONOTONIC, ns.
    pub clock_offset_ns: i64,
    /// Process names by pid (for `process_name` rows).
    pub process_names: &'a BTreeMap<u32, String>,
    /// The `rocsync` object: version, command line, parameters, drops, counts.
    pub rocsync: serde_json::Value,
    pub trace_name: &'a str,
}

/// Writes a whole resolved capture.
pub fn write(out: &mut dyn Write, resolved: &Resolved, info: &TraceInfo<'_>) -> io::Result<()> {
    let rows = &resolved.rows;
    let first = rows.iter().map(|r| r.call.enter_ns).min().unwrap_or(0);
    let last = rows
        .iter()
        .map(|r| r.call.exit_ns.unwrap_or(r.call.enter_ns))
        .max()
        .unwrap_or(0);
    let mut w = KinetoWriter::new(out, info.clock_offset_ns, first)?;
    for row in rows {
        w.row(row, last)?;
    }
    w.finish(info)?;
    Ok(())
}

/// Streams rows into a trace file.
pub struct KinetoWriter<W: Write> {
    j: JsonBuf<W>,
    first: bool,
    /// `baseTimeNanoseconds`; `ts` are relative to it.
    base: i64,
    clock_offset: i64,
    threads: BTreeSet<(u32, u32)>,
    tracks: BTreeSet<(i32, i64)>,
    /// Queue → (agent ordinal, track).
    queues: HashMap<u64, (i32, i64)>,
    /// Completion signal → the packet that signals it (pid, tid, ts), for barrier arrows.
    producers: HashMap<u64, (i64, i64, i64)>,
    next_flow: u64,
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
            tracks: BTreeSet::new(),
            queues: HashMap::new(),
            producers: HashMap::new(),
            next_flow: PACKET_FLOW_BASE,
        })
    }

    fn ts(&self, mono_ns: u64) -> i64 {
        mono_ns as i64 + self.clock_offset - self.base
    }

    fn begin(&mut self) -> &mut JsonBuf<W> {
        if !self.first {
            self.j.s(",\n");
        }
        self.first = false;
        self.j.s("    ")
    }

    /// Writes one call: its runtime row and, for synchronisations, the device row and the
    /// arrows. `end_ns` stands in for the exit of a call still in flight.
    pub fn row(&mut self, r: &Row, end_ns: u64) -> io::Result<()> {
        let c = &r.call;
        if !cpu_row(c.api) {
            return Ok(());
        }
        self.threads.insert((c.pid, c.tid));
        let end = c.exit_ns.unwrap_or(end_ns.max(c.enter_ns));
        let dur = (end - c.enter_ns) as i64;
        let ts = self.ts(c.enter_ns);
        // Flow events bind to the slice enclosing them: put them strictly inside.
        let mid = ts + dur / 2;
        let (pid, tid) = (c.pid as i64, c.tid as i64);
        let j = self.slice("cuda_runtime", c.api.symbol(), pid, tid, ts, dur);
        j.s("\"cid\":")
            .u(c.api as u64)
            .s(",\"correlation\":")
            .u(c.correlation);
        match c.ret {
            Some(ret) => j.s(",\"ret\":").i(ret),
            None => j.s(",\"in_flight\":true"),
        };
        runtime_fields(j, r);
        j.s("}}");
        if let Some(p) = r.producer {
            // The record side of the arrow, on the record's own slice.
            let at = self.ts(p.mid_ns);
            self.flow(
                "s",
                DEP_FLOW_BASE | c.correlation,
                pid,
                p.tid as i64,
                at,
                DEP_CAT,
            );
        }
        if let Some(kind) = r.sync {
            self.sync_row(r, kind, ts, dur, mid);
        }
        self.j.end()
    }

    /// A queue created: it gets a track on its agent's process (the probes number the
    /// agents).
    pub fn queue(&mut self, q: &QueueRecord) {
        if q.created == 0 || self.queues.contains_key(&q.queue) {
            return;
        }
        let agent = q.ordinal as i32;
        let n = self.queues.values().filter(|(a, _)| *a == agent).count() as i64;
        self.queues.insert(q.queue, (agent, QUEUE_TID_BASE + n));
    }

    /// One published AQL packet: a row on its agent's queue track, and an arrow from the
    /// packet whose completion signal a barrier waits on. Returns where the row is, and
    /// whether it is a barrier.
    pub fn packet(&mut self, r: &PacketRecord) -> io::Result<Option<(Position, bool)>> {
        let Some(&(agent, tid)) = self.queues.get(&r.queue) else {
            return Ok(None);
        };
        let p = packet::decode(&r.packet);
        let pid = agent as i64;
        let ts = self.ts(r.ns);
        self.tracks.insert((agent, tid));
        let j = self.slice("hsa_packet", p.kind.name(), pid, tid, ts, 0);
        j.s("\"agent\":")
            .i(pid)
            .s(",\"queue\":")
            .hex(r.queue)
            .s(",\"write_index\":")
            .u(r.index)
            .s(",\"packet_type\":\"")
            .s(p.kind.name())
            .s("\"");
        if p.kind == PacketType::KernelDispatch {
            j.s(",\"grid\":[")
                .u(p.grid[0] as u64)
                .s(",")
                .u(p.grid[1] as u64)
                .s(",")
                .u(p.grid[2] as u64);
            j.s("],\"workgroup\":[")
                .u(p.workgroup[0] as u64)
                .s(",")
                .u(p.workgroup[1] as u64);
            j.s(",")
                .u(p.workgroup[2] as u64)
                .s("],\"kernel_object\":")
                .hex(p.kernel_object);
            j.s(",\"kernarg_address\":").hex(p.kernarg_address);
        }
        if !p.deps.is_empty() {
            j.s(",\"dep_signals\":[");
            for (i, d) in p.deps.iter().enumerate() {
                if i > 0 {
                    j.s(",");
                }
                j.hex(*d);
            }
            j.s("]");
        }
        if p.completion_signal != 0 {
            j.s(",\"completion_signal\":").hex(p.completion_signal);
        }
        j.s("}}");
        for d in &p.deps {
            if let Some(&(sp, st, sts)) = self.producers.get(d) {
                let id = self.next_flow;
                self.next_flow += 1;
                self.flow("s", id, sp, st, sts, PACKET_DEP_CAT);
                self.flow("f", id, pid, tid, ts, PACKET_DEP_CAT);
            }
        }
        if p.completion_signal != 0 {
            self.producers.insert(p.completion_signal, (pid, tid, ts));
        }
        self.j.end()?;
        let barrier = matches!(p.kind, PacketType::BarrierAnd | PacketType::BarrierOr);
        Ok(Some(((pid, tid, ts), barrier)))
    }

    /// An arrow from a call's runtime row to a packet row (the barrier a wait submitted).
    pub fn link(&mut self, c: &Call, end_ns: u64, to: Position) -> io::Result<()> {
        let end = c.exit_ns.unwrap_or(end_ns.max(c.enter_ns));
        let mid = self.ts(c.enter_ns) + (end - c.enter_ns) as i64 / 2;
        let id = self.next_flow;
        self.next_flow += 1;
        self.flow("s", id, c.pid as i64, c.tid as i64, mid, CALL_PACKET_CAT);
        self.flow("f", id, to.0, to.1, to.2, CALL_PACKET_CAT);
        self.j.end()
    }

    /// The device-side row of a synchronisation, as CUPTI's activity would be written.
    fn sync_row(&mut self, r: &Row, kind: SyncKind, ts: i64, dur: i64, mid: i64) {
        let c = &r.call;
        self.flow("s", c.correlation, c.pid as i64, c.tid as i64, mid, "ac2g");
        let dev = r.device;
        let tid = sync_tid(kind, r);
        self.tracks.insert((dev, tid));
        let stream = match kind {
            SyncKind::StreamSynchronize | SyncKind::StreamWaitEvent => r.stream_index.unwrap_or(-1),
            _ => -1,
        };
        let name = kind.cupti_name();
        let j = self.slice("cuda_sync", name, dev as i64, tid, ts, dur);
        j.s("\"External id\":")
            .u(c.correlation)
            .s(",\"cuda_sync_kind\":\"")
            .s(name)
            .s("\"");
        if kind.waits_on_event() {
            let (ws, wc) = producer_ints(r);
            j.s(",\"wait_on_stream\":")
                .i(ws)
                .s(",\"wait_on_cuda_event_record_corr_id\":")
                .i(wc)
                .s(",\"wait_on_cuda_event_id\":")
                .u(r.event_id.unwrap_or(0));
        }
        j.s(",\"stream\":")
            .i(stream)
            .s(",\"correlation\":")
            .u(c.correlation)
            .s(",\"device\":")
            .i(dev as i64);
        j.s("}}");
        self.flow("f", c.correlation, dev as i64, tid, mid, "ac2g");
        if r.producer.is_some() {
            self.flow(
                "f",
                DEP_FLOW_BASE | c.correlation,
                dev as i64,
                tid,
                mid,
                DEP_CAT,
            );
        }
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

    fn flow(&mut self, ph: &str, id: u64, pid: i64, tid: i64, ts: i64, cat: &str) {
        let j = self.begin();
        j.s("{\"ph\":\"")
            .s(ph)
            .s("\",\"id\":")
            .u(id)
            .s(",\"pid\":")
            .i(pid)
            .s(",\"tid\":")
            .i(tid)
            .s(",\"ts\":")
            .us(ts)
            .s(",\"cat\":\"")
            .s(cat)
            .s("\",\"name\":\"")
            .s(cat)
            .s(if ph == "f" { "\",\"bp\":\"e\"}" } else { "\"}" });
    }

    fn meta(&mut self, name: &str, pid: i64, tid: i64, key: &str) -> &mut JsonBuf<W> {
        let j = self.begin();
        j.s("{\"ph\":\"M\",\"name\":\"")
            .s(name)
            .s("\",\"pid\":")
            .i(pid)
            .s(",\"tid\":")
            .i(tid)
            .s(",\"args\":{\"")
            .s(key)
            .s("\":")
    }

    /// Writes the process and thread metadata and the closing keys.
    pub fn finish(mut self, info: &TraceInfo<'_>) -> io::Result<W> {
        let pids: BTreeSet<u32> = self.threads.iter().map(|t| t.0).collect();
        for pid in pids {
            let name = info
                .process_names
                .get(&pid)
                .map(String::as_str)
                .unwrap_or("process");
            let p = pid as i64;
            self.meta("process_name", p, 0, "name").string(name).s("}}");
            self.meta("process_labels", p, 0, "labels").s("\"CPU\"}}");
            self.meta("process_sort_index", p, 0, "sort_index")
                .i(p)
                .s("}}");
        }
        for (pid, tid) in std::mem::take(&mut self.threads) {
            let (p, t) = (pid as i64, tid as i64);
            self.meta("thread_name", p, t, "name")
                .s("\"thread ")
                .i(t)
                .s("\"}}");
            self.meta("thread_sort_index", p, t, "sort_index")
                .i(t)
                .s("}}");
        }
        let devices: BTreeSet<i32> = self.tracks.iter().map(|t| t.0).collect();
        for d in devices {
            let d = d as i64;
            self.meta("process_name", d, 0, "name")
                .s("\"GPU ")
                .i(d)
                .s("\"}}");
            self.meta("process_labels", d, 0, "labels")
                .s("\"GPU ")
                .i(d)
                .s("\"}}");
            self.meta("process_sort_index", d, 0, "sort_index")
                .i(GPU_SORT_BASE + d)
                .s("}}");
        }
        for (d, tid) in std::mem::take(&mut self.tracks) {
            let d = d as i64;
            let j = self.meta("thread_name", d, tid, "name");
            let sort = if tid >= QUEUE_TID_BASE {
                j.s("\"HSA queue ").i(tid - QUEUE_TID_BASE).s("\"}}");
                tid
            } else if tid == DEVICE_TID {
                j.s("\"Device ").i(d).s("\"}}");
                -1
            } else if tid > SYNC_TID_OFFSET {
                j.s("\"stream ").i(tid - SYNC_TID_OFFSET).s(" (sync)\"}}");
                tid - SYNC_TID_OFFSET
            } else {
                j.s("\"stream ").i(tid).s(" \"}}");
                tid
            };
            self.meta("thread_sort_index", d, tid, "sort_index")
                .i(sort)
                .s("}}");
        }
        // HTA finds the rank with a regex that needs the space after the colon.
        self.j
            .s("\n  ],\n  \"distributedInfo\": {\"rank\": 0},\n  \"rocsync\": ")
            .s(&info.rocsync.to_string())
            .s(",\n  \"traceName\": ")
            .string(info.trace_name)
            .s("\n}\n");
        self.j.flush()?;
        Ok(self.j.out)
    }
}

/// Kineto leaves device selection out of traces; so does rocsync.
fn cpu_row(api: Api) -> bool {
    !matches!(api.op(), Op::SetDevice | Op::GetDevice)
}

/// `wait_on_stream` and the record's correlation, −1 each when unresolved (as CUPTI).
fn producer_ints(r: &Row) -> (i64, i64) {
    r.producer
        .map_or((-1, -1), |p| (p.stream_index, p.correlation as i64))
}

fn sync_tid(kind: SyncKind, r: &Row) -> i64 {
    match kind {
        SyncKind::StreamWaitEvent => r.stream_index.unwrap_or(DEVICE_TID),
        SyncKind::StreamSynchronize => r.stream_index.map_or(DEVICE_TID, |i| i + SYNC_TID_OFFSET),
        SyncKind::EventSynchronize | SyncKind::DeviceSynchronize => DEVICE_TID,
    }
}

/// The runtime's own fields (`hip_*` or `cuda_*`) on the runtime row: handles as `"0x…"`
/// strings, the producer as integers. The device row keeps to CUPTI's layout.
fn runtime_fields<W: Write>(j: &mut JsonBuf<W>, r: &Row) {
    let c = &r.call;
    let backend = c.api.backend();
    let p = Runtime::of(backend).field_prefix;
    let cuda = backend == Backend::Cuda;
    if let Some(kind) = r.sync {
        let name = if cuda {
            kind.cupti_name()
        } else {
            kind.hip_name()
        };
        j.s(",\"").s(p).s("_sync_kind\":\"").s(name).s("\"");
    }
    let event = c.event();
    if let Some(e) = event {
        j.s(",\"").s(p).s("_event\":").hex(e);
    }
    if let Some(s) = c.stream() {
        j.s(",\"").s(p).s("_stream\":").hex(s);
    }
    let Some(e) = event.filter(|_| r.sync.is_some_and(SyncKind::waits_on_event)) else {
        return;
    };
    let (ws, wc) = producer_ints(r);
    j.s(",\"wait_on_stream\":")
        .i(ws)
        .s(",\"wait_on_")
        .s(p)
        .s("_event_id\":");
    // CUDA names the event by its id, as CUPTI does; HIP by its handle.
    if cuda {
        j.u(r.event_id.unwrap_or(0));
    } else {
        j.hex(e);
    }
    j.s(",\"wait_on_").s(p).s("_event_record_corr_id\":").i(wc);
}
