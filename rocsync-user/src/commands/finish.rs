//! The outputs of a capture: reserved before it starts, streamed while it runs, closed
//! and summarised at its end.

use std::{collections::BTreeMap, path::PathBuf};

use anyhow::{Context as _, Result};
use serde_json::{Value, json};

use crate::{
    capture::{Captured, Drops, session::Sink},
    cli::CaptureArgs,
    output::PendingFile,
    resolve::Resolved,
    summary,
    trace::{
        call::Call,
        kineto::{self, KinetoWriter, TraceInfo},
        raw::{self, Header, Trailer},
        stream::TraceStream,
    },
};

/// Output files reserved before the capture starts, so a bad path fails early.
pub struct Outputs {
    trace: PendingFile,
    default_name: bool,
    raw: Option<PendingFile>,
    header: Header,
}

impl Outputs {
    pub fn reserve(args: &CaptureArgs) -> Result<Self> {
        let default_name = args.output.is_none();
        let path = args
            .output
            .clone()
            .unwrap_or_else(|| PathBuf::from("rocsync.json"));
        Ok(Self {
            trace: PendingFile::create(&path)?,
            default_name,
            raw: args.raw.as_deref().map(PendingFile::create).transpose()?,
            header: Header::default(),
        })
    }

    /// Names the default trace file after the target: `rocsync-<pid>-<time>.json`.
    pub fn name_after(&mut self, pid: u32) {
        if self.default_name {
            self.trace
                .set_file_name(&format!("rocsync-{pid}-{}.json", local_time_stamp()));
        }
    }

    /// Opens the outputs for a capture that starts now (`start_ns`, CLOCK_MONOTONIC).
    pub fn open(&mut self, header: Header, start_ns: u64) -> Result<Sink> {
        let kineto = KinetoWriter::new(self.trace.stream()?, header.clock_offset_ns, start_ns)?;
        let raw = match &self.raw {
            Some(f) => {
                let mut w = f.stream()?;
                raw::write_header(&mut w, &header)?;
                Some(w)
            }
            None => None,
        };
        self.header = header;
        Ok(TraceStream::new(kineto, raw))
    }

    /// Closes the outputs, moves them into place and prints the summary.
    pub fn finish(self, cap: Captured, params: Value) -> Result<()> {
        let Captured {
            sink,
            drops,
            libraries,
            detaching,
            ..
        } = cap;
        let (resolved, unresolved) = sink.waits();
        let paths: Vec<String> = libraries
            .iter()
            .map(|l| l.path.display().to_string())
            .collect();
        let parameters = json!({ "capture": params, "libraries": paths });
        let mut rocsync = rocsync_object(
            &self.header,
            &drops,
            sink.calls,
            (resolved, unresolved),
            parameters,
        );
        // Records that arrived after their place in the order had been given up on.
        rocsync["drops"]["late_records"] = sink.late.into();
        let names = process_names(&self.header, sink.pids());
        let trace_name = self.trace.path().display().to_string();
        let info = TraceInfo {
            clock_offset_ns: self.header.clock_offset_ns,
            process_names: &names,
            rocsync,
            trace_name: &trace_name,
        };
        let per_api = sink.per_api.clone();
        let packets = sink.packets.clone();
        let done = sink
            .finish(&info, &Trailer { drops: drops.calls })
            .context("writing the outputs")?;
        done.trace.close()?;
        let mut lines = Vec::new();
        if let (Some(f), Some(w)) = (self.raw, done.raw) {
            w.close()?;
            lines.push(format!("raw calls: {}", f.persist()?.display()));
        }
        let path = self.trace.persist()?;
        for (kind, n) in &packets {
            lines.push(format!("AQL {kind:<24} {n:>9}"));
        }
        if drops.truncated > 0 {
            lines.push(format!(
                "AQL packets not read (over 16 per doorbell): {}",
                drops.truncated
            ));
        }
        lines.push(format!(
            "waits resolved: {resolved}, unresolved: {unresolved}"
        ));
        lines.push(format!("trace: {}", path.display()));
        detaching.wait();
        if libraries.is_empty() {
            eprintln!(
                "rocsync: warning: the target never mapped a GPU runtime library that rocsync traces"
            );
        }
        eprint!(
            "{}",
            summary::render(&per_api, &drops, done.in_flight, &lines)
        );
        if drops.calls > 0 {
            eprintln!(
                "rocsync: warning: {} calls were dropped because the ring buffer was full",
                drops.calls
            );
        }
        Ok(())
    }
}

/// The trace's `rocsync` object.
fn rocsync_object(
    header: &Header,
    drops: &Drops,
    calls: u64,
    waits: (u64, u64),
    parameters: Value,
) -> Value {
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "command": header.command,
        "rocsync_command": std::env::args().collect::<Vec<_>>(),
        "clock_offset_ns": header.clock_offset_ns,
        "parameters": parameters,
        "calls": calls,
        "waits_resolved": waits.0,
        "waits_unresolved": waits.1,
        "drops": {
            "calls": drops.calls,
            "calls_per_cpu": drops.calls_per_cpu,
            "library_loads": drops.link_map,
            "undecodable": drops.undecodable,
            "lost_ids": drops.lost,
            "packets_truncated": drops.truncated,
        },
        "agent_numbering": "GPU agents in the order the runtime enumerated them (hsa_agent_get_info DEVICE); agents not enumerated while attached, in the order of their first HSA queue",
    })
}

/// Every traced pid is named after the command.
fn process_names(header: &Header, pids: impl IntoIterator<Item = u32>) -> BTreeMap<u32, String> {
    let name = header
        .command
        .first()
        .and_then(|c| c.rsplit('/').next())
        .unwrap_or("process");
    pids.into_iter().map(|p| (p, name.to_string())).collect()
}

/// Writes the Kineto trace of an archived capture (`rocsync convert`).
pub fn write_trace(
    file: PendingFile,
    calls: &[Call],
    resolved: &Resolved,
    header: &Header,
    extra: Value,
) -> Result<PathBuf> {
    let drops = Drops {
        calls: header.drops,
        ..Default::default()
    };
    let rocsync = rocsync_object(
        header,
        &drops,
        calls.len() as u64,
        (resolved.waits_resolved, resolved.waits_unresolved),
        extra,
    );
    let names = process_names(header, calls.iter().map(|c| c.pid));
    let trace_name = file.path().display().to_string();
    let info = TraceInfo {
        clock_offset_ns: header.clock_offset_ns,
        process_names: &names,
        rocsync,
        trace_name: &trace_name,
    };
    file.commit(|w| kineto::write(w, resolved, &info))
}

/// `YYYYmmdd-HHMMSS` in local time.
fn local_time_stamp() -> String {
    // SAFETY: time and localtime_r with valid pointers.
    unsafe {
        let t = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&t, &mut tm);
        format!(
            "{:04}{:02}{:02}-{:02}{:02}{:02}",
            tm.tm_year + 1900,
            tm.tm_mon + 1,
            tm.tm_mday,
            tm.tm_hour,
            tm.tm_min,
            tm.tm_sec
        )
    }
}
