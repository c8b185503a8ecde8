//! Kineto-compatible Chrome-trace JSON: opens in Perfetto, parsed by HTA and Chakra.
//!
//! Per call, a CPU runtime row (`cat:"cuda_runtime"`, pid/tid = OS ids) with the HIP
//! fields; per synchronisation, a CUPTI-shaped device row (`cat:"cuda_sync"`, pid = device,
//! small integer stream indices, integer `wait_on_*`), linked to its runtime row by an
//! `ac2g` flow; per resolved wait, a `hip_sync_dep` flow from the record to the wait.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    fmt::Write as _,
    io::{self, Write},
};

use rocsync_common::{Api, Backend, Op};

use crate::{
    backend::Runtime,
    resolve::{Resolved, Row, SyncKind},
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

/// Microseconds with 3 decimals, relative to `base` (ns).
struct Ts(i64);

impl std::fmt::Display for Ts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let a = self.0.unsigned_abs();
        write!(f, "{sign}{}.{:03}", a / 1000, a % 1000)
    }
}

fn hex(v: u64) -> String {
    format!("\"{v:#x}\"")
}

pub fn write(out: &mut dyn Write, resolved: &Resolved, info: &TraceInfo<'_>) -> io::Result<()> {
    let rows = &resolved.rows;
    let first = rows.iter().map(|r| r.call.enter_ns).min().unwrap_or(0) as i64;
    let last = rows
        .iter()
        .map(|r| r.call.exit_ns.unwrap_or(r.call.enter_ns))
        .max()
        .unwrap_or(0);
    // Base: the start of the capture's UTC day, so ts stay small and exact as doubles.
    let wall_first = first + info.clock_offset_ns;
    let base = wall_first - wall_first.rem_euclid(86_400_000_000_000);
    let ts = |mono: u64| Ts(mono as i64 + info.clock_offset_ns - base);

    write!(
        out,
        "{{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [],\n"
    )?;
    write!(
        out,
        "  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": {base},\n"
    )?;
    out.write_all(b"  \"traceEvents\": [\n")?;
    // Which waits each record feeds, keyed by (pid, record correlation).
    let mut feeds: HashMap<(u32, u64), Vec<u64>> = HashMap::new();
    for r in rows {
        if let Some(p) = r.producer {
            feeds
                .entry((r.call.pid, p.correlation))
                .or_default()
                .push(r.call.correlation);
        }
    }
    let mut w = Events {
        out,
        first: true,
        buf: String::with_capacity(512),
    };
    w.metadata(rows, info)?;
    for row in rows {
        let end = row.call.exit_ns.unwrap_or(last);
        let fed = feeds
            .get(&(row.call.pid, row.call.correlation))
            .map_or(&[][..], Vec::as_slice);
        w.row(
            row,
            ts(row.call.enter_ns),
            end.saturating_sub(row.call.enter_ns),
            fed,
        )?;
    }
    let out = w.out;
    // HTA finds the rank with a regex that needs the space after the colon.
    write!(out, "\n  ],\n  \"distributedInfo\": {{\"rank\": 0}},\n")?;
    writeln!(out, "  \"rocsync\": {},", info.rocsync)?;
    write!(
        out,
        "  \"traceName\": {}\n}}\n",
        serde_json::Value::from(info.trace_name)
    )
}

struct Events<'o> {
    out: &'o mut dyn Write,
    first: bool,
    buf: String,
}

impl Events<'_> {
    fn emit(&mut self) -> io::Result<()> {
        if !self.first {
            self.out.write_all(b",\n")?;
        }
        self.first = false;
        self.out.write_all(b"    ")?;
        self.out.write_all(self.buf.as_bytes())?;
        self.buf.clear();
        Ok(())
    }

    fn meta(&mut self, name: &str, pid: i64, tid: i64, key: &str, value: &str) -> io::Result<()> {
        let _ = write!(
            self.buf,
            "{{\"ph\": \"M\", \"name\": \"{name}\", \"pid\": {pid}, \"tid\": {tid}, \"args\": {{\"{key}\": {value}}}}}"
        );
        self.emit()
    }

    fn metadata(&mut self, rows: &[Row], info: &TraceInfo<'_>) -> io::Result<()> {
        let mut threads = BTreeSet::new();
        let mut devices = BTreeSet::new();
        let mut tracks = BTreeSet::new();
        for r in rows.iter().filter(|r| cpu_row(r.call.api)) {
            threads.insert((r.call.pid, r.call.tid));
            if let Some(kind) = r.sync {
                devices.insert(r.device);
                tracks.insert((r.device, sync_tid(kind, r)));
            }
        }
        let pids: BTreeSet<u32> = threads.iter().map(|t| t.0).collect();
        for pid in pids {
            let name = info
                .process_names
                .get(&pid)
                .map(String::as_str)
                .unwrap_or("process");
            let name = serde_json::Value::from(name).to_string();
            let p = pid as i64;
            self.meta("process_name", p, 0, "name", &name)?;
            self.meta("process_labels", p, 0, "labels", "\"CPU\"")?;
            self.meta("process_sort_index", p, 0, "sort_index", &p.to_string())?;
        }
        for (pid, tid) in threads {
            let (p, t) = (pid as i64, tid as i64);
            self.meta("thread_name", p, t, "name", &format!("\"thread {tid}\""))?;
            self.meta("thread_sort_index", p, t, "sort_index", &t.to_string())?;
        }
        for d in devices {
            let d = d as i64;
            self.meta("process_name", d, 0, "name", &format!("\"GPU {d}\""))?;
            self.meta("process_labels", d, 0, "labels", &format!("\"GPU {d}\""))?;
            self.meta(
                "process_sort_index",
                d,
                0,
                "sort_index",
                &(GPU_SORT_BASE + d).to_string(),
            )?;
        }
        for (d, tid) in tracks {
            let d = d as i64;
            let (name, sort) = if tid == DEVICE_TID {
                (format!("\"Device {d}\""), -1)
            } else if tid > SYNC_TID_OFFSET {
                (
                    format!("\"stream {} (sync)\"", tid - SYNC_TID_OFFSET),
                    tid - SYNC_TID_OFFSET,
                )
            } else {
                (format!("\"stream {tid} \""), tid)
            };
            self.meta("thread_name", d, tid, "name", &name)?;
            self.meta("thread_sort_index", d, tid, "sort_index", &sort.to_string())?;
        }
        Ok(())
    }

    fn row(&mut self, r: &Row, ts: Ts, dur_ns: u64, feeds: &[u64]) -> io::Result<()> {
        let c = &r.call;
        if !cpu_row(c.api) {
            return Ok(());
        }
        let dur = Ts(dur_ns as i64);
        // Flow events bind to the slice enclosing them: put them strictly inside.
        let mid = Ts(ts.0 + (dur_ns as i64) / 2);
        let (pid, tid) = (c.pid as i64, c.tid as i64);
        let b = &mut self.buf;
        let _ = write!(
            b,
            "{{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"{}\", \"pid\": {pid}, \"tid\": {tid}, \"ts\": {ts}, \"dur\": {dur}, \"args\": {{\"cid\": {}, \"correlation\": {}",
            c.api.symbol(),
            c.api as u32,
            c.correlation
        );
        match c.ret {
            Some(ret) => {
                let _ = write!(b, ", \"ret\": {ret}");
            }
            None => b.push_str(", \"in_flight\": true"),
        }
        runtime_fields(b, r, On::Runtime);
        b.push_str("}}");
        self.emit()?;
        // A record starts one arrow per wait it feeds (catapult pairs one start with one
        // end, so each arrow has its own id).
        for &wait in feeds {
            self.flow("s", DEP_FLOW_BASE | wait, pid, tid, &mid, DEP_CAT, false)?;
        }
        if let Some(kind) = r.sync {
            self.sync_row(r, kind, &ts, &dur, &mid)?;
        }
        Ok(())
    }

    /// The device-side row of a synchronisation, as CUPTI's activity would be written.
    fn sync_row(&mut self, r: &Row, kind: SyncKind, ts: &Ts, dur: &Ts, mid: &Ts) -> io::Result<()> {
        let c = &r.call;
        self.flow(
            "s",
            c.correlation,
            c.pid as i64,
            c.tid as i64,
            mid,
            "ac2g",
            false,
        )?;
        let dev = r.device as i64;
        let tid = sync_tid(kind, r);
        let stream = match kind {
            SyncKind::StreamSynchronize | SyncKind::StreamWaitEvent => r.stream_index.unwrap_or(-1),
            _ => -1,
        };
        let b = &mut self.buf;
        let _ = write!(
            b,
            "{{\"ph\": \"X\", \"cat\": \"cuda_sync\", \"name\": \"{name}\", \"pid\": {dev}, \"tid\": {tid}, \"ts\": {ts}, \"dur\": {dur}, \"args\": {{\"External id\": {corr}, \"cuda_sync_kind\": \"{name}\"",
            name = kind.cupti_name(),
            corr = c.correlation,
        );
        if kind.waits_on_event() {
            let (ws, wc) = producer_ints(r);
            let _ = write!(
                b,
                ", \"wait_on_stream\": {ws}, \"wait_on_cuda_event_record_corr_id\": {wc}, \"wait_on_cuda_event_id\": {}",
                r.event_id.unwrap_or(0)
            );
        }
        let _ = write!(
            b,
            ", \"stream\": {stream}, \"correlation\": {}, \"device\": {dev}",
            c.correlation
        );
        runtime_fields(b, r, On::Sync);
        let _ = write!(b, ", \"cid\": {}}}}}", c.api as u32);
        self.emit()?;
        self.flow("f", c.correlation, dev, tid, mid, "ac2g", true)?;
        if r.producer.is_some() {
            self.flow(
                "f",
                DEP_FLOW_BASE | c.correlation,
                dev,
                tid,
                mid,
                DEP_CAT,
                true,
            )?;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn flow(
        &mut self,
        ph: &str,
        id: u64,
        pid: i64,
        tid: i64,
        ts: &Ts,
        cat: &str,
        end: bool,
    ) -> io::Result<()> {
        let bp = if end { ", \"bp\": \"e\"" } else { "" };
        let _ = write!(
            self.buf,
            "{{\"ph\": \"{ph}\", \"id\": {id}, \"pid\": {pid}, \"tid\": {tid}, \"ts\": {ts}, \"cat\": \"{cat}\", \"name\": \"{cat}\"{bp}}}"
        );
        self.emit()
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

/// Which row runtime fields go on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum On {
    Runtime,
    Sync,
}

/// The runtime's own fields (`hip_*` or `cuda_*`): handles as `"0x…"` strings, the
/// producer as integers. On a sync row, fields CUPTI's layout already has are not repeated.
fn runtime_fields(b: &mut String, r: &Row, on: On) {
    let c = &r.call;
    let backend = c.api.backend();
    let p = Runtime::of(backend).field_prefix;
    let cuda = backend == Backend::Cuda;
    if let Some(kind) = r.sync
        && !(cuda && on == On::Sync)
    {
        let name = if cuda {
            kind.cupti_name()
        } else {
            kind.hip_name()
        };
        let _ = write!(b, ", \"{p}_sync_kind\": \"{name}\"");
    }
    if let Some(e) = c.arg("event") {
        let _ = write!(b, ", \"{p}_event\": {}", hex(e));
    }
    if let Some(s) = c.arg("stream") {
        let _ = write!(b, ", \"{p}_stream\": {}", hex(s));
    }
    let Some(e) = c
        .arg("event")
        .filter(|_| r.sync.is_some_and(SyncKind::waits_on_event))
    else {
        return;
    };
    let (ws, wc) = producer_ints(r);
    if on == On::Runtime {
        let _ = write!(b, ", \"wait_on_stream\": {ws}");
    }
    if on == On::Runtime || !cuda {
        // CUDA names the event by its id, as CUPTI does; HIP by its handle.
        let id = if cuda {
            r.event_id.unwrap_or(0).to_string()
        } else {
            hex(e)
        };
        let _ = write!(
            b,
            ", \"wait_on_{p}_event_id\": {id}, \"wait_on_{p}_event_record_corr_id\": {wc}"
        );
    }
}
