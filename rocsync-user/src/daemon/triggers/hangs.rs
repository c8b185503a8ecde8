//! Hang detection: a synchronisation still blocked after `--hang-after` (1 s; at least
//! the stall threshold) is a hang candidate while it is blocked (a deadlocked collective
//! never returns, so a stall seen at the return comes too late). Each second the daemon
//! reads the calls in flight the probes keep anyway (each counted thread's call start,
//! `PENDING`); a tracked process with one past the threshold is traced from then — what
//! the flight recorder holds of it first — until the call returns (plus
//! `--stall-window-after`), the process exits, or `--hang-bound` passes: the trace's
//! `rocsync.parameters.hang.ended` says which.
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
use serde_json::json;
use tokio::time::Instant;

use crate::clock;
use crate::daemon::{recording::traces::TraceSpec, state::Daemon, triggers::stalls::stamp};

/// A call in flight as the kernel keeps it: (pid, tid, its start).
type InFlight = (u32, u32, PendingCall);
/// A call blocked past the threshold: (pid, tid, API, its entry).
type Blocked = (u32, u32, Api, u64);

/// The oldest age of each synchronising API's calls in flight (seconds), and the calls
/// blocked `threshold` or longer (pid, tid, API, entry), among `tracked` processes'.
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
            blocked.push((pid, tid, api, c.ns));
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
    entry_ns: u64,
    uid: u32,
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

impl Daemon {
    /// Looks at the calls in flight: hangs begin and end.
    pub fn check_in_flight(&mut self) {
        self.hangs.oldest.clear();
        if self.config.capture_on_stall.is_none() {
            return;
        }
        let threshold = self.config.hang_after;
        let Ok(calls) = self.tracker.probes.calls_in_flight() else {
            return;
        };
        let now_ns = clock::monotonic_ns() as u64;
        // A process gone stays tracked until pruned; its last call is no longer in flight.
        let tracked = |pid| self.tracker.tracked.contains(&pid) && crate::procfs::exists(pid);
        let (oldest, blocked) = scan(&calls, tracked, now_ns, threshold);
        self.hangs.oldest = oldest;
        self.end_hangs(&calls);
        // A held hang whose call returned is forgotten; a new call is a new hang.
        let in_flight =
            |pid: u32, entry: u64| calls.iter().any(|&(p, _, c)| p == pid && c.ns == entry);
        self.hangs
            .held
            .retain(|&pid, (entry, _)| in_flight(pid, *entry));
        self.hangs
            .ended
            .retain(|&pid, entry| in_flight(pid, *entry));
        for (pid, tid, api, entry_ns) in blocked {
            let open = self.hangs.open.contains_key(&pid);
            let failed = self.hangs.held.get(&pid) == Some(&(entry_ns, Untraced::NotStarted));
            let traced = self.hangs.ended.get(&pid) == Some(&entry_ns);
            if !open && !failed && !traced {
                self.begin_hang(pid, tid, api, (entry_ns, now_ns));
            }
        }
    }

    /// Ends the hang traces whose call returned or whose process exited.
    fn end_hangs(&mut self, calls: &[InFlight]) {
        let ended = ended(&self.hangs.open, calls, crate::procfs::exists);
        for (pid, how) in ended {
            self.end_hang(pid, how);
        }
    }

    /// The hang of `pid` ended (`how`: returned, exited): its trace goes on for the
    /// window after a stall (after a return), then is written.
    fn end_hang(&mut self, pid: u32, how: &'static str) {
        let Some(h) = self.hangs.open.remove(&pid) else {
            return;
        };
        self.hangs.ended.insert(pid, h.entry_ns);
        let after = match how {
            "returned" => self.config.stall_window_after,
            _ => Default::default(),
        };
        let until = Instant::now() + after;
        if let Some((_, t)) = self
            .sessions
            .traces
            .iter_mut()
            .find(|(_, t)| t.id == h.trace)
        {
            t.until = t.until.min(until);
            if let Some(hang) = &mut t.hang {
                hang["ended"] = how.into();
            }
        }
        crate::say!("rocsync daemon: hang of pid {pid}: the call {how}");
    }

    /// A stall's return: whether a hang trace of its process records it now. Its own
    /// call returning ends the hang. Once `--hang-bound` has passed, the hang's trace is
    /// written and holds nothing more: the stall is then like any other.
    pub fn stall_of_hang(&mut self, pid: u32, tid: u32, entry_ns: u64) -> bool {
        let Some(h) = self.hangs.open.get(&pid) else {
            return false;
        };
        let own = h.tid == tid && h.entry_ns == entry_ns;
        let trace = h.trace;
        let recording = self.sessions.traces.iter().any(|(_, t)| t.id == trace);
        if own {
            self.end_hang(pid, "returned");
        }
        recording
    }

    /// The users of the hang traces recording now.
    fn hang_traces_recording(&self) -> Vec<u32> {
        let recording = |id: u64| self.sessions.traces.iter().any(|(_, t)| t.id == id);
        self.hangs
            .open
            .values()
            .filter(|h| recording(h.trace))
            .map(|h| h.uid)
            .collect()
    }

    fn begin_hang(&mut self, pid: u32, tid: u32, api: Api, (entry_ns, now_ns): (u64, u64)) {
        let uid = crate::procfs::uid(pid).unwrap_or(u32::MAX);
        let recording = self.hang_traces_recording();
        let admitted = self.hangs.admission.admit(
            (pid, uid),
            Instant::now(),
            self.config.stall_interval,
            &recording,
        );
        if let Err(why) = admitted {
            return self.hangs.hold(pid, entry_ns, why, "");
        }
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        // The id too: names stay unique whatever the limits let through in one second.
        let id = self.take_id();
        let name = format!("hang-{}-{pid}-{}-{id}", api.symbol(), stamp(unix));
        let spec = TraceSpec {
            flight: false,
            pids: vec![pid],
            cgroup: None,
            pod: None,
            agents: Default::default(),
            duration: self.config.hang_bound,
            name: name.clone(),
            output: None,
        };
        let offset = clock::realtime_offset_ns();
        let hang = json!({
            "api": api.symbol(), "pid": pid, "tid": tid,
            "entry_unix_us": (entry_ns as i64 + offset) / 1000,
            "blocked_ms_when_found": now_ns.saturating_sub(entry_ns) as f64 / 1e6,
            // Until it is seen to return or its process to exit.
            "ended": "bound",
        });
        let started = self.trace_one(spec, pid, id, |t| t.hang = Some(hang));
        match started {
            Ok(()) => {
                self.hangs.held.remove(&pid);
                self.hangs.open.insert(
                    pid,
                    Hang {
                        trace: id,
                        tid,
                        entry_ns,
                        uid,
                    },
                );
                self.hangs.traces += 1;
                crate::say!(
                    "rocsync daemon: hang: pid {pid}'s {} (thread {tid}) still blocked: tracing it as {name}.json",
                    api.symbol()
                );
            }
            Err(e) => {
                let detail = format!(": {e:#}");
                self.hangs
                    .hold(pid, entry_ns, Untraced::NotStarted, &detail);
            }
        }
    }
}

#[cfg(test)]
#[path = "hangs_tests.rs"]
mod tests;
