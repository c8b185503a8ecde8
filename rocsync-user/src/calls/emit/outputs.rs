//! The outputs of a capture: reserved before it starts, streamed while it runs, closed,
//! moved into place and summarised at its end — from one [`CaptureStats`].

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result};
use serde_json::{Value, json};

use super::{
    Tee,
    files::{FileStream, PendingFile},
    processes::{ProcessInfo, ProcessTraces, Written},
    raw::{Header, RawWriter, Trailer},
    summary,
};
use crate::calls::stats::CaptureStats;

/// What a capture writes into: a trace per process and, if asked for, the raw capture.
pub(crate) type CaptureSink = Tee<ProcessTraces, RawWriter<FileStream>>;

/// Output files reserved before the capture starts, so a bad path fails early.
pub(crate) struct Outputs {
    /// Until the capture opens it: then the first process's trace.
    trace: Option<PendingFile>,
    default_name: bool,
    raw: Option<PendingFile>,
    header: Header,
    /// Who says the summary (`rocsync`; the daemon and its trace).
    who: String,
    /// The files the summary names; the rest are counted.
    files_shown: usize,
}

/// The files a daemon's trace names in its log. A flight dump writes a file per process:
/// one line each was ~3 500 lines a minute under the soak's loop of dumps. Its client is
/// told every file.
const DAEMON_FILES_SHOWN: usize = 4;

/// What the capture adds to the trace's `rocsync` object and the summary.
pub(crate) struct Report {
    /// The capture's parameters (mode, pid, options).
    pub parameters: Value,
    /// Library files probed.
    pub libraries: Vec<String>,
    /// Probe placements the kernel must single-step (slow), by function.
    pub single_stepped: Vec<String>,
    /// What each traced process said of itself (name, rank).
    pub processes: BTreeMap<u32, ProcessInfo>,
}

impl Outputs {
    /// A capture's outputs: `trace` (`None`: named after the target once known) and the
    /// raw capture, if asked for.
    pub(crate) fn reserve(trace: Option<PathBuf>, raw: Option<PathBuf>) -> Result<Self> {
        let default_name = trace.is_none();
        let path = trace.unwrap_or_else(|| PathBuf::from("rocsync.json"));
        Self::at(path, default_name, raw)
    }

    /// Outputs at explicit paths (`convert`).
    pub(crate) fn at(trace: PathBuf, default_name: bool, raw: Option<PathBuf>) -> Result<Self> {
        if let Some(r) = &raw
            && one_file(&trace, r)
        {
            anyhow::bail!(
                "-o and --raw name the same file ({}): one would replace the other; name two files",
                r.display()
            );
        }
        Ok(Self {
            trace: Some(PendingFile::create(&trace)?),
            default_name,
            raw: raw.as_deref().map(PendingFile::create).transpose()?,
            header: Header::default(),
            who: "rocsync".into(),
            files_shown: usize::MAX,
        })
    }

    /// A trace at `trace` (and its per-process siblings) that replaces no file: one
    /// there already is refused (the daemon's dyno traces, named by a peer).
    pub(crate) fn never_replacing(trace: PathBuf) -> Result<Self> {
        Ok(Self {
            trace: Some(PendingFile::create_new(&trace)?),
            default_name: false,
            raw: None,
            header: Header::default(),
            who: "rocsync".into(),
            files_shown: usize::MAX,
        })
    }

    /// Names the default trace file after the target: `rocsync-<pid>-<time>.json`.
    pub(crate) fn name_after(&mut self, pid: u32) {
        if self.default_name
            && let Some(t) = &mut self.trace
        {
            t.set_file_name(&format!("rocsync-{pid}-{}.json", local_time_stamp()));
        }
    }

    /// Opens the outputs for a capture described by `header`.
    /// Its summary said as `who` (the daemon's traces: `rocsync daemon: trace N`).
    pub(crate) fn said_as(&mut self, who: String) {
        self.who = who;
        self.files_shown = DAEMON_FILES_SHOWN;
    }

    pub(crate) fn open(&mut self, header: Header) -> Result<CaptureSink> {
        let reserved = self.trace.take().context("the outputs are open already")?;
        let traces = ProcessTraces::new(reserved, header.clock_offset_ns, header.start_ns);
        let raw = match &self.raw {
            Some(f) => Some(RawWriter::new(f.stream()?, &header)?),
            None => None,
        };
        self.header = header;
        Ok(Tee::new(traces, raw))
    }

    /// Closes the outputs, moves them into place and prints the summary. Returns the
    /// traces written. One output failing loses nothing of the other: both are kept and
    /// what each lost is said (an error is returned once all is written).
    pub(crate) fn finish(
        self,
        mut sink: CaptureSink,
        stats: &CaptureStats,
        report: Report,
    ) -> Result<Vec<Written>> {
        let raw_error = sink.take_raw_error();
        let (traces, raw, trace_error) = sink.into_parts();
        let mut lines = Vec::new();
        let processes: serde_json::Map<String, Value> = report
            .processes
            .iter()
            .map(|(pid, i)| (pid.to_string(), i.to_json()))
            .collect();
        let trailer = Trailer {
            kernel: stats.kernel.clone(),
            unpaired_entries: stats.unpaired_entries,
            unpaired_exits: stats.unpaired_exits,
            calls_begun_before: stats.calls_begun_before,
            undecodable: stats.undecodable,
            processes: Value::Object(processes),
        };
        let raw_error = self
            .raw
            .and_then(|f| close_raw(f, raw, raw_error, &trailer, &mut lines));
        // The trace failed while the raw capture went on: it holds the whole capture.
        if let Some(e) = trace_error {
            drop(traces);
            lines.insert(0, format!("the trace was not written: {e}"));
            lines.push("(`rocsync convert` makes the trace from the raw capture)".into());
            crate::say!("{}", summary::render(stats, &lines, &self.who).trim_end());
            return Err(anyhow::Error::from(e).context("writing the trace"));
        }
        let mut rocsync = json!({
            "version": env!("CARGO_PKG_VERSION"),
            "command": self.header.command,
            "rocsync_command": std::env::args().collect::<Vec<_>>(),
            "clock_offset_ns": self.header.clock_offset_ns,
            "parameters": report.parameters,
            "libraries": report.libraries,
            "single_stepped_probes": report.single_stepped,
            "agent_numbering": "GPU agents in the order the runtime enumerated them (hsa_agent_get_info DEVICE inside an hsa_iterate_agents seen from its start); agents not so enumerated, in the order of their first HSA queue",
        });
        merge(&mut rocsync, stats.to_json());
        if let Some(e) = &raw_error {
            // The trace is whole; the raw capture beside it is not.
            rocsync["raw_capture_error"] = format!("{e:#}").into();
        }
        let command = command_name(&self.header);
        let written = traces.finish(&report.processes, command, rocsync)?;
        lines.extend(file_lines(&written, self.files_shown));
        if raw_error.is_some() {
            lines.push("(the trace holds the whole capture: nothing was lost from it)".into());
        }
        crate::say!("{}", summary::render(stats, &lines, &self.who).trim_end());
        match raw_error {
            Some(e) => Err(e),
            None => Ok(written),
        }
    }

    /// After an output error that stopped the capture (every output failed, or the trace
    /// with no raw capture): the trace, cut short, is not kept; the raw capture, if asked
    /// for, is kept as far as its last complete line. Says what was captured and lost.
    pub(crate) fn salvage(
        self,
        mut sink: CaptureSink,
        stats: &CaptureStats,
        error: std::io::Error,
    ) -> Result<()> {
        let raw_error = sink.take_raw_error();
        let (traces, raw, trace_error) = sink.into_parts();
        drop(traces);
        let mut lines = vec![format!(
            "the trace was not written: {}",
            trace_error.as_ref().unwrap_or(&error)
        )];
        if let Some(f) = self.raw {
            // Whatever stopped it: no trailer is written after a gap.
            let e =
                raw_error.unwrap_or_else(|| std::io::Error::new(error.kind(), error.to_string()));
            close_raw(f, raw, Some(e), &Trailer::default(), &mut lines);
        }
        crate::say!("{}", summary::render(stats, &lines, &self.who).trim_end());
        Err(anyhow::Error::from(error).context("writing the outputs"))
    }
}

/// Ends the raw capture: with its trailer when it never failed, else cut back to its last
/// complete line (`rocsync convert` then reports it truncated). Adds what became of it to
/// `lines`; returns its error, if it failed.
fn close_raw(
    f: PendingFile,
    w: Option<RawWriter<FileStream>>,
    failed: Option<std::io::Error>,
    trailer: &Trailer,
    lines: &mut Vec<String>,
) -> Option<anyhow::Error> {
    let failed = match (failed, w) {
        (None, Some(w)) => w.finish(trailer).and_then(FileStream::close).err(),
        (e, w) => {
            // What is still buffered follows what was written, so it may go too.
            drop(w);
            e
        }
    };
    let Some(e) = failed else {
        return match f.persist() {
            Ok(p) => {
                lines.push(format!("raw capture: {}", p.display()));
                None
            }
            Err(e) => {
                lines.push(format!("the raw capture was not kept: {e:#}"));
                Some(e.context("writing the raw capture"))
            }
        };
    };
    let cut = f.cut_to_last_line();
    let kept = f.persist();
    lines.insert(
        0,
        format!("lost from the raw capture: all after the error ({e}), and its trailer"),
    );
    match (kept, cut) {
        (Ok(p), Ok(())) => lines.push(format!(
            "raw capture kept up to its last complete line: {}",
            p.display()
        )),
        (Ok(p), Err(c)) => lines.push(format!(
            "raw capture kept, its last line possibly cut ({c}): {}",
            p.display()
        )),
        (Err(k), _) => lines.push(format!("the raw capture was not kept either: {k:#}")),
    }
    Some(anyhow::Error::from(e).context("writing the raw capture"))
}

fn merge(into: &mut Value, from: Value) {
    if let (Some(a), Value::Object(b)) = (into.as_object_mut(), from) {
        a.extend(b);
    }
}

/// The command's name: what a process is called when it said nothing of itself.
fn command_name(header: &Header) -> &str {
    header
        .command
        .first()
        .and_then(|c| c.rsplit('/').next())
        .unwrap_or("process")
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

/// Whether `a` and `b` name one file: the same directory (links resolved) and name.
fn one_file(a: &Path, b: &Path) -> bool {
    let key = |p: &Path| {
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        (
            std::fs::canonicalize(dir).ok(),
            p.file_name().map(|n| n.to_owned()),
        )
    };
    a == b || key(a) == key(b) && key(a).0.is_some()
}

/// The summary's lines of the files written: the first `shown`, then how many more and
/// where.
fn file_lines(written: &[Written], shown: usize) -> Vec<String> {
    let mut lines: Vec<String> = (written.iter().take(shown))
        .map(|w| {
            let mut line = format!("trace: {}", w.path.display());
            if let Some(pid) = w.pid.filter(|_| written.len() > 1) {
                line += &format!(" (pid {pid}");
                if let Some(rank) = w.rank {
                    line += &format!(", rank {rank}");
                }
                line += ")";
            }
            line
        })
        .collect();
    if let Some(rest) = written.get(shown..).filter(|r| !r.is_empty()) {
        let dir = rest[0].path.parent().unwrap_or(Path::new("."));
        lines.push(format!(
            "trace: {} more files in {}",
            rest.len(),
            dir.display()
        ));
    }
    lines
}

#[cfg(test)]
mod file_lines_tests {
    use super::*;

    #[test]
    fn the_first_files_are_named_and_the_rest_counted_with_their_folder() {
        let written: Vec<Written> = (0..10)
            .map(|i| Written {
                pid: Some(100 + i),
                path: format!("/s/traces/flight-{i}.json").into(),
                rank: (i == 1).then_some(3),
            })
            .collect();
        let lines = file_lines(&written, 2);
        assert_eq!(
            lines,
            [
                "trace: /s/traces/flight-0.json (pid 100)",
                "trace: /s/traces/flight-1.json (pid 101, rank 3)",
                "trace: 8 more files in /s/traces",
            ]
        );
        assert_eq!(file_lines(&written, usize::MAX).len(), 10);
        assert_eq!(
            file_lines(&written[..1], 2),
            ["trace: /s/traces/flight-0.json"]
        );
    }
}

#[cfg(test)]
mod one_file_tests {
    use super::one_file;
    use std::path::Path;

    #[test]
    fn the_same_name_by_two_spellings_is_one_file() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("t.json");
        let b = dir.path().join(".").join("t.json");
        assert!(one_file(&a, &b));
        assert!(!one_file(&a, &dir.path().join("r.jsonl")));
        assert!(one_file(Path::new("x.json"), Path::new("./x.json")));
    }
}
