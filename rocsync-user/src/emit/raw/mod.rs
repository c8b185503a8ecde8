//! Raw JSON Lines: the capture as the pipeline resolved it, in the same order, so that
//! `rocsync convert` replays it through the same stages into the same trace.
//!
//! The first line is a header (`{"rocsync_raw": {...}}`); then one object per line:
//! a call (`{"api": …}`; `exit_ns`/`ret` null while in flight, `"deferred": true` when it
//! was released in flight, `"filtered"`/`"late"` flags), a deferred call's return
//! (`{"completion": {…}}`), lost correlation ids (`{"lost": FIRST, "count": N}`), an HSA queue
//! (`{"queue": {…}}`) or packet (`{"packet": {…}}`); the last line is a trailer with what
//! only the end knows (`{"rocsync_raw_end": {…}}`).

mod read;
#[cfg(test)]
mod tests;

use std::io::{self, Write};

use serde_json::json;

use super::Sink;
use crate::{
    ingest::{Call, Packet, Queue, model::ArgKind, model::arg_kind},
    resolve::Row,
    stats::KernelDrops,
};

pub use read::{Item, Reader, read_calls};

/// Capture facts a conversion needs besides the calls.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Header {
    /// CLOCK_REALTIME − CLOCK_MONOTONIC at capture start, ns.
    pub clock_offset_ns: i64,
    /// CLOCK_MONOTONIC at capture start, ns (the trace's base time derives from it).
    pub start_ns: u64,
    pub command: Vec<String>,
    /// Every process was traced from its start (`run`), not attached to.
    pub from_start: bool,
}

/// What only the end of a capture knows: losses the stages before resolution counted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trailer {
    pub kernel: KernelDrops,
    pub unpaired_entries: u64,
    pub unpaired_exits: u64,
    pub undecodable: u64,
    /// What each traced process said of itself, by pid (an object; null when unknown).
    pub processes: serde_json::Value,
}

/// Writes the raw capture as the pipeline delivers it.
pub struct RawWriter<W: Write> {
    out: W,
}

impl<W: Write> RawWriter<W> {
    pub fn new(mut out: W, h: &Header) -> io::Result<Self> {
        let v = json!({ "rocsync_raw": {
            "version": env!("CARGO_PKG_VERSION"),
            "clock_offset_ns": h.clock_offset_ns,
            "start_ns": h.start_ns,
            "command": h.command,
            "from_start": h.from_start,
        }});
        writeln!(out, "{v}")?;
        Ok(Self { out })
    }

    pub fn finish(mut self, t: &Trailer) -> io::Result<W> {
        let k = &t.kernel;
        let v = json!({ "rocsync_raw_end": {
            "entry_records": k.entries, "exit_records": k.exits, "queue_records": k.queues,
            "packet_records": k.packets, "library_loads": k.library_loads,
            "packets_truncated": k.packets_truncated, "out_params": k.out_params,
            "packets_unread": k.packets_unread,
            "get_device_calls_not_recorded": k.get_device_unrecorded,
            "unpaired_entries": t.unpaired_entries, "unpaired_exits": t.unpaired_exits,
            "undecodable": t.undecodable, "processes": t.processes,
        }});
        writeln!(self.out, "{v}")?;
        Ok(self.out)
    }

    fn call(&mut self, c: &Call, extra: &str) -> io::Result<()> {
        write_call(&mut self.out, c, extra)
    }
}

impl<W: Write> Sink for RawWriter<W> {
    fn row(&mut self, row: &Row) -> io::Result<()> {
        self.call(&row.call, flags(row, false))
    }

    fn deferred(&mut self, row: &Row) -> io::Result<()> {
        self.call(&row.call, flags(row, true))
    }

    fn completed(&mut self, row: &Row) -> io::Result<()> {
        let c = &row.call;
        match (c.exit_ns, c.ret) {
            (Some(exit_ns), Some(ret)) => writeln!(
                self.out,
                "{{\"completion\":{{\"correlation\":{},\"exit_ns\":{exit_ns},\"ret\":{ret}}}}}",
                c.correlation
            ),
            // Never returned: its line already says so.
            _ => Ok(()),
        }
    }

    fn lost(&mut self, first: u64, count: u64) -> io::Result<()> {
        writeln!(self.out, "{{\"lost\":{first},\"count\":{count}}}")
    }

    fn queue(&mut self, q: &Queue) -> io::Result<()> {
        let v = json!({ "queue": {
            "pid": q.pid, "tid": q.tid, "created": q.created, "discovered": q.discovered,
            "queue": hex(q.queue), "agent": hex(q.agent), "base": hex(q.base),
            "doorbell": hex(q.doorbell), "id": q.id, "size": q.size,
            "ordinal": q.ordinal, "ns": q.ns,
        }});
        writeln!(self.out, "{v}")
    }

    fn packet(&mut self, p: &Packet) -> io::Result<()> {
        let bytes: String = p.bytes.iter().map(|b| format!("{b:02x}")).collect();
        let v = json!({ "packet": {
            "pid": p.pid, "tid": p.tid, "ordinal": p.ordinal,
            "queue": hex(p.queue), "agent": hex(p.agent), "index": p.index,
            "ns": p.ns, "bytes": bytes,
        }});
        writeln!(self.out, "{v}")
    }
}

/// The flags a call line carries besides the call.
fn flags(row: &Row, deferred: bool) -> &'static str {
    match (row.call.filtered, row.late, deferred) {
        (true, _, true) => ",\"filtered\":true,\"deferred\":true",
        (true, _, false) => ",\"filtered\":true",
        (false, true, _) => ",\"late\":true",
        (false, false, true) => ",\"deferred\":true",
        (false, false, false) => "",
    }
}

fn hex(v: u64) -> String {
    format!("{v:#x}")
}

pub fn write_call(out: &mut (impl Write + ?Sized), c: &Call, extra: &str) -> io::Result<()> {
    write!(
        out,
        "{{\"api\":\"{}\",\"pid\":{},\"tid\":{},\"correlation\":{},\"enter_ns\":{},",
        c.api.symbol(),
        c.pid,
        c.tid,
        c.correlation,
        c.enter_ns
    )?;
    match c.exit_ns {
        Some(ns) => write!(out, "\"exit_ns\":{ns},")?,
        None => write!(out, "\"exit_ns\":null,")?,
    }
    match c.ret {
        Some(r) => write!(out, "\"ret\":{r},\"args\":{{")?,
        None => write!(out, "\"ret\":null,\"args\":{{")?,
    }
    for (i, name) in c.api.arg_names().iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        let v = c.args[i];
        match arg_kind(name) {
            ArgKind::Handle => write!(out, "{sep}\"{name}\":\"{v:#x}\"")?,
            ArgKind::Unsigned => write!(out, "{sep}\"{name}\":{}", v as u32)?,
            ArgKind::Signed => write!(out, "{sep}\"{name}\":{}", v as i32)?,
        }
    }
    writeln!(out, "}}{extra}}}")
}
