//! The daemon's own traces: a stall found at its return, a hang while its call still
//! blocks. The triggers (`triggers/stalls.rs`, `triggers/hangs.rs`) decide and say what
//! to record; here their `Start`s begin, and a hang's end shortens its trace.

use std::time::Duration;

use rocsync_common::{Api, CommState, Dependency, LastCollective, StallRecord};
use serde_json::Value;
use tokio::time::Instant;

use crate::{
    clock,
    daemon::{
        budget::cycle::DutyCycle,
        state::Daemon,
        triggers::{Origin, Start, chain, collectives, hangs, stalls},
    },
    probes::Probes,
};

impl Daemon {
    /// A tracked process's synchronisation took longer than the kernel's threshold: a
    /// stall, or without stall capture only the return of a hang's call.
    pub fn on_stall(&mut self, r: StallRecord) {
        if !self.tracker.tracked.contains(&r.pid) {
            return;
        }
        // Its hang ends now, not at the next look (by which the process may be gone).
        let of_hang = self.stall_of_hang(r.pid, r.tid, r.entry_ns);
        if self.config.capture_on_stall.is_none() {
            return;
        }
        if of_hang {
            return self.stalls.skip(stalls::Skipped::Hang);
        }
        let took = Duration::from_nanos(r.exit_ns.saturating_sub(r.entry_ns));
        let uid = crate::procfs::uid(r.pid).unwrap_or(u32::MAX);
        let interval = self.config.stall_interval;
        let admitted = self
            .stalls
            .admit((r.pid, uid), (Instant::now(), took), interval);
        if let Err(why) = admitted {
            return self.stalls.skip(why);
        }
        let (threshold, after) = (self.config.capture_on_stall, self.config.stall_window_after);
        let chain = self.waits_on(r.pid, Api::from_u32(r.api), r.arg0, r.entry_ns);
        let waits = (chain.said.as_ref()).map_or(String::new(), |w| format!(" (waited on {w})"));
        let mut start = stalls::trace_of(&r, (took, threshold), after, chain.steps.clone());
        chain.answer(&mut start);
        let api = Api::from_u32(r.api).map_or("unknown", |a| a.symbol());
        match self.begin(start) {
            Ok(trace) => {
                let stem = trace.stem.clone();
                self.stalls.traces += 1;
                crate::say!(
                    "rocsync daemon: stall: pid {}'s {api} took {took:.0?}{waits}: tracing it as {stem}.json",
                    r.pid
                );
            }
            Err(e) => {
                self.stalls.skip(stalls::Skipped::NotStarted);
                crate::say!("rocsync daemon: stall of pid {} not traced: {e:#}", r.pid);
            }
        }
    }

    /// Looks at the calls in flight: hangs begin and end.
    pub fn check_in_flight(&mut self) {
        self.hangs.oldest.clear();
        // On by default, stall capture or not: a hang is one whatever the workload.
        let Some(after) = self.config.hang_after else {
            return;
        };
        let Ok(calls) = self.tracker.probes.calls_in_flight() else {
            return;
        };
        let now_ns = clock::monotonic_ns() as u64;
        // A process gone stays tracked until pruned; its last call is no longer in flight.
        let tracker = &self.tracker;
        let tracked = |pid| tracker.tracked.contains(&pid) && crate::procfs::exists(pid);
        let (ended, blocked) = self.hangs.look(&calls, tracked, now_ns, after);
        for (pid, trace, how) in ended {
            self.hang_ended(pid, trace, how);
        }
        for b in blocked {
            self.begin_hang(b, now_ns);
        }
    }

    /// The hang of `pid`, traced by `trace`, ended (`how`: returned, exited): its trace
    /// goes on for the window after a stall (after a return), then is written.
    fn hang_ended(&mut self, pid: u32, trace: u64, how: &'static str) {
        let after = match how {
            "returned" => self.config.stall_window_after,
            _ => Duration::ZERO,
        };
        let until = Instant::now() + after;
        let traces = self.sessions.traces.iter_mut().map(|(_, t)| t);
        for t in traces {
            let waited = match &mut t.origin {
                Origin::Hang(hang) if t.id == trace => {
                    hang["ended"] = how.into();
                    true
                }
                // A laggard's trace ends with the hang that waited for it.
                Origin::Behind(b) if b["waited_by"]["pid"] == pid => {
                    b["ended"] = "hang_ended".into();
                    true
                }
                _ => false,
            };
            if waited {
                t.until = t.until.min(until);
            }
        }
        crate::say!("rocsync daemon: hang of pid {pid}: the call {how}");
    }

    /// A stall's return: whether a hang trace of its process records it now. Its own
    /// call returning ends the hang. Once `--hang-bound` has passed, the hang's trace is
    /// written and holds nothing more: the stall is then like any other.
    fn stall_of_hang(&mut self, pid: u32, tid: u32, entry_ns: u64) -> bool {
        let Some((trace, own)) = self.hangs.of_return(pid, tid, entry_ns) else {
            return false;
        };
        let recording = self.sessions.traces.iter().any(|(_, t)| t.id == trace);
        if own && self.hangs.end(pid).is_some() {
            self.hang_ended(pid, trace, "returned");
        }
        recording
    }

    fn begin_hang(&mut self, blocked: hangs::Blocked, now_ns: u64) {
        let (pid, tid, api, _, _) = blocked;
        let uid = crate::procfs::uid(pid).unwrap_or(u32::MAX);
        let traces = &self.sessions.traces;
        let recording = |id: u64| traces.iter().any(|(_, t)| t.id == id);
        let interval = self.config.stall_interval;
        if !self.hangs.admit(blocked, uid, interval, recording) {
            return;
        }
        let (_, _, _, entry_ns, arg0) = blocked;
        let chain = self.waits_on(pid, Some(api), arg0, entry_ns);
        let waits = (chain.said.as_ref()).map_or(String::new(), |w| format!(", waits on {w}"));
        let mut start =
            hangs::trace_of(blocked, now_ns, self.config.hang_bound, chain.steps.clone());
        chain.answer(&mut start);
        let waited_by = match &start.origin {
            Origin::Hang(h) => h.clone(),
            _ => Value::Null,
        };
        let (said, behind) = (chain.said, chain.behind);
        match self.begin(start) {
            Ok(trace) => {
                let (id, stem) = (trace.id, trace.stem.clone());
                self.hangs.began(blocked, uid, id, said);
                crate::say!(
                    "rocsync daemon: hang: pid {pid}'s {} (thread {tid}) still blocked{waits}: tracing it as {stem}.json",
                    api.symbol()
                );
                for b in &behind {
                    self.trace_behind(b, &waited_by);
                }
            }
            Err(e) => self.hangs.not_started(blocked, &e),
        }
    }

    /// A rank other ranks wait for in a collective: traced too, unless a trace of it
    /// as a laggard records already or [`collectives::MAX_BEHIND_TRACES`] do.
    fn trace_behind(&mut self, b: &Value, waited_by: &Value) {
        let behind: Vec<u32> = (self.sessions.traces.iter())
            .filter_map(|(_, t)| match &t.origin {
                Origin::Behind(o) => o["pid"].as_u64().map(|p| p as u32),
                _ => None,
            })
            .collect();
        let pid = b["pid"].as_u64().map(|p| p as u32);
        if pid.is_none_or(|p| behind.contains(&p)) || behind.len() >= collectives::MAX_BEHIND_TRACES
        {
            return;
        }
        let Some(start) = collectives::trace_of_behind(b, waited_by, self.config.hang_bound) else {
            return;
        };
        match self.begin(start) {
            Ok(trace) => crate::say!(
                "rocsync daemon: rank behind: pid {} is at #{} of comm {}: tracing it as {}.json",
                b["pid"],
                b["seq"],
                b["comm"].as_str().unwrap_or("?"),
                trace.stem
            ),
            Err(e) => crate::say!(
                "rocsync daemon: rank behind (pid {}) not traced: {e:#}",
                b["pid"]
            ),
        }
    }

    /// What `pid`'s call `api(arg0)`, entered at `entry_ns`, waits on, from the probes'
    /// dependency state: its steps (in the wall clock), the line that says it, and the
    /// collective it ends at with the local ranks behind it (`collective`, `behind`).
    fn waits_on(&self, pid: u32, api: Option<Api>, arg0: u64, entry_ns: u64) -> Chain {
        let probes = &self.tracker.probes;
        // Its records and waits cycled at some moment: the spans they were off.
        let cycle = (self.budget.cycle.was_cycled(pid)).then_some(&self.budget.cycle);
        let state = Of(probes, pid, cycle);
        let steps = api.map_or_else(Vec::new, |api| chain::waits_on(api, arg0, entry_ns, &state));
        let mut said = chain::said(&steps, entry_ns);
        let collective = chain::collective(&steps).cloned().unwrap_or(Value::Null);
        // Only the waiter's own user's processes: a communicator id is a hash anyone can
        // forge, and naming (and tracing) another user's process on its say-so is not on.
        let uid = crate::procfs::uid(pid);
        let tracked = |p: u32| {
            uid.is_some()
                && p != pid
                && self.tracker.tracked.contains(&p)
                && crate::procfs::uid(p) == uid
        };
        let behind = collectives::behind(&collective, &probes.comms(), tracked);
        if let (Some(s), Some(b)) = (&mut said, collectives::said_behind(&behind)) {
            s.push_str(&b);
        }
        let steps = chain::on_wall_clock(steps, clock::realtime_offset_ns());
        Chain {
            steps,
            said,
            collective,
            behind,
        }
    }
}

/// What a slow call waits on ([`Daemon::waits_on`]).
struct Chain {
    steps: Vec<Value>,
    said: Option<String>,
    collective: Value,
    behind: Vec<Value>,
}

impl Chain {
    /// Its collective and the ranks behind, in the stall or hang object.
    fn answer(&self, start: &mut Start) {
        if let Origin::Hang(o) | Origin::Stall(o) = &mut start.origin {
            o["collective"] = self.collective.clone();
            o["behind"] = self.behind.clone().into();
        }
    }
}

/// One process's dependency state, as the probes keep it, and the duty cycle its records
/// and waits are in, if they are.
struct Of<'a>(&'a Probes, u32, Option<&'a DutyCycle>);

impl chain::State for Of<'_> {
    fn last_wait(&self, stream: u64) -> Option<Dependency> {
        self.0.last_wait(self.1, stream)
    }
    fn last_record(&self, event: u64) -> Option<Dependency> {
        self.0.last_record(self.1, event)
    }
    fn last_collective(&self, stream: u64) -> Option<LastCollective> {
        self.0.last_collective(self.1, stream)
    }
    fn comm(&self, handle: u64) -> Option<CommState> {
        self.0.comm(self.1, handle)
    }
    fn blind_between(&self, from_ns: u64, to_ns: u64) -> bool {
        self.2.is_some_and(|c| c.blind_between(from_ns, to_ns))
    }
}
