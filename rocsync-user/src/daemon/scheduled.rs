//! Traces the daemon starts at a time: dyno's requests with a synchronized start, the
//! sampled windows, and the end of every trace whose time came.

use std::time::Duration;

use anyhow::Result;
use serde_json::Value;
use tokio::time::Instant;

use super::{
    dynolog,
    state::Daemon,
    traces::{self, TraceSpec},
};

impl Daemon {
    /// A request for later: answered with the processes it names now, started when due.
    pub fn schedule(&mut self, spec: TraceSpec, ahead: Duration) -> Value {
        match traces::matched(&self.tracker, &spec) {
            Err(e) => dynolog::answer(&[], false, Some(format!("{e:#}"))),
            Ok(pids) => {
                crate::say!(
                    "rocsync daemon: dyno trace {:?} of pid(s) {pids:?} starts in {} ms",
                    spec.name,
                    ahead.as_millis()
                );
                self.scheduled.push((Instant::now() + ahead, spec));
                self.scheduled.sort_by_key(|(at, _)| *at);
                dynolog::answer(&pids, false, None)
            }
        }
    }

    /// When the next scheduled trace starts.
    pub fn next_scheduled(&self) -> Option<Instant> {
        self.scheduled.first().map(|(at, _)| *at)
    }

    /// Starts the scheduled traces whose time came; one that cannot start (its processes
    /// gone, its agents recorded by another session) is said, not retried.
    pub fn start_scheduled(&mut self) {
        let due = self
            .scheduled
            .partition_point(|(at, _)| *at <= Instant::now());
        for (_, spec) in self.scheduled.drain(..due).collect::<Vec<_>>() {
            let name = spec.name.clone();
            if let Err(e) = self.start(spec) {
                self.not_started.scheduled += 1;
                crate::say!("rocsync daemon: scheduled dyno trace {name:?} not started: {e:#}");
            }
        }
    }

    /// Stopping: scheduled traces will not start.
    pub fn drop_scheduled(&mut self) {
        for (_, spec) in self.scheduled.drain(..) {
            self.not_started.scheduled += 1;
            crate::say!(
                "rocsync daemon: scheduled dyno trace {:?} not started: the daemon is stopping",
                spec.name
            );
        }
    }

    /// A sampled window of every tracked process, unless another session holds agents.
    pub fn sample(&mut self, window: Duration) {
        // No window is due while nothing runs (the ended are forgotten a little later).
        if !self.tracker.tracked.iter().any(|&p| traces::alive(p)) {
            return;
        }
        let spec = TraceSpec {
            flight: false,
            pids: Vec::new(),
            cgroup: None,
            agents: Default::default(),
            duration: window,
            name: "sample".into(),
            output: None,
        };
        if let Err(e) = self.start(spec) {
            self.not_started.sampled += 1;
            crate::say!("rocsync daemon: sampled window skipped: {e:#}");
        }
    }

    /// Finishes the traces whose time came: they are written off the loop.
    pub fn finish_due(&mut self) -> Result<()> {
        for trace in self.sessions.due(&mut self.tracker)? {
            self.writing.trace(trace);
        }
        Ok(())
    }
}
