//! Which calls in flight are blocked past the threshold, which hangs ended, and the
//! hangs' own rate limits.

use std::{
    collections::{BTreeMap, HashMap},
    time::Duration,
};

use rocsync_common::{Api, Cookie, PendingCall};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::daemon::triggers::{
    origin::Origin, origin::Start, origin::TraceSpec, origin::Unasked, origin::slow_call,
};
use crate::os::clock;

/// A call in flight as the kernel keeps it: (pid, tid, its start).
pub(crate) type InFlight = (u32, u32, PendingCall);
/// A call blocked past the threshold: (pid, tid, API, its entry, its first argument).
pub(crate) type Blocked = (u32, u32, Api, u64, u64);

/// The oldest age of each synchronising API's calls in flight (seconds), and the calls
/// blocked `threshold` or longer, among `tracked` processes'.
/// Polls are not blocked calls: each returns at once, their loop is not one call.
pub(super) fn scan(
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

/// Hang traces one user may have recording at once: others' hangs always find room.
pub(crate) const PER_USER: usize = 4;
/// Hang traces recording at once on the node.
pub(crate) const PER_NODE: usize = 32;

/// Why a hang has no trace (yet).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Untraced {
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
    pub(crate) const ALL: [Untraced; 4] = [
        Untraced::Interval,
        Untraced::UserLimit,
        Untraced::NodeLimit,
        Untraced::NotStarted,
    ];

    pub(crate) fn name(self) -> &'static str {
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
pub(crate) struct Admission {
    /// When each process's last hang trace began.
    last: HashMap<u32, Instant>,
}

impl Admission {
    /// Whether a hang of `pid` (of user `uid`) may begin its trace now; `recording`: the
    /// users of the hang traces recording.
    pub(crate) fn admit(
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

/// The trace of the hang `blocked`, found `now_ns`: it records until `bound` at the
/// latest (its `ended` says "bound" until the call is seen to return or its process to
/// exit).
/// `waits_on`: what the call waits on (`chain.rs`), in the wall clock.
pub(crate) fn trace_of(
    blocked: Blocked,
    now_ns: u64,
    bound: Duration,
    waits_on: Vec<Value>,
) -> Start {
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
    let mut start = Start::new(spec, Origin::Unasked(Unasked::Hang, hang));
    // Its row, still in flight: its exit, when it comes, completes it.
    start.slow_call = Some(slow_call(api, (pid, tid), (entry_ns, None), arg0));
    start
}
