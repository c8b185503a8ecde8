//! Raw JSON Lines: the capture as the pipeline resolved it, in the same order, so that
//! `rocsync convert` replays it through the same stages into the same trace.
//!
//! The first line is a header (`{"rocsync_raw": {...}}`); then one object per line:
//! a call (`{"api": …}`; `exit_ns`/`ret` null while in flight, `"deferred": true` when it
//! was released in flight, `"filtered"`/`"late"` flags), a deferred call's return
//! (`{"completion": {…}}`), lost correlation ids (`{"lost": FIRST, "count": N}`), an HSA queue
//! (`{"queue": {…}}`) or packet (`{"packet": {…}}`); the last line is a trailer with what
//! only the end knows (`{"rocsync_raw_end": {…}}`). `format` defines every line.

mod ends;
mod fields;
mod format;
mod read;
#[cfg(test)]
mod tests;

use std::io::{self, Write};

use serde::Serialize;

use super::Sink;
use crate::calls::{
    ingest::{Packet, Queue},
    resolve::Row,
};
use format::{
    COMPLETION, CallLine, CompletionBody, HEADER, HeaderBody, LostLine, PACKET, PacketBody, QUEUE,
    QueueBody, TRAILER, Tagged, TrailerBody,
};

pub use ends::{Header, Trailer};
pub use read::{Item, Reader, read_calls};

/// The key of a raw capture's first line (its header).
pub const HEADER_KEY: &str = HEADER;

/// Writes the raw capture as the pipeline delivers it.
pub struct RawWriter<W: Write> {
    out: W,
}

impl<W: Write> RawWriter<W> {
    pub fn new(mut out: W, h: &Header) -> io::Result<Self> {
        let body = HeaderBody {
            clock_offset_ns: h.clock_offset_ns,
            command: h.command.clone(),
            from_start: h.from_start,
            start_ns: h.start_ns,
            version: env!("CARGO_PKG_VERSION").into(),
        };
        line(&mut out, &Tagged(HEADER, &body))?;
        Ok(Self { out })
    }

    pub fn finish(mut self, t: &Trailer) -> io::Result<W> {
        let k = &t.kernel;
        let body = TrailerBody {
            entry_records: k.entries,
            exit_records: k.exits,
            get_device_calls_not_recorded: k.get_device_unrecorded,
            library_loads: k.library_loads,
            out_params: k.out_params,
            comm_state: k.comm_state,
            thread_names: k.thread_names,
            packet_records: k.packets,
            packets_truncated: k.packets_truncated,
            packets_unread: k.packets_unread,
            processes: t.processes.clone(),
            queue_records: k.queues,
            undecodable: t.undecodable,
            unpaired_entries: t.unpaired_entries,
            unpaired_exits: t.unpaired_exits,
            calls_begun_before: t.calls_begun_before,
        };
        line(&mut self.out, &Tagged(TRAILER, &body))?;
        Ok(self.out)
    }
}

impl<W: Write> Sink for RawWriter<W> {
    fn row(&mut self, row: &Row) -> io::Result<()> {
        line(&mut self.out, &CallLine::new(&row.call, row.late, false))
    }

    fn deferred(&mut self, row: &Row) -> io::Result<()> {
        line(&mut self.out, &CallLine::new(&row.call, row.late, true))
    }

    fn completed(&mut self, row: &Row) -> io::Result<()> {
        let c = &row.call;
        match (c.exit_ns, c.ret) {
            (Some(exit_ns), Some(ret)) => {
                let body = CompletionBody {
                    correlation: c.correlation,
                    exit_ns,
                    ret,
                };
                line(&mut self.out, &Tagged(COMPLETION, &body))
            }
            // Never returned: its line already says so.
            _ => Ok(()),
        }
    }

    fn lost(&mut self, first: u64, count: u64) -> io::Result<()> {
        line(&mut self.out, &LostLine { lost: first, count })
    }

    fn queue(&mut self, q: &Queue) -> io::Result<()> {
        line(&mut self.out, &Tagged(QUEUE, &QueueBody::from(q)))
    }

    fn packet(&mut self, p: &Packet) -> io::Result<()> {
        line(&mut self.out, &Tagged(PACKET, &PacketBody::from(p)))
    }
}

fn line(mut out: impl Write, v: &impl Serialize) -> io::Result<()> {
    serde_json::to_writer(&mut out, v)?;
    out.write_all(b"\n")
}
