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

use std::{
    collections::{BTreeMap, HashMap},
    time::Duration,
};

use rocsync_common::{Api, Cookie, PendingCall};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::clock;
use crate::daemon::{
    serving::protocol::Hung,
    triggers::{Origin, Start, TraceSpec, slow_call},
};

/// A call in flight as the kernel keeps it: (pid, tid, its start).
pub type InFlight = (u32, u32, PendingCall);
/// A call blocked past the threshold: (pid, tid, API, its entry, its first argument).
pub type Blocked = (u32, u32, Api, u64, u64);

/// The oldest age of each synchronising API's calls in flight (seconds), and the calls
/// blocked `threshold` or longer, among `tracked` processes'.
/// Polls are not blocked calls: each returns at once, their loop is not one call.
fn scan(
    calls: &[InFlight],
    tracked: impl Fn(u32) -> bool,
    now_ns: u64,
    threshold: std::time::Duration,
) -> (BTreeMap<&'static str, f64>, Vec<Blocked>) {
    let mut oldest = BTreeMap::<&'static str, f64>::new();
    let mut blocked = Vec::new();
    for &(pid, tid, c) in calls {
        let Some(api) = Api::from_u32(c.api) else {
            continue;
        };
        if !tracked(pid) || Cookie::of(api).kind() != Cookie::KIND_SYNC || api.is_polling() {
            continue;
        }
        let age = now_ns.saturating_sub(c.ns);
        let o = oldest.entry(api.symbol()).or_default();
        *o = o.max(age as f64 / 1e9);
        if age >= threshold.as_nanos() as u64 {
            blocked.push((pid, tid, api, c.ns, c.arg0));
        }
    }
    (oldest, blocked)
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

/// Hang traces one user may have recording at once: others' hangs always find room.
pub const PER_USER: usize = 4;
/// Hang traces recording at once on the node.
pub const PER_NODE: usize = 32;

/// Why a hang has no trace (yet).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Untraced {
    /// The process's last hang trace began within `--stall-interval`: looked at again.
    Interval,
    /// Its user has [`PER_USER`] hang traces recording: looked at again.
    UserLimit,
    /// The node has [`PER_NODE`] recording: looked at again.
    NodeLimit,
    /// Its trace could not start (its process exited): not again.
    NotStarted,
}

impl Untraced {
    pub const ALL: [Untraced; 4] = [
        Untraced::Interval,
        Untraced::UserLimit,
        Untraced::NodeLimit,
        Untraced::NotStarted,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Untraced::Interval => "interval",
            Untraced::UserLimit => "user_limit",
            Untraced::NodeLimit => "node_limit",
            Untraced::NotStarted => "not_started",
        }
    }
}

/// The hangs' own rate limits: per process (an interval), per user and per node (hang
/// traces recording at once).
#[derive(Default)]
pub struct Admission {
    /// When each process's last hang trace began.
    last: HashMap<u32, Instant>,
}

impl Admission {
    /// Whether a hang of `pid` (of user `uid`) may begin its trace now; `recording`: the
    /// users of the hang traces recording.
    pub fn admit(
        &mut self,
        (pid, uid): (u32, u32),
        now: Instant,
        interval: Duration,
        recording: &[u32],
    ) -> Result<(), Untraced> {
        self.last.retain(|_, t| now.duration_since(*t) < interval);
        if self.last.contains_key(&pid) {
            return Err(Untraced::Interval);
        }
        if recording.iter().filter(|&&u| u == uid).count() >= PER_USER {
            return Err(Untraced::UserLimit);
        }
        if recording.len() >= PER_NODE {
            return Err(Untraced::NodeLimit);
        }
        self.last.insert(pid, now);
        Ok(())
    }
}

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
}

#[derive(Default)]
pub struct Hangs {
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
    pub fn look(
        &mut self,
        calls: &[InFlight],
        tracked: impl Fn(u32) -> bool,
        now_ns: u64,
        threshold: Duration,
    ) -> (Vec<(u32, u64, &'static str)>, Vec<Blocked>) {
        let (oldest, blocked) = scan(calls, tracked, now_ns, threshold);
        self.oldest = oldest;
        let ended: Vec<_> = ended(&self.open, calls, crate::procfs::exists)
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
    pub fn shown(&self, now_ns: u64) -> Vec<Hung> {
        let mut hung: Vec<Hung> = (self.open.iter())
            .map(|(&pid, h)| Hung {
                pid,
                tid: h.tid,
                api: h.api.symbol().into(),
                blocked_s: now_ns.saturating_sub(h.entry_ns) as f64 / 1e9,
                waits_on: h.waits_on.clone(),
            })
            .collect();
        hung.sort_by_key(|h| h.pid);
        hung
    }

    /// The hang of `pid` ended: its trace's id (none: no hang open).
    pub fn end(&mut self, pid: u32) -> Option<u64> {
        let h = self.open.remove(&pid)?;
        self.ended.insert(pid, h.entry_ns);
        Some(h.trace)
    }

    /// A stall's return of `pid`: the open hang's trace, and whether the stall is that
    /// hang's own call (then it returned).
    pub fn of_return(&self, pid: u32, tid: u32, entry_ns: u64) -> Option<(u64, bool)> {
        let h = self.open.get(&pid)?;
        Some((h.trace, h.tid == tid && h.entry_ns == entry_ns))
    }

    /// Whether the hang `blocked` of user `uid` may begin its trace now (`recording`:
    /// whether a trace is still recording), else held back, counted and said.
    pub fn admit(
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
    pub fn began(&mut self, blocked: Blocked, uid: u32, trace: u64, waits_on: Option<String>) {
        let (pid, tid, api, entry_ns, _) = blocked;
        self.held.remove(&pid);
        let hang = Hang {
            trace,
            tid,
            api,
            entry_ns,
            uid,
            waits_on,
        };
        self.open.insert(pid, hang);
        self.traces += 1;
    }

    /// The trace of `blocked` could not start: not looked at again.
    pub fn not_started(&mut self, (pid, _, _, entry_ns, _): Blocked, e: &anyhow::Error) {
        self.hold(pid, entry_ns, Untraced::NotStarted, &format!(": {e:#}"));
    }
}

/// The trace of the hang `blocked`, found `now_ns`: it records until `bound` at the
/// latest (its `ended` says "bound" until the call is seen to return or its process to
/// exit).
/// `waits_on`: what the call waits on (`chain.rs`), in the wall clock.
pub fn trace_of(blocked: Blocked, now_ns: u64, bound: Duration, waits_on: Vec<Value>) -> Start {
    let (pid, tid, api, entry_ns, arg0) = blocked;
    let offset = clock::realtime_offset_ns();
    let hang = json!({
        "api": api.symbol(), "pid": pid, "tid": tid,
        "entry_unix_us": (entry_ns as i64 + offset) / 1000,
        "blocked_ms_when_found": now_ns.saturating_sub(entry_ns) as f64 / 1e6,
        "waits_on": waits_on,
        "ended": "bound",
    });
    let spec = TraceSpec::of(pid, bound, format!("hang-{}-{pid}", api.symbol()));
    let mut start = Start::new(spec, Origin::Hang(hang));
    // Its row, still in flight: its exit, when it comes, completes it.
    start.slow_call = Some(slow_call(api, (pid, tid), (entry_ns, None), arg0));
    start
}

#[cfg(test)]
#[path = "hangs_tests.rs"]
mod tests;
