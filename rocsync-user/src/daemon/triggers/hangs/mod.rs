//! Hang detection: a synchronisation still blocked after `--hang-after` (5 s by default,
//! with or without stall capture; at least the stall threshold; `off`: none) is a hang
//! candidate while it is blocked (a deadlocked collective never returns, so a stall seen
//! at the return comes too late). Each second the daemon reads the calls in flight the
//! probes keep anyway (each counted thread's call start, `PENDING`); a tracked process
//! with one past the threshold is traced from then — what the flight recorder holds of
//! it first — until the call returns (plus `--stall-window-after`), the process exits,
//! or `--hang-bound` passes: the trace's `rocsync.parameters.hang.ended` says which.
//!
//! Hangs rank above the stalls' rate limits: no stall, of the process or of anyone,
//! keeps a hang from its trace, nor does another trace recording the process (a hang
//! trace takes no agents' claim). Their own limits ([`Admission`]): a process's hang
//! traces begin at most once per `--stall-interval`, a user has at most [`PER_USER`]
//! recording and the node [`PER_NODE`]. A hang held back by them is looked at again
//! each second while it blocks, and counted once per reason.

pub(crate) mod blocked;

use std::{
    collections::{BTreeMap, HashMap},
    time::Duration,
};

use rocsync_common::{Api, StallRecord};
use serde_json::Value;
use tokio::time::Instant;

use crate::daemon::{
    serving::protocol::{Hung, Status},
    triggers::{
        origin::Origin, origin::Unasked, trigger::Action, trigger::Began, trigger::Look,
        trigger::Trigger, view::View,
    },
};
use blocked::scan;
pub(crate) use blocked::{Admission, Blocked, InFlight, Untraced, trace_of};
#[cfg(test)]
use blocked::{PER_NODE, PER_USER};

/// A hang being traced.
struct Hang {
    /// Its trace's id.
    trace: u64,
    tid: u32,
    api: Api,
    entry_ns: u64,
    uid: u32,
    /// What it waits on, in a line.
    waits_on: Option<String>,
    /// Where its thread is, once its stacks are read.
    location: Option<String>,
}

#[derive(Default)]
pub(crate) struct Hangs {
    open: HashMap<u32, Hang>,
    admission: Admission,
    /// Hangs without a trace, by process: (its call's entry, why), each reason counted
    /// and said once per call.
    held: HashMap<u32, (u64, Untraced)>,
    /// Hangs whose trace ended, by process (its call's entry): a call is traced once,
    /// though a killed process's entry stays in flight until it is pruned.
    ended: HashMap<u32, u64>,
    /// Hangs without a trace, by reason (once per call and reason).
    pub untraced: BTreeMap<&'static str, u64>,
    /// The oldest call in flight of each synchronising API, in seconds (last look).
    pub oldest: BTreeMap<&'static str, f64>,
    pub traces: u64,
    /// Hangs whose trace was asked for, not yet begun: (the call, its user, what it
    /// waits on), by process.
    asked: HashMap<u32, (Blocked, u32, Option<String>)>,
}

impl Hangs {
    /// `pid`'s call entered at `entry_ns` has no trace, for `why`: counted and said
    /// once per call and reason.
    fn hold(&mut self, pid: u32, entry_ns: u64, why: Untraced, detail: &str) {
        if self.held.get(&pid) == Some(&(entry_ns, why)) {
            return;
        }
        self.held.insert(pid, (entry_ns, why));
        *self.untraced.entry(why.name()).or_default() += 1;
        let again = match why {
            Untraced::NotStarted => "",
            _ => "; looked at again while it blocks",
        };
        crate::say!(
            "rocsync daemon: hang of pid {pid} not traced ({}){detail}{again}",
            why.name()
        );
    }
}

impl Hangs {
    /// Looks at the calls in flight (`tracked`: whether a pid is tracked and alive):
    /// the oldest ages noted; returns the open hangs that ended (pid, its trace, how;
    /// forgotten here) and the calls blocked past `threshold` that may begin a hang.
    pub(crate) fn look(
        &mut self,
        calls: &[InFlight],
        tracked: impl Fn(u32) -> bool,
        now_ns: u64,
        threshold: Duration,
    ) -> (Vec<(u32, u64, &'static str)>, Vec<Blocked>) {
        let (oldest, blocked) = scan(calls, tracked, now_ns, threshold);
        self.oldest = oldest;
        let ended: Vec<_> = ended(&self.open, calls, crate::os::procfs::exists)
            .into_iter()
            .filter_map(|(pid, how)| Some((pid, self.end(pid)?, how)))
            .collect();
        // A held hang whose call returned is forgotten; a new call is a new hang.
        let in_flight =
            |pid: u32, entry: u64| calls.iter().any(|&(p, _, c)| p == pid && c.ns == entry);
        self.held.retain(|&pid, (entry, _)| in_flight(pid, *entry));
        self.ended.retain(|&pid, entry| in_flight(pid, *entry));
        let fresh = blocked
            .into_iter()
            .filter(|&(pid, _, _, entry_ns, _)| {
                let open = self.open.contains_key(&pid);
                let failed = self.held.get(&pid) == Some(&(entry_ns, Untraced::NotStarted));
                let traced = self.ended.get(&pid) == Some(&entry_ns);
                !open && !failed && !traced
            })
            .collect();
        (ended, fresh)
    }

    /// The hangs being traced, as `rocsync status` shows them (`now_ns`: the probes'
    /// clock now).
    pub(crate) fn shown(&self, now_ns: u64) -> Vec<Hung> {
        let mut hung: Vec<Hung> = (self.open.iter())
            .map(|(&pid, h)| Hung {
                pid,
                tid: h.tid,
                api: h.api.symbol().into(),
                blocked_s: now_ns.saturating_sub(h.entry_ns) as f64 / 1e9,
                waits_on: h.waits_on.clone(),
                location: h.location.clone(),
            })
            .collect();
        hung.sort_by_key(|h| h.pid);
        hung
    }

    /// The hang of `pid` ended: its trace's id (none: no hang open).
    pub(crate) fn end(&mut self, pid: u32) -> Option<u64> {
        let h = self.open.remove(&pid)?;
        self.ended.insert(pid, h.entry_ns);
        Some(h.trace)
    }

    /// A stall's return of `pid`: the open hang's trace, and whether the stall is that
    /// hang's own call (then it returned).
    pub(crate) fn of_return(&self, pid: u32, tid: u32, entry_ns: u64) -> Option<(u64, bool)> {
        let h = self.open.get(&pid)?;
        Some((h.trace, h.tid == tid && h.entry_ns == entry_ns))
    }

    /// Whether the hang `blocked` of user `uid` may begin its trace now (`recording`:
    /// whether a trace is still recording), else held back, counted and said.
    pub(crate) fn admit(
        &mut self,
        blocked: Blocked,
        uid: u32,
        interval: Duration,
        recording: impl Fn(u64) -> bool,
    ) -> bool {
        let users: Vec<u32> = (self.open.values())
            .filter(|h| recording(h.trace))
            .map(|h| h.uid)
            .collect();
        let (pid, _, _, entry_ns, _) = blocked;
        let admitted = self
            .admission
            .admit((pid, uid), Instant::now(), interval, &users);
        match admitted {
            Ok(()) => true,
            Err(why) => {
                self.hold(pid, entry_ns, why, "");
                false
            }
        }
    }

    /// The hang `blocked` of user `uid`, waiting on `waits_on`, is traced by `trace`.
    pub(crate) fn opened(
        &mut self,
        blocked: Blocked,
        uid: u32,
        trace: u64,
        waits_on: Option<String>,
    ) {
        let (pid, tid, api, entry_ns, _) = blocked;
        self.held.remove(&pid);
        let hang = Hang {
            trace,
            tid,
            api,
            entry_ns,
            uid,
            waits_on,
            location: None,
        };
        self.open.insert(pid, hang);
        self.traces += 1;
    }

    /// The trace of `blocked` could not start: not looked at again.
    pub(crate) fn not_started(&mut self, (pid, _, _, entry_ns, _): Blocked, e: &anyhow::Error) {
        self.hold(pid, entry_ns, Untraced::NotStarted, &format!(": {e:#}"));
    }
}

impl Trigger for Hangs {
    /// A stall's return: a hang trace of its process holds it while recording. Its own
    /// call returning ends the hang. Once `--hang-bound` has passed, the hang's trace is
    /// written and holds nothing more: the stall is then like any other.
    fn on_stall(&mut self, r: &StallRecord, _taken: bool, v: &View) -> Vec<Action> {
        let Some((trace, own)) = self.of_return(r.pid, r.tid, r.entry_ns) else {
            return Vec::new();
        };
        let mut actions = Vec::new();
        if own && self.end(r.pid).is_some() {
            actions.push(hang_ended(r.pid, trace, "returned", v));
        }
        if v.recording(trace) {
            actions.push(Action::Took);
        }
        actions
    }

    /// Looks at the calls in flight: hangs begin and end. On by default, stall capture
    /// or not: a hang is one whatever the workload.
    fn on_look(&mut self, look: &Look, v: &View) -> Vec<Action> {
        self.oldest.clear();
        let (Some(after), Some(calls)) = (v.config.hang_after, &look.calls) else {
            return Vec::new();
        };
        // A process gone stays tracked until pruned; its last call is no longer in flight.
        let tracked = |pid| v.tracked(pid) && crate::os::procfs::exists(pid);
        let (gone, blocked) = self.look(calls, tracked, look.now_ns, after);
        let mut actions: Vec<Action> = (gone.into_iter())
            .map(|(pid, trace, how)| hang_ended(pid, trace, how, v))
            .collect();
        for b in blocked {
            actions.extend(
                self.decide(b, look.now_ns, v)
                    .map(|s| Action::Start(Box::new(s))),
            );
        }
        actions
    }

    fn began(&mut self, _kind: Unasked, hang: &Value, began: Began) {
        let pid = hang["pid"].as_u64().unwrap_or_default() as u32;
        let Some((blocked, uid, said)) = self.asked.remove(&pid) else {
            return;
        };
        match began {
            Ok((id, stem)) => {
                let (_, tid, api, _, _) = blocked;
                let waits = said
                    .as_ref()
                    .map_or(String::new(), |w| format!(", waits on {w}"));
                crate::say!(
                    "rocsync daemon: hang: pid {pid}'s {} (thread {tid}) still blocked{waits}: tracing it as {stem}.json",
                    api.symbol()
                );
                self.opened(blocked, uid, id, said);
            }
            Err(e) => self.not_started(blocked, e),
        }
    }

    fn on_stacks(&mut self, origin: &Origin, place: Option<&str>) {
        let Some((Unasked::Hang, o)) = origin.unasked() else {
            return;
        };
        let pid = o["pid"].as_u64().unwrap_or_default() as u32;
        if let Some(h) = self.open.get_mut(&pid) {
            h.location = place.map(String::from);
        }
    }

    fn status(&self, s: &mut Status, now_ns: u64) {
        s.hangs = self.shown(now_ns);
    }
}

impl Hangs {
    /// The trace of a call blocked past the threshold, unless its limits hold it back.
    fn decide(
        &mut self,
        blocked: Blocked,
        now_ns: u64,
        v: &View,
    ) -> Option<crate::daemon::triggers::origin::Start> {
        let (pid, _, api, entry_ns, arg0) = blocked;
        let uid = crate::os::procfs::uid(pid).unwrap_or(u32::MAX);
        if !self.admit(blocked, uid, v.config.stall_interval, |id| v.recording(id)) {
            return None;
        }
        let chain = v.waits_on(pid, Some(api), arg0, entry_ns);
        let mut start = trace_of(blocked, now_ns, v.config.hang_bound, chain.steps.clone());
        chain.answer(&mut start);
        self.asked.insert(pid, (blocked, uid, chain.said));
        Some(start)
    }
}

/// The hang of `pid`, traced by `trace`, ended (`how`: returned, exited): its trace
/// goes on for the window after a stall (after a return), then is written.
fn hang_ended(pid: u32, trace: u64, how: &'static str, v: &View) -> Action {
    crate::say!("rocsync daemon: hang of pid {pid}: the call {how}");
    let after = match how {
        "returned" => v.config.stall_window_after,
        _ => Duration::ZERO,
    };
    Action::End { trace, how, after }
}

/// The open hangs that ended, and how: the process is gone (`exited`; its thread's
/// entry stays in the kernel's map, never returned), or its call is no longer the one in
/// flight on its thread (`returned`). A zombie still `exists`: it ends once reaped.
fn ended(
    open: &HashMap<u32, Hang>,
    calls: &[InFlight],
    exists: impl Fn(u32) -> bool,
) -> Vec<(u32, &'static str)> {
    open.iter()
        .filter_map(|(&pid, h)| {
            let blocked = calls
                .iter()
                .any(|&(p, t, c)| p == pid && t == h.tid && c.ns == h.entry_ns);
            match (blocked, exists(pid)) {
                (true, true) => None,
                (_, true) => Some((pid, "returned")),
                (_, false) => Some((pid, "exited")),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
