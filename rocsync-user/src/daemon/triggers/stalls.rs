//! Stall capture: a tracked process's synchronisation that took longer than
//! `--capture-on-stall` is found in the kernel at its return (`StallRecord`: nothing is
//! sent for calls under the threshold), and the daemon traces that process around it on
//! its own: what the flight recorder holds of it (when on: the slow call's entry and the
//! records its waits resolve to) and `--stall-window-after` from then. Event query loops
//! are not timed as one span (each query returns at once): a poll is not a stall.
//!
//! A storm of stalls gives one trace per `--stall-interval` per process and per user,
//! and at most [`NODE_MAX`] per interval on the node; the others are counted
//! (`rocsync_stalls_total` in the kernel, the skipped traces here). Within an interval a
//! stall that took [`MUCH_LONGER`] times the longest one traced there still gets its own:
//! a trivial stall does not hide a serious one (and a storm of ever longer ones gives a
//! handful of traces, each several times the last). Hangs have their own admission
//! (`hangs.rs`): no stall keeps one from its trace.

use std::{
    collections::{HashMap, VecDeque},
    time::Duration,
};

use rocsync_common::{Api, StallRecord};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::daemon::{
    serving::protocol::Status,
    triggers::{
        origin::Origin, origin::Start, origin::TraceSpec, origin::Unasked, origin::slow_call,
        trigger::Action, trigger::Began, trigger::Trigger, view::View,
    },
};
use crate::os::clock;

/// Stall traces listed by `rocsync status`.
const LISTED: usize = 16;

/// Stall traces on the node per interval at most, whoever stalls.
pub(crate) const NODE_MAX: usize = 8;
/// A stall this many times longer than the longest traced within the interval (of its
/// process, of its user) is traced all the same.
pub(crate) const MUCH_LONGER: u32 = 4;

/// Why a stall got no trace of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Skipped {
    /// Another stall of the process, or of its user, was traced within the interval
    /// (and this one is not [`MUCH_LONGER`]).
    Interval,
    /// The node had [`NODE_MAX`] stall traces within the interval.
    NodeLimit,
    /// The trace could not start (it has exited).
    NotStarted,
    /// A hang trace records the process already (it holds the stall).
    Hang,
}

/// A stall traced: when its trace began, and the longest stall traced since then.
#[derive(Clone, Copy)]
struct Traced {
    at: Instant,
    longest: Duration,
}

#[derive(Default)]
pub(crate) struct Stalls {
    /// Each process's and each user's last traced stall, within the interval.
    by_pid: HashMap<u32, Traced>,
    by_uid: HashMap<u32, Traced>,
    /// When the node's stall traces of the last interval began.
    node: VecDeque<Instant>,
    pub traces: u64,
    pub skipped_interval: u64,
    pub skipped_node_limit: u64,
    pub skipped_not_started: u64,
    pub skipped_hang: u64,
    /// The newest stall traces' files.
    pub recent: VecDeque<String>,
}

impl Stalls {
    /// Whether a stall of `pid` (of user `uid`) that took `took` may have a trace of its
    /// own now.
    pub(crate) fn admit(
        &mut self,
        (pid, uid): (u32, u32),
        (now, took): (Instant, Duration),
        interval: Duration,
    ) -> Result<(), Skipped> {
        let fresh = |t: &Traced| now.duration_since(t.at) < interval;
        self.by_pid.retain(|_, t| fresh(t));
        self.by_uid.retain(|_, t| fresh(t));
        while self
            .node
            .front()
            .is_some_and(|&t| now.duration_since(t) >= interval)
        {
            self.node.pop_front();
        }
        let hidden = |t: Option<&Traced>| t.is_some_and(|t| took < t.longest * MUCH_LONGER);
        if hidden(self.by_pid.get(&pid)) || hidden(self.by_uid.get(&uid)) {
            return Err(Skipped::Interval);
        }
        if self.node.len() >= NODE_MAX {
            return Err(Skipped::NodeLimit);
        }
        self.node.push_back(now);
        for t in [self.by_pid.entry(pid), self.by_uid.entry(uid)] {
            let t = t.or_insert(Traced {
                at: now,
                longest: took,
            });
            t.longest = t.longest.max(took);
        }
        Ok(())
    }

    pub(crate) fn skip(&mut self, why: Skipped) {
        match why {
            Skipped::Interval => self.skipped_interval += 1,
            Skipped::NodeLimit => self.skipped_node_limit += 1,
            Skipped::NotStarted => self.skipped_not_started += 1,
            Skipped::Hang => self.skipped_hang += 1,
        }
    }

    /// A stall trace's files were written.
    pub(crate) fn written(&mut self, files: &[String]) {
        for f in files {
            if self.recent.len() == LISTED {
                self.recent.pop_front();
            }
            self.recent.push_back(f.clone());
        }
    }
}

impl Trigger for Stalls {
    /// A tracked process's synchronisation took longer than the kernel's threshold: a
    /// stall, unless stall capture is off or a hang trace holds it (`taken`).
    fn on_stall(&mut self, r: &StallRecord, taken: bool, v: &View) -> Vec<Action> {
        let Some(threshold) = v.config.capture_on_stall else {
            return Vec::new();
        };
        if taken {
            self.skip(Skipped::Hang);
            return Vec::new();
        }
        let took = Duration::from_nanos(r.exit_ns.saturating_sub(r.entry_ns));
        let uid = crate::os::procfs::uid(r.pid).unwrap_or(u32::MAX);
        let admitted = self.admit(
            (r.pid, uid),
            (Instant::now(), took),
            v.config.stall_interval,
        );
        if let Err(why) = admitted {
            self.skip(why);
            return Vec::new();
        }
        let chain = v.waits_on(r.pid, Api::from_u32(r.api), r.arg0, r.entry_ns);
        let after = v.config.stall_window_after;
        let mut start = trace_of(r, (took, Some(threshold)), after, chain.steps.clone());
        chain.answer(&mut start);
        if let Some(o) = start.origin.object_mut(Unasked::Stall) {
            // For the log line once it begins.
            o["waited_on"] = chain.said.into();
        }
        vec![Action::Start(Box::new(start))]
    }

    fn began(&mut self, _kind: Unasked, stall: &Value, began: Began) {
        let pid = &stall["pid"];
        match began {
            Ok((_, stem)) => {
                self.traces += 1;
                let took =
                    Duration::from_secs_f64(stall["duration_ms"].as_f64().unwrap_or(0.0) / 1e3);
                let waits = stall["waited_on"]
                    .as_str()
                    .map_or(String::new(), |w| format!(" (waited on {w})"));
                crate::say!(
                    "rocsync daemon: stall: pid {pid}'s {} took {took:.0?}{waits}: tracing it as {stem}.json",
                    stall["api"].as_str().unwrap_or("unknown")
                );
            }
            Err(e) => {
                self.skip(Skipped::NotStarted);
                crate::say!("rocsync daemon: stall of pid {pid} not traced: {e:#}");
            }
        }
    }

    fn on_written(&mut self, files: &[String]) {
        self.written(files);
    }

    fn status(&self, s: &mut Status, _now_ns: u64) {
        s.stall_traces = self.recent.iter().cloned().collect();
    }
}

/// The trace of a stall that took `took`, as its return said (`threshold`: the stall
/// threshold in effect); `window`: how long it records after.
/// `waits_on`: what the call waited on (`chain.rs`), in the wall clock.
pub(crate) fn trace_of(
    r: &StallRecord,
    (took, threshold): (Duration, Option<Duration>),
    window: Duration,
    waits_on: Vec<serde_json::Value>,
) -> Start {
    let api = Api::from_u32(r.api).map_or("unknown", |a| a.symbol());
    let offset = clock::realtime_offset_ns();
    let unix_us = |mono_ns: u64| (mono_ns as i64 + offset) / 1000;
    let stall = json!({
        "api": api, "pid": r.pid, "tid": r.tid, "device": r.device,
        "arg0": format!("{:#x}", r.arg0), "ret": r.ret,
        "entry_unix_us": unix_us(r.entry_ns), "exit_unix_us": unix_us(r.exit_ns),
        "duration_ms": took.as_secs_f64() * 1e3,
        "threshold_ms": threshold.map(|t| t.as_secs_f64() * 1e3),
        "waits_on": waits_on,
    });
    let spec = TraceSpec::of(r.pid, window, format!("stall-{api}-{}", r.pid));
    let mut start = Start::new(spec, Origin::Unasked(Unasked::Stall, stall));
    // Its row: it returned before its trace began.
    let returned = (r.entry_ns, Some((r.exit_ns, r.ret)));
    start.slow_call =
        Api::from_u32(r.api).map(|api| slow_call(api, (r.pid, r.tid), returned, r.arg0));
    start
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_trace_per_interval_per_process_and_per_user_unless_much_longer() {
        let mut s = Stalls::default();
        let t = Instant::now();
        let i = Duration::from_secs(60);
        let ms = Duration::from_millis;
        let at = |secs| t + Duration::from_secs(secs);
        assert_eq!(s.admit((1, 100), (t, ms(80)), i), Ok(()));
        assert_eq!(
            s.admit((1, 100), (at(1), ms(80)), i),
            Err(Skipped::Interval)
        );
        // Another process of the same user: the user's interval holds.
        assert_eq!(
            s.admit((2, 100), (at(2), ms(300)), i),
            Err(Skipped::Interval)
        );
        // Another user's process is not hidden by them.
        assert_eq!(s.admit((3, 200), (at(2), ms(60)), i), Ok(()));
        // Four times the longest traced: traced, and the bar rises with it.
        assert_eq!(s.admit((1, 100), (at(3), ms(320)), i), Ok(()));
        assert_eq!(
            s.admit((1, 100), (at(4), ms(1000)), i),
            Err(Skipped::Interval)
        );
        assert_eq!(s.admit((1, 100), (at(5), ms(1280)), i), Ok(()));
        // The interval passed: any stall again.
        assert_eq!(s.admit((1, 100), (t + i, ms(60)), i), Ok(()));
    }

    #[test]
    fn the_node_traces_at_most_its_limit_per_interval() {
        let mut s = Stalls::default();
        let t = Instant::now();
        let i = Duration::from_secs(60);
        let ms = Duration::from_millis(80);
        for uid in 0..NODE_MAX as u32 {
            assert_eq!(s.admit((uid, uid), (t, ms), i), Ok(()));
        }
        let late = t + Duration::from_secs(1);
        assert_eq!(s.admit((99, 99), (late, ms), i), Err(Skipped::NodeLimit));
        assert_eq!(s.admit((99, 99), (t + i, ms), i), Ok(()));
    }
}
