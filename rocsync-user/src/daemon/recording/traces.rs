//! Traces on demand: a request names tracked processes (or all) and a duration. Their
//! calls then also go to the ring (`TRACE_RECORDING` in their settings) and through the
//! capture pipeline into one trace per process in the state directory; at the end, exits
//! only for a grace period (calls in flight complete), then counting only again.

use crate::calls::emit::comms::Comm;
use std::{collections::BTreeMap, path::Path};

use anyhow::Result;
use rocsync_common::{Decoded, decode};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::calls::{
    agents::AgentSet,
    emit::{
        outputs::{CaptureSink, Outputs, Report},
        processes::{ProcessInfo, Written},
    },
    ingest::Call,
    pipeline::{Pipeline, cadence::IN_FLIGHT_GRACE},
};
use crate::daemon::{
    outputs::retention,
    recording::files,
    serving::protocol::Reply,
    serving::socket::PendingReply,
    tracking::apart::shed_log::{self, ShedLog},
    tracking::discovery::Tracker,
    triggers::{collectives::Owner, origin::Origin, origin::Start, origin::Unasked},
    untrusted::pids_shown,
};

/// Records between two looks at whether the trace was cut short (its sink cuts it at
/// its bound exactly; this only ends its recording).
const SIZE_EVERY: u32 = 1024;
pub(crate) struct Active {
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
    pub(crate) fn open(
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
        let stem = files::numbered_stem(&spec.name, id);
        let (pipeline, outputs) = files::open(state_dir, &stem, id, origin.output())?;
        let mut trace = Self {
            id,
            stem,
            label: spec.name.clone(),
            processes: files::identities(pids.iter().copied(), &tracker.pods),
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
    pub(crate) fn name(&self) -> String {
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
    pub(crate) fn begin_after(&mut self, last_read: u64) {
        self.pipeline.start_at(last_read + 1);
    }

    /// The slow call it was started for, entered before its recording (see
    /// [`Pipeline::entered_before`]).
    pub(crate) fn hold_slow_call(&mut self, call: Call) {
        self.pipeline.entered_before(call);
    }

    /// The communicators of its processes set up before it began, as the probes keep
    /// them: its collectives' rows name them.
    /// Each process's job is its largest communicator with an id (its world), for the
    /// upload key — unless processes of another owner (`owner`: user and cgroup) claim
    /// that id on this node, or did (`past`: the owners of those ended): a job's key
    /// never takes a trace from outside it. Returns the ids withheld so.
    pub(crate) fn know_communicators(
        &mut self,
        comms: &[(u32, u64, rocsync_common::CommState)],
        owner: impl Fn(u32) -> Option<Owner>,
        past: impl Fn(u64) -> Vec<Owner>,
    ) -> Vec<String> {
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
        let mut withheld = Vec::new();
        let mut claimed = |pid: u32, id: u64| {
            let own = owner(pid);
            // A process gone (no owner) claims nothing.
            let other = (comms.iter())
                .filter(|(p, _, c)| c.id == id && *p != pid)
                .any(|(p, ..)| owner(*p).is_some_and(|o| Some(&o) != own.as_ref()))
                || past(id).iter().any(|o| Some(o) != own.as_ref());
            if other || own.is_none() {
                withheld.push(format!("{id:#x}"));
            }
            !other && own.is_some()
        };
        self.jobs = (world.into_iter())
            .filter(|(pid, (_, id))| *id != 0 && claimed(*pid, *id))
            .map(|(pid, (_, id))| (pid, format!("{id:#x}")))
            .collect();
        withheld.dedup();
        withheld
    }

    /// Its processes' recording is on: every call begun from now is its own (those
    /// before may be too, when something else had them recorded already).
    pub(crate) fn switched_on(&mut self) {
        self.recorded.0 = Some(shed_log::now_us());
    }

    /// A ring record of a recorded process. Once stopping, only returns: entries that
    /// keep coming (the flight recorder's, another trace's) are passed over, not lost.
    pub(crate) fn record(&mut self, bytes: &[u8]) {
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

    /// The largest a file of it may grow (`ProcessTraces::bound`).
    pub(crate) fn limit_size(&mut self, max_bytes: u64) {
        self.max_bytes = max_bytes;
        self.pipeline.sink_mut().trace_mut().bound(max_bytes);
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
            "rocsync daemon: {} {} of pid(s) {} ends early: {}",
            self.origin.what(),
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

    /// Ends it now, written as far as it went and marked truncated: `preempted` by root's
    /// request of the same agents (a user's trace, up to an hour, may not keep root from
    /// tracing), else because its client went away (`rocsync trace` interrupted, or its
    /// connection closed): what it recorded is not left to the rest of its duration.
    pub(crate) fn end_early(&mut self, preempted: bool) {
        if self.stopping {
            return;
        }
        let (reason, by, why) = match preempted {
            true => (
                "preempted",
                "a request of root's for the same agents",
                "root asked for its agents",
            ),
            false => (
                "client_gone",
                "its client went away (Ctrl-C, or its connection closed)",
                "its client went away; written as far as it went",
            ),
        };
        let at_unix_us = shed_log::now_us();
        self.truncated = Some(json!({ "reason": reason, "by": by, "at_unix_us": at_unix_us }));
        let uid = self.asked_by.map_or("?".into(), |u| u.to_string());
        crate::say!(
            "rocsync daemon: {} {} of pid(s) {} (asked by uid {uid}) ends early: {why}",
            self.origin.what(),
            self.id,
            pids_shown(&self.pids)
        );
        self.deadline();
    }

    /// Whether it ended early ([`Active::check_size`]).
    pub(crate) fn truncated(&self) -> bool {
        self.truncated.is_some()
    }

    /// It begins with what the flight recorder held, back to `from_us`: what the budget
    /// shed or cycled off since then is its too.
    pub(crate) fn not_recorded_from(&mut self, from_us: u64) {
        self.shed.1 = self.shed.1.min(from_us);
    }

    /// The id of a call this trace does not record.
    pub(crate) fn skip(&mut self, correlation: u64) {
        self.pipeline.skip(correlation);
    }

    pub(crate) fn tick(&mut self) {
        self.pipeline.tick();
        self.check_size();
    }

    /// Whether it still records entries (not yet stopping).
    pub(crate) fn recording(&self) -> bool {
        !self.stopping
    }

    /// At `until`: first stop recording entries; after the grace period, finish. Returns
    /// whether the trace is done.
    pub(crate) fn deadline(&mut self) -> bool {
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
    pub(crate) fn finish(self) -> (Option<PendingReply>, Reply) {
        let written: Result<Vec<Written>> = self
            .pipeline
            .finish()
            .map_err(anyhow::Error::from)
            .and_then(|(sink, mut stats)| {
                stats.duty_cycled = self.shed.0.cycled_calls(self.shed.1);
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
        (self.reply, files::answer(written))
    }
}
