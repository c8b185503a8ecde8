//! What every capture does at the end: resolve, write the outputs, print the summary.

use std::{collections::BTreeMap, path::PathBuf};

use anyhow::Result;
use serde_json::json;

use crate::{
    capture::{Captured, Drops},
    cli::CaptureArgs,
    output::PendingFile,
    resolve::{Resolved, resolve},
    summary,
    trace::{
        call::Call,
        kineto::{self, TraceInfo},
        raw::{self, Header},
    },
};

/// Output files reserved before the capture starts, so a bad path fails early.
pub struct Outputs {
    trace: PendingFile,
    default_name: bool,
    raw: Option<PendingFile>,
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
        })
    }

    /// Names the default trace file after the target: `rocsync-<pid>-<time>.json`.
    pub fn name_after(&mut self, pid: u32) {
        if self.default_name {
            self.trace
                .set_file_name(&format!("rocsync-{pid}-{}.json", local_time_stamp()));
        }
    }

    /// Resolves and writes everything captured.
    pub fn write(self, mut cap: Captured, header: Header, params: serde_json::Value) -> Result<()> {
        cap.calls.sort_unstable_by_key(|c| (c.correlation, c.pid));
        let header = Header {
            drops: cap.drops.calls,
            ..header
        };
        let mut lines = Vec::new();
        if let Some(f) = self.raw {
            let path = f.commit(|w| {
                raw::write_header(w, &header)?;
                cap.calls.iter().try_for_each(|c| raw::write_call(w, c))
            })?;
            lines.push(format!("raw calls: {}", path.display()));
        }
        let resolved = resolve(&cap.calls);
        let libraries: Vec<String> = cap
            .libraries
            .iter()
            .map(|l| l.path.display().to_string())
            .collect();
        let params = json!({ "capture": params, "libraries": libraries, "in_flight_at_stop": cap.in_flight });
        let path = write_trace(
            self.trace, &cap.calls, &resolved, &header, &cap.drops, params,
        )?;
        lines.push(format!(
            "waits resolved: {}, unresolved: {}",
            resolved.waits_resolved, resolved.waits_unresolved
        ));
        lines.push(format!("trace: {}", path.display()));
        cap.detached();
        if cap.libraries.is_empty() {
            eprintln!(
                "rocsync: warning: the target never mapped a GPU runtime library that rocsync traces"
            );
        }

        eprint!(
            "{}",
            summary::render(&cap.calls, &cap.drops, cap.in_flight, &lines)
        );
        if cap.drops.calls > 0 {
            eprintln!(
                "rocsync: warning: {} calls were dropped because the ring buffer was full",
                cap.drops.calls
            );
        }
        Ok(())
    }
}

/// Writes the Kineto trace of resolved calls. Shared by captures and `convert`.
pub fn write_trace(
    file: PendingFile,
    calls: &[Call],
    resolved: &Resolved,
    header: &Header,
    drops: &Drops,
    extra: serde_json::Value,
) -> Result<PathBuf> {
    let name = header
        .command
        .first()
        .and_then(|c| c.rsplit('/').next())
        .unwrap_or("process")
        .to_string();
    let process_names: BTreeMap<u32, String> =
        calls.iter().map(|c| (c.pid, name.clone())).collect();
    let rocsync = json!({
        "version": env!("CARGO_PKG_VERSION"),
        "command": header.command,
        "rocsync_command": std::env::args().collect::<Vec<_>>(),
        "clock_offset_ns": header.clock_offset_ns,
        "parameters": extra,
        "calls": calls.len(),
        "waits_resolved": resolved.waits_resolved,
        "waits_unresolved": resolved.waits_unresolved,
        "drops": {
            "calls": drops.calls,
            "calls_per_cpu": drops.calls_per_cpu,
            "library_loads": drops.link_map,
            "undecodable": drops.undecodable,
        },
    });
    let trace_name = file.path().display().to_string();
    let info = TraceInfo {
        clock_offset_ns: header.clock_offset_ns,
        process_names: &process_names,
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
