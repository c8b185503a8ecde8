//! The trace's stream of rows: the JSON written so far, how a row, a flow and an arrow
//! are written, and what the rows have seen (their time, their threads and tracks),
//! which the metadata at the end names.

use std::{collections::BTreeSet, io::Write};

use crate::calls::emit::json::JsonBuf;

const DAY_NS: i64 = 86_400_000_000_000;
/// Arrow ids of packet→barrier and wait→barrier arrows: a range of their own.
const ARROW_FLOW_BASE: u64 = 1 << 41;

/// Where a row is: (pid, tid, ts in trace µs·1000).
pub type Position = (i64, i64, i64);

/// The rows written into a trace file.
pub(super) struct Rows<W: Write> {
    pub(super) j: JsonBuf<W>,
    first: bool,
    /// `baseTimeNanoseconds`; `ts` are relative to it.
    base: i64,
    clock_offset: i64,
    next_flow: u64,
    /// The latest time seen: stands in for the end of calls still in flight.
    pub(super) last_ns: u64,
    /// The CPU threads rows were written on.
    pub(super) threads: BTreeSet<(u32, u32)>,
    /// The device tracks rows were written on: (device or agent, track).
    pub(super) tracks: BTreeSet<(i32, i64)>,
}

impl<W: Write> Rows<W> {
    /// Writes the header. The base time is the start of the UTC day of `first_ns`
    /// (CLOCK_MONOTONIC), so `ts` stay small and exact as doubles.
    pub(super) fn start(out: W, clock_offset_ns: i64, first_ns: u64) -> Self {
        let wall = first_ns as i64 + clock_offset_ns;
        let base = wall - wall.rem_euclid(DAY_NS);
        let mut j = JsonBuf::new(out);
        j.s("{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [],\n")
            .s("  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": ")
            .i(base)
            .s(",\n  \"traceEvents\": [\n");
        Self {
            j,
            first: true,
            base,
            clock_offset: clock_offset_ns,
            next_flow: ARROW_FLOW_BASE,
            last_ns: first_ns,
            threads: BTreeSet::new(),
            tracks: BTreeSet::new(),
        }
    }

    /// Trace time (ns since the base) of a CLOCK_MONOTONIC instant; saturating, so a
    /// hostile raw file cannot overflow it.
    pub(super) fn ts(&self, mono_ns: u64) -> i64 {
        i64::try_from(mono_ns)
            .unwrap_or(i64::MAX)
            .saturating_add(self.clock_offset)
            .saturating_sub(self.base)
    }

    /// Starts the next row.
    pub(super) fn begin(&mut self) -> &mut JsonBuf<W> {
        if !self.first {
            self.j.s(",\n");
        }
        self.first = false;
        self.j.s("    ")
    }

    /// Starts a complete event (`"ph":"X"`), up to the opening of its args.
    pub(super) fn slice(
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

    pub(super) fn flow(&mut self, ph: &str, id: u64, at: Position, cat: &str) {
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
    pub(super) fn arrow(&mut self, from: Position, to: Position, cat: &str) {
        let id = self.next_flow;
        self.next_flow += 1;
        self.flow("s", id, from, cat);
        self.flow("f", id, to, cat);
    }
}
