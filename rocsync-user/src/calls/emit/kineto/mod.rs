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
mod rows;

pub(crate) use calls::{DEVICE_TID, SYNC_TID_OFFSET};
pub use meta::TraceInfo;
pub use rows::Position;

use std::{
    collections::BTreeMap,
    io::{self, Write},
};

use super::{Sink, comms::Comms};
use crate::calls::{
    ingest::{Packet, Queue},
    resolve::Row,
};
use packets::Queues;
use rows::Rows;

/// Streams rows into a trace file.
pub struct KinetoWriter<W: Write> {
    rows: Rows<W>,
    /// Threads' names as the kernel had them when rocsync first saw each (`comm`).
    thread_names: BTreeMap<(u32, u32), String>,
    queues: Queues,
    /// NCCL communicators, for their calls' rows.
    pub(crate) comms: Comms,
}

impl<W: Write> KinetoWriter<W> {
    /// Writes the header. The base time is the start of the UTC day of `first_ns`
    /// (CLOCK_MONOTONIC), so `ts` stay small and exact as doubles.
    pub fn new(out: W, clock_offset_ns: i64, first_ns: u64) -> io::Result<Self> {
        Ok(Self {
            rows: Rows::start(out, clock_offset_ns, first_ns),
            thread_names: BTreeMap::new(),
            queues: Queues::default(),
            comms: Comms::default(),
        })
    }

    /// Names the threads' tracks (`thread_name`) as the kernel named them; a thread not
    /// named here is `thread TID`.
    pub fn name_threads(&mut self, names: impl IntoIterator<Item = ((u32, u32), String)>) {
        self.thread_names.extend(names);
    }

    /// Bytes of the trace so far (before any compression).
    pub fn bytes(&self) -> u64 {
        self.rows.j.bytes()
    }

    /// Trace time in µs (as rows' `ts`) of a CLOCK_MONOTONIC instant.
    pub fn trace_us(&self, mono_ns: u64) -> f64 {
        self.rows.ts(mono_ns) as f64 / 1e3
    }

    /// Writes rows made elsewhere, whole (a blocked thread's stack: `stacks::rows`).
    pub fn raw_rows(&mut self, rows: &[serde_json::Value]) {
        for row in rows {
            let text = row.to_string();
            self.rows.begin().s(&text);
        }
    }

    /// Writes the process and thread metadata and the closing keys.
    pub fn finish(self, info: &TraceInfo<'_>) -> io::Result<W> {
        meta::finish(self.rows, self.thread_names, &self.comms, info)
    }

    fn call_row(&mut self, r: &Row) -> io::Result<()> {
        calls::row(&mut self.rows, &self.queues, &mut self.comms, r)
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
        self.queues.track(q);
        Ok(())
    }

    fn packet(&mut self, p: &Packet) -> io::Result<()> {
        self.queues.row(&mut self.rows, p)
    }
}
