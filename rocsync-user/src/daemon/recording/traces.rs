//! Traces on demand: a request names tracked processes (or all) and a duration. Their
//! calls then also go to the ring (`TRACE_RECORDING` in their settings) and through the
//! capture pipeline into one trace per process in the state directory; at the end, exits
//! only for a grace period (calls in flight complete), then counting only again.

use crate::emit::Comm;
use std::{collections::BTreeMap, path::Path};

use anyhow::Result;
use rocsync_common::{Decoded, decode};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::daemon::{
    outputs::{retention, statedir},
    serving::protocol::{self, Reply},
    serving::socket::PendingReply,
    tracking::apart::shed_log::{self, ShedLog},
    tracking::discovery::Tracker,
    tracking::pods::Pods,
    triggers::{origin::Origin, origin::Start, origin::Unasked},
    untrusted::pids_shown,
};
use crate::{
    agents::AgentSet,
    clock,
    emit::{
        outputs::{CaptureSink, Outputs, Report},
        processes::{ProcessInfo, Written},
        raw::Header,
    },
    environ,
    ingest::Call,
    pipeline::{Pipeline, cadence::IN_FLIGHT_GRACE},
};

/// Records between two looks at whether the trace was cut short (its sink cuts it at
/// its bound exactly; this only ends its recording).
const SIZE_EVERY: u32 = 1024;
pub struct Active {
    pub id: u64,
    /// Its file's name, `<stem>.json` (in the state directory's `traces/`).
    pub stem: String,
    /// The name it was asked by (`--name`; "trace" when none), which others see.
    label: String,
    pub pids: Vec<u32>,
    /// Its processes' jobs (their world communicator's id), for upload keys.
    pub jobs: BTreeMap<u32, String>,
    /// What each said of itself when the trace began (name, rank): its trace's.
    pub processes: BTreeMap<u32, ProcessInfo>,
    /// Each one's user when the trace began: whose its file is (retention's shares).
    pub owners: retention::Owners,
    pub agents: AgentSet,
    pub(super) pipeline: Pipeline<CaptureSink>,
    outputs: Outputs,
    /// When recording ends (then, when stopping ends).
    pub until: Instant,
    stopping: bool,
    /// Who started it, and why (its `rocsync` object says).
    pub origin: Origin,
    /// The client waiting for the files.
    pub reply: Option<PendingReply>,
    /// The uid of the socket peer that asked for it (asked traces only).
    pub asked_by: Option<u32>,
    /// How the daemon's call probes are attached (`uprobe_multi` or `perf_event`).
    call_probe_links: &'static str,
    /// What the budget shed, and when it began (µs, the rows' clock): the trace says
    /// which APIs it does not hold and from when.
    shed: (ShedLog, u64),
    /// When its recording was switched on and off (µs, the rows' clock): every call
    /// begun between is the trace's, which a reader cannot tell from the rows alone.
    recorded: (Option<u64>, Option<u64>),
    /// The largest a file of it may grow (`--trace-max-bytes`), and records since that
    /// was last looked at.
    max_bytes: u64,
    since_size: u32,
    /// Why it ended early (its size, or an output that failed), for its `rocsync` object.
    truncated: Option<Value>,
}

impl Active {
    /// Opens a trace of `pids` as `start` asks, file `<name>-<UTC time>-<id>.json` (or
    /// in dyno's log file), each file at most `max_bytes`; `Sessions` then switches
    /// their recording on.
    pub fn open(
        tracker: &Tracker,
        start: Start,
        pids: Vec<u32>,
        state_dir: &Path,
        (id, max_bytes): (u64, u64),
    ) -> Result<Self> {
        // Its slow call, if any, is given once its recording is on (`hold_slow_call`).
        let Start {
            spec,
            origin,
            reply,
            slow_call: _,
        } = start;
        let stem = numbered_stem(&spec.name, id);
        let (pipeline, outputs) = open(state_dir, &stem, id, origin.output())?;
        let mut trace = Self {
            id,
            stem,
            label: spec.name.clone(),
            processes: identities(pids.iter().copied(), &tracker.pods),
            owners: retention::owners_of(pids.iter().copied()),
            pids,
            jobs: BTreeMap::new(),
            agents: spec.agents,
            pipeline,
            outputs,
            until: Instant::now() + spec.duration,
            stopping: false,
            origin,
            reply,
            asked_by: None,
            call_probe_links: tracker.probes.link_kind().name(),
            shed: (tracker.shed_log.clone(), shed_log::now_us()),
            recorded: (None, None),
            max_bytes: 0,
            since_size: 0,
            truncated: None,
        };
        trace.limit_size(max_bytes);
        Ok(trace)
    }

    /// The name refusals and `status` show it by: what it is, its number, the `--name`
    /// it was asked by and its processes (`trace 2 (step-9) of pid(s) [7]`, `stall trace
    /// 3 of pid(s) [9]`). Names are letters, digits, '-' and '_': nothing to quote.
    pub fn name(&self) -> String {
        let what = self.origin.what();
        let named = match (&self.origin, self.label.as_str()) {
            (Origin::Asked, label) if label != "trace" => format!(" ({label})"),
            _ => String::new(),
        };
        let pids = pids_shown(&self.pids);
        format!("{what} {}{named} of pid(s) {pids}", self.id)
    }

    /// Numbers its calls after `last_read`, the highest id the daemon has read: the
    /// probes number every recorded process's calls, and those before are not its own.
    pub fn begin_after(&mut self, last_read: u64) {
        self.pipeline.start_at(last_read + 1);
    }

    /// The slow call it was started for, entered before its recording (see
    /// [`Pipeline::entered_before`]).
    pub fn hold_slow_call(&mut self, call: Call) {
        self.pipeline.entered_before(call);
    }

    /// The communicators of its processes set up before it began, as the probes keep
    /// them: its collectives' rows name them.
    /// Each process's job is its largest communicator with an id (its world), for the
    /// upload key.
    pub fn know_communicators(&mut self, comms: &[(u32, u64, rocsync_common::CommState)]) {
        let known = |v: u32| (v != u32::MAX).then_some(v);
        let mut world: BTreeMap<u32, (u32, u64)> = BTreeMap::new();
        for (pid, handle, c) in comms.iter().filter(|(pid, ..)| self.pids.contains(pid)) {
            let comm = Comm {
                id: c.id,
                rank: known(c.rank),
                nranks: known(c.nranks),
            };
            self.pipeline.communicator(*pid, *handle, comm);
            let size = known(c.nranks).unwrap_or(0);
            let w = world.entry(*pid).or_insert((size, c.id));
            if c.id != 0
                && (w.1 == 0 || (size, std::cmp::Reverse(c.id)) > (w.0, std::cmp::Reverse(w.1)))
            {
                *w = (size, c.id);
            }
        }
        self.jobs = (world.into_iter())
            .filter(|(_, (_, id))| *id != 0)
            .map(|(pid, (_, id))| (pid, format!("{id:#x}")))
            .collect();
    }

    /// Its processes' recording is on: every call begun from now is its own (those
    /// before may be too, when something else had them recorded already).
    pub fn switched_on(&mut self) {
        self.recorded.0 = Some(shed_log::now_us());
    }

    /// A ring record of a recorded process. Once stopping, only returns: entries that
    /// keep coming (the flight recorder's, another trace's) are passed over, not lost.
    pub fn record(&mut self, bytes: &[u8]) {
        if self.stopping
            && let Ok(Decoded::Entry(e)) = decode(bytes)
        {
            return self.pipeline.skip(e.correlation);
        }
        let _ = self.pipeline.record(bytes);
        self.since_size += 1;
        if self.since_size >= SIZE_EVERY {
            self.check_size();
        }
    }

    /// The largest a file of it may grow: short of it, by room for its end (metadata and
    /// summary: kilobytes), its sink writes nothing more but that end and counts what it
    /// leaves out, so the file ends within the bound.
    pub fn limit_size(&mut self, max_bytes: u64) {
        self.max_bytes = max_bytes;
        let rows = max_bytes - (max_bytes / 16).min(1 << 20);
        self.pipeline.sink_mut().trace_mut().max_bytes = Some(rows);
    }

    /// Ends it now, marked truncated, once a file of it reached `max_bytes` (its sink cut
    /// it short) or an output failed (a full disk): one process cannot fill the disk, nor
    /// a failed trace hold its partial file until its end.
    fn check_size(&mut self) {
        self.since_size = 0;
        if self.stopping {
            return;
        }
        let traces = self.pipeline.sink().trace();
        let largest = traces.largest_file();
        let reason = if self.pipeline.failed() {
            "output_error"
        } else if traces.left_out().is_some() {
            "size"
        } else {
            return;
        };
        self.truncated = Some(json!({
            "reason": reason, "max_bytes": self.max_bytes, "bytes_when_ended": largest,
            "at_unix_us": shed_log::now_us(),
        }));
        if let Some(hang) = self.origin.object_mut(Unasked::Hang) {
            hang["ended"] = "truncated".into();
        }
        self.pipeline.sink_mut().trace_mut().cut_short();
        crate::say!(
            "rocsync daemon: trace {} of pid(s) {} ends early: {}",
            self.id,
            pids_shown(&self.pids),
            match reason {
                "size" => format!(
                    "a file reached --trace-max-bytes ({} bytes)",
                    self.max_bytes
                ),
                _ => "its output failed".into(),
            }
        );
        self.deadline();
    }

    /// Ends it now for root's request of the same agents: a user's trace (up to an hour)
    /// may not keep root from tracing. Written as far as it went, marked truncated.
    pub fn preempt(&mut self) {
        if self.stopping {
            return;
        }
        self.truncated = Some(json!({
            "reason": "preempted", "by": "a request of root's for the same agents",
            "at_unix_us": shed_log::now_us(),
        }));
        crate::say!(
            "rocsync daemon: trace {} of pid(s) {} (asked by uid {}) ends early: root asked \
             for its agents",
            self.id,
            pids_shown(&self.pids),
            self.asked_by.map_or("?".into(), |u| u.to_string()),
        );
        self.deadline();
    }

    /// Whether it ended early ([`Active::check_size`]).
    pub fn truncated(&self) -> bool {
        self.truncated.is_some()
    }

    /// The id of a call this trace does not record.
    pub fn skip(&mut self, correlation: u64) {
        self.pipeline.skip(correlation);
    }

    pub fn tick(&mut self) {
        self.pipeline.tick();
        self.check_size();
    }

    /// Whether it still records entries (not yet stopping).
    pub fn recording(&self) -> bool {
        !self.stopping
    }

    /// At `until`: first stop recording entries; after the grace period, finish. Returns
    /// whether the trace is done.
    pub fn deadline(&mut self) -> bool {
        if self.stopping {
            return true;
        }
        self.pipeline.stopping();
        self.stopping = true;
        // Entries read from now are passed over, and no call begun from now was read.
        self.recorded.1 = Some(shed_log::now_us());
        self.until = Instant::now() + IN_FLIGHT_GRACE;
        false
    }

    /// Writes the traces; returns the client's stream and what to send on it.
    pub fn finish(self) -> (Option<PendingReply>, Reply) {
        let written: Result<Vec<Written>> = self
            .pipeline
            .finish()
            .map_err(anyhow::Error::from)
            .and_then(|(sink, stats)| {
                let mut truncated = self.truncated;
                if let (Some(t), Some(n)) = (&mut truncated, sink.trace().left_out()) {
                    t["left_out"] = n.into();
                }
                let mut parameters = json!({
                        "mode": "daemon trace", "id": self.id, "pids": self.pids,
                        "call_probe_links": self.call_probe_links,
                        "not_recorded": self.shed.0.overlapping(self.shed.1),
                        "recorded_from_unix_us": self.recorded.0,
                        "recorded_until_unix_us": self.recorded.1,
                        "truncated": truncated,
                });
                // Each kind's object under its own key, the others null.
                for kind in Unasked::ALL {
                    let o = self.origin.unasked().filter(|(k, _)| *k == kind);
                    parameters[kind.key()] = o.map_or(Value::Null, |(_, o)| o.clone());
                }
                let report = Report {
                    parameters,
                    libraries: Vec::new(),
                    single_stepped: Vec::new(),
                    processes: self.processes,
                };
                self.outputs.finish(sink, &stats, report)
            });
        (self.reply, answer(written))
    }
}

/// Opens a trace's outputs in the state directory and the pipeline into them.
pub(crate) fn open(
    state_dir: &Path,
    stem: &str,
    id: u64,
    output: Option<&Path>,
) -> Result<(Pipeline<CaptureSink>, Outputs)> {
    // Made again should anyone have removed them, by the rules of the start.
    statedir::make(state_dir)?;
    let mut outputs = match output {
        Some(dyno) => Outputs::never_replacing(dyno.to_path_buf())?,
        None => {
            let path = statedir::traces(state_dir).join(format!("{stem}.json"));
            Outputs::at(path, false, None)?
        }
    };
    outputs.said_as(format!("rocsync daemon: trace {id}"));
    let header = Header {
        clock_offset_ns: clock::realtime_offset_ns(),
        start_ns: clock::monotonic_ns() as u64,
        command: vec![format!("rocsync daemon: trace {id}")],
        from_start: false,
    };
    let mut sink = outputs.open(header)?;
    sink.trace_mut().always_per_process = output.is_some();
    let mut pipeline = Pipeline::new(sink, false);
    pipeline.begins_mid_call();
    Ok((pipeline, outputs))
}

/// The answer to a trace's client: the files written and the process each holds.
pub fn answer(written: Result<Vec<Written>>) -> Reply {
    match written {
        Ok(w) => Reply::Written(protocol::Written {
            files: w.iter().map(|w| w.path.display().to_string()).collect(),
            pids: w.iter().map(|w| w.pid).collect(),
        }),
        Err(e) => Reply::refused(&e.context("writing the traces")),
    }
}

/// What each of `pids` says of itself now (name, rank in a distributed job), for its
/// trace's `distributedInfo` (without it, HTA takes every rank's trace for rank 0), and
/// its pod, as read when it was first tracked.
pub fn identities(pids: impl IntoIterator<Item = u32>, pods: &Pods) -> BTreeMap<u32, ProcessInfo> {
    pids.into_iter()
        .filter_map(|p| {
            let mut info = environ::read(p)?.info;
            info.pod = pods.pod(p).and_then(|pod| serde_json::to_value(pod).ok());
            Some((p, info))
        })
        .collect()
}

/// `<name>-<UTC time>-<id>`: ids start again at a restart; the time keeps names, and
/// upload keys, unique.
pub(crate) fn numbered_stem(name: &str, id: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!("{name}-{}-{id}", crate::clock::utc_stamp(now.as_secs()))
}
