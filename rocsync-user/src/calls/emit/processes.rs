//! One Kineto trace per traced process (HTA reads one file per rank). A process's file is
//! opened when its first row arrives, beside the reserved output; names are settled at the
//! end: the output itself when one process was traced, `<stem>_<pid><ext>` for each when
//! several were (the naming of Kineto's on-demand traces). Correlation ids come from one
//! counter, so they stay unique across the files of a capture.

use crate::calls::emit::comms::Comm;
use std::{
    collections::BTreeMap,
    io,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result};
use serde_json::{Value, json};

use super::{
    Sink,
    files::{FileStream, PendingFile},
    kineto::{KinetoWriter, TraceInfo},
};
use crate::calls::{
    ingest::{Packet, Queue},
    resolve::Row,
};

/// What a process says about itself (see `capture::environ`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcessInfo {
    pub name: String,
    /// The trace's `distributedInfo` (rank, world size, local rank, backend, as known).
    pub distributed: Value,
    /// Its Kubernetes pod (the daemon's traces), the trace's `rocsync.pod`.
    pub pod: Option<Value>,
    /// Its threads' names (`/proc/PID/task/TID/comm`) when rocsync first saw each, by tid:
    /// a thread that exits keeps the name it had.
    pub threads: BTreeMap<u32, String>,
}

impl ProcessInfo {
    pub fn to_json(&self) -> Value {
        let mut v = json!({ "name": self.name, "distributedInfo": self.distributed });
        if !self.threads.is_empty() {
            v["threads"] = json!(self.threads);
        }
        v
    }

    /// As [`Self::to_json`] wrote it; what is not a tid and a name is left out.
    pub fn from_json(v: &Value) -> Self {
        let threads = (v["threads"].as_object().into_iter().flatten())
            .filter_map(|(tid, n)| Some((tid.parse().ok()?, n.as_str()?.to_string())))
            .collect();
        Self {
            name: v["name"].as_str().unwrap_or_default().to_string(),
            distributed: v["distributedInfo"].clone(),
            pod: None,
            threads,
        }
    }
}

struct Trace {
    file: PendingFile,
    writer: KinetoWriter<FileStream>,
}

pub struct ProcessTraces {
    /// The output reserved before the capture: the first process's file.
    reserved: Option<PendingFile>,
    /// The output's path: one process's name, or the stem of several.
    base: PathBuf,
    clock_offset_ns: i64,
    start_ns: u64,
    /// Standard output cannot be split: every process goes into it.
    shared: bool,
    /// Name every file `<stem>_<pid><ext>`, one process or several (Kineto's on-demand
    /// naming, which dynolog's client prints).
    pub always_per_process: bool,
    traces: BTreeMap<u32, Trace>,
    /// Rows, packets and queues left out after the trace was cut short (`Some`): counted.
    left_out: Option<u64>,
    /// The largest a file may grow: at it, the trace is cut short.
    pub max_bytes: Option<u64>,
}

/// A file written, for the summary.
pub struct Written {
    pub pid: Option<u32>,
    pub path: PathBuf,
    pub rank: Option<u64>,
}

impl ProcessTraces {
    pub fn new(reserved: PendingFile, clock_offset_ns: i64, start_ns: u64) -> Self {
        Self {
            shared: reserved.path() == Path::new("-"),
            base: reserved.path().to_path_buf(),
            reserved: Some(reserved),
            clock_offset_ns,
            start_ns,
            traces: BTreeMap::new(),
            always_per_process: false,
            left_out: None,
            max_bytes: None,
        }
    }

    fn writer(&mut self, pid: u32) -> io::Result<&mut KinetoWriter<FileStream>> {
        let key = if self.shared { 0 } else { pid };
        if !self.traces.contains_key(&key) {
            let file = match self.reserved.take() {
                Some(f) => f,
                None => {
                    let first = &self.traces.values().next().expect("one is open").file;
                    first
                        .sibling(&per_process_name(&self.base, pid))
                        .map_err(io::Error::other)?
                }
            };
            let stream = file.stream().map_err(io::Error::other)?;
            let writer = KinetoWriter::new(stream, self.clock_offset_ns, self.start_ns)?;
            self.traces.insert(key, Trace { file, writer });
        }
        Ok(&mut self.traces.get_mut(&key).expect("inserted").writer)
    }

    /// Each file at most `max_bytes`: short of it, by room for its end (metadata and
    /// summary: kilobytes), nothing more but that end is written and what is left out is
    /// counted, so the file ends within the bound.
    pub fn bound(&mut self, max_bytes: u64) {
        self.max_bytes = Some(max_bytes - (max_bytes / 16).min(1 << 20));
    }

    /// Writes nothing more but its end: what comes is counted instead (a trace cut short
    /// at its size bound, whose calls behind a gap would otherwise still pour in).
    pub fn cut_short(&mut self) {
        self.left_out.get_or_insert(0);
    }

    /// What was left out since [`ProcessTraces::cut_short`].
    pub fn left_out(&self) -> Option<u64> {
        self.left_out
    }

    /// Whether to write what comes for `pid`'s file: not once the trace is cut short
    /// (counted instead), which it is once that file reached `max_bytes`.
    fn keeps(&mut self, pid: u32) -> bool {
        let key = if self.shared { 0 } else { pid };
        let full = |t: &Trace| self.max_bytes.is_some_and(|m| t.writer.bytes() >= m);
        if self.left_out.is_none() && self.traces.get(&key).is_some_and(full) {
            self.cut_short();
        }
        match &mut self.left_out {
            Some(n) => {
                *n += 1;
                false
            }
            None => true,
        }
    }

    /// Rows made elsewhere on `pid`'s track (a blocked thread's stack), from `rows` given
    /// the trace time in µs of `from_ns` and `to_ns` (CLOCK_MONOTONIC); counted as left
    /// out once the trace is cut short.
    pub fn extra_rows(
        &mut self,
        pid: u32,
        (from_ns, to_ns): (u64, u64),
        rows: impl FnOnce(f64, f64) -> Vec<Value>,
    ) -> io::Result<()> {
        if !self.keeps(pid) {
            return Ok(());
        }
        let w = self.writer(pid)?;
        let (from, to) = (w.trace_us(from_ns), w.trace_us(to_ns));
        w.raw_rows(&rows(from, (to - from).max(0.001)));
        Ok(())
    }

    /// The size of the largest file so far (before any compression).
    pub fn largest_file(&self) -> u64 {
        self.traces
            .values()
            .map(|t| t.writer.bytes())
            .max()
            .unwrap_or(0)
    }

    /// Closes every trace and moves it into place. `rocsync` is the capture's object
    /// (counts are for the whole capture); each file adds its pid and the file list.
    pub fn finish(
        mut self,
        processes: &BTreeMap<u32, ProcessInfo>,
        fallback_name: &str,
        rocsync: Value,
    ) -> Result<Vec<Written>> {
        if self.traces.is_empty() {
            // Nothing traced: an empty trace still says so.
            self.writer(0)?;
        }
        let several = self.traces.len() > 1 || (self.always_per_process && !self.shared);
        let finals: Vec<(u32, PathBuf)> = self
            .traces
            .keys()
            .map(|&pid| {
                let name = if several {
                    self.base.with_file_name(per_process_name(&self.base, pid))
                } else {
                    self.base.clone()
                };
                (pid, name)
            })
            .collect();
        let files: Vec<String> = finals
            .iter()
            .map(|(_, p)| p.display().to_string())
            .collect();
        let mut written = Vec::new();
        for ((pid, path), (_, t)) in finals.into_iter().zip(std::mem::take(&mut self.traces)) {
            let info = processes.get(&pid);
            let mut distributed = info.map_or(json!({}), |i| i.distributed.clone());
            // One process and no rank from its launcher: rank 0, as Kineto writes it.
            if !several && distributed.get("rank").is_none() {
                distributed["rank"] = 0.into();
            }
            let names: BTreeMap<u32, String> = [(
                pid,
                // Named once read (its threads' names may come first).
                info.filter(|i| !i.name.is_empty())
                    .map_or(fallback_name.to_string(), |i| i.name.clone()),
            )]
            .into();
            let mut rocsync = rocsync.clone();
            if !self.shared && pid != 0 {
                rocsync["pid"] = pid.into();
            }
            if let Some(pod) = info.and_then(|i| i.pod.clone()) {
                rocsync["pod"] = pod;
            }
            rocsync["files"] = json!(files);
            let trace_name = path.display().to_string();
            let trace_info = TraceInfo {
                process_names: &names,
                rocsync,
                distributed: distributed.clone(),
                trace_name: &trace_name,
            };
            let mut writer = t.writer;
            writer.name_threads(
                (processes.iter())
                    .flat_map(|(&p, i)| i.threads.iter().map(move |(&t, n)| ((p, t), n.clone()))),
            );
            writer
                .finish(&trace_info)
                .and_then(FileStream::close)
                .with_context(|| format!("writing {trace_name}"))?;
            let mut file = t.file;
            if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
                file.set_file_name(name);
            }
            written.push(Written {
                pid: (pid != 0 && !self.shared).then_some(pid),
                path: file.persist()?,
                rank: distributed.get("rank").and_then(Value::as_u64),
            });
        }
        Ok(written)
    }
}

/// `<stem>_<pid><ext>`, where `.json.gz` counts as one extension.
pub(crate) fn per_process_name(path: &Path, pid: u32) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let split = if name.ends_with(".json.gz") {
        name.len() - ".json.gz".len()
    } else {
        name.rfind('.').filter(|&i| i > 0).unwrap_or(name.len())
    };
    format!("{}_{pid}{}", &name[..split], &name[split..])
}

/// The process whose trace gets `row`; none for a call filtered by the agent set, which
/// opens no process's file.
fn written(row: &Row) -> Option<u32> {
    (!row.call.filtered).then_some(row.call.pid)
}

impl Sink for ProcessTraces {
    fn row(&mut self, row: &Row) -> io::Result<()> {
        match written(row) {
            Some(pid) if self.keeps(pid) => self.writer(pid)?.row(row),
            _ => Ok(()),
        }
    }
    fn deferred(&mut self, _row: &Row) -> io::Result<()> {
        Ok(())
    }
    fn completed(&mut self, row: &Row) -> io::Result<()> {
        match written(row) {
            Some(pid) if self.keeps(pid) => self.writer(pid)?.completed(row),
            _ => Ok(()),
        }
    }
    fn lost(&mut self, _first: u64, _count: u64) -> io::Result<()> {
        Ok(())
    }
    fn queue(&mut self, q: &Queue) -> io::Result<()> {
        match self.keeps(q.pid) {
            true => self.writer(q.pid)?.queue(q),
            false => Ok(()),
        }
    }
    fn packet(&mut self, p: &Packet) -> io::Result<()> {
        match self.keeps(p.pid) {
            true => self.writer(p.pid)?.packet(p),
            false => Ok(()),
        }
    }
    fn communicator(&mut self, pid: u32, handle: u64, comm: Comm) -> io::Result<()> {
        self.writer(pid)?.comms.insert(pid, handle, comm);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pid: u32, filtered: bool) -> Row {
        let call = crate::calls::ingest::Call {
            api: rocsync_common::Api::HipStreamSynchronize,
            pid,
            tid: pid,
            correlation: u64::from(pid),
            enter_ns: 1_000,
            exit_ns: Some(2_000),
            ret: Some(0),
            args: [0; 3],
            filtered,
        };
        Row::of(call)
    }

    /// A process whose only calls are filtered gets no file, whether they come in order
    /// or on their return after being released in flight.
    #[test]
    fn filtered_calls_open_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("t.json");
        let mut traces = ProcessTraces::new(PendingFile::create(&out).unwrap(), 0, 0);
        traces.row(&row(1, false)).unwrap();
        traces.row(&row(2, true)).unwrap();
        traces.completed(&row(3, true)).unwrap();
        let written = traces.finish(&BTreeMap::new(), "app", json!({})).unwrap();
        let paths: Vec<PathBuf> = written.into_iter().map(|w| w.path).collect();
        assert_eq!(paths, [out]);
    }

    #[test]
    fn per_process_names_keep_the_extension() {
        let n = |p: &str| per_process_name(Path::new(p), 42);
        assert_eq!(n("out/ddp.json"), "ddp_42.json");
        assert_eq!(n("ddp.json.gz"), "ddp_42.json.gz");
        assert_eq!(n("trace"), "trace_42");
        assert_eq!(n(".hidden"), ".hidden_42");
    }
}
