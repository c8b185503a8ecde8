//! What a trigger asks to record ([`Start`]: a [`TraceSpec`] and its [`Origin`]), and
//! what each kind of trace says of why.

use std::{path::PathBuf, time::Duration};

use serde_json::Value;

use crate::{
    calls::{agents::AgentSet, ingest::Call},
    daemon::{serving::peer::Peer, serving::socket::PendingReply},
    kubernetes::PodName,
};

/// Longest trace a request may ask for.
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(3600);

/// A trace to record: which processes, which agents, for how long.
#[derive(Debug)]
pub(crate) struct TraceSpec {
    /// Empty: every tracked process (in `cgroup`, when named).
    pub pids: Vec<u32>,
    /// Only tracked processes whose cgroup path contains this (a pod, a container).
    pub cgroup: Option<String>,
    /// Only tracked processes of this pod.
    pub pod: Option<PodName>,
    pub agents: AgentSet,
    pub duration: Duration,
    /// The traces' file name stem (letters, digits, `-`, `_`); the trace's file is
    /// `<name>-<UTC time>-<id>.json`.
    pub name: String,
}

impl TraceSpec {
    /// A trace of one process, on every agent.
    pub(crate) fn of(pid: u32, duration: Duration, name: String) -> Self {
        Self {
            pids: vec![pid],
            cgroup: None,
            pod: None,
            agents: AgentSet::default(),
            duration,
            name,
        }
    }
}

/// Who started a trace, and what it says of why in its `rocsync` object.
#[derive(Debug)]
pub(crate) enum Origin {
    /// `rocsync trace` on the socket.
    Asked,
    /// dyno's `gputrace` from `peer`: written to its log file (`<stem>_<pid>.json`,
    /// never replacing a file), whose name no other request may take meanwhile.
    Dyno { log_file: PathBuf, peer: Peer },
    /// A sampled window.
    Sampled,
    /// The daemon's own trace, unasked: what it is, and its object (the trace's
    /// `rocsync.parameters.<kind>`: the slow call, the rank behind, …).
    Unasked(Unasked, Value),
}

/// The daemon's own traces, by the trigger that decided them. A new trigger adds its
/// kind here: every `match` below is exhaustive, so nothing that names kinds is missed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unasked {
    /// A slow call, at its return (`stalls.rs`).
    Stall,
    /// A call still blocked (`hangs.rs`).
    Hang,
    /// A rank behind in a collective a hang waits in (`behind.rs`).
    Behind,
    /// A rank whose collectives stopped advancing (`stuck.rs`).
    Stuck,
}

impl Unasked {
    /// Its object's key in the trace's `rocsync.parameters`.
    pub(crate) fn key(self) -> &'static str {
        match self {
            Unasked::Stall => "stall",
            Unasked::Hang => "hang",
            Unasked::Behind => "behind",
            Unasked::Stuck => "stuck",
        }
    }

    pub(crate) const ALL: [Unasked; 4] = [
        Unasked::Stall,
        Unasked::Hang,
        Unasked::Behind,
        Unasked::Stuck,
    ];
}

impl Origin {
    /// What a trace of this origin is, as refusals and `rocsync status` name it.
    pub(crate) fn what(&self) -> &'static str {
        match self {
            Origin::Asked => "trace",
            Origin::Dyno { .. } => "dyno trace",
            Origin::Sampled => "sampled window",
            Origin::Unasked(kind, _) => match kind {
                Unasked::Stall => "stall trace",
                Unasked::Hang => "hang trace",
                Unasked::Behind => "trace of a rank behind",
                Unasked::Stuck => "trace of a stuck rank",
            },
        }
    }

    /// The daemon's own traces, unasked: they claim no agents, record beside any
    /// session, begin with what the flight recorder holds, and name their process as
    /// it is (it may have exited since).
    pub(crate) fn unasked(&self) -> Option<(Unasked, &Value)> {
        match self {
            Origin::Unasked(kind, o) => Some((*kind, o)),
            Origin::Asked | Origin::Dyno { .. } | Origin::Sampled => None,
        }
    }

    /// The object of an unasked trace of `kind`, to complete (its end, its stacks).
    pub(crate) fn object_mut(&mut self, kind: Unasked) -> Option<&mut Value> {
        match self {
            Origin::Unasked(k, o) if *k == kind => Some(o),
            _ => None,
        }
    }

    /// Whether it claims its agents, refusing sessions that overlap them. dyno's port
    /// has no authentication: its traces are guests, which never refuse anyone's
    /// (`dyno.rs` bounds them instead), as the daemon's own traces.
    pub(crate) fn claims_agents(&self) -> bool {
        match self {
            Origin::Asked | Origin::Sampled => true,
            Origin::Dyno { .. } | Origin::Unasked(..) => false,
        }
    }

    /// Where its traces go instead of the state directory.
    pub(crate) fn output(&self) -> Option<&std::path::Path> {
        match self {
            Origin::Dyno { log_file, .. } => Some(log_file),
            Origin::Asked | Origin::Sampled | Origin::Unasked(..) => None,
        }
    }
}

/// The slow call a stall or hang trace is for, as the daemon knew it before the trace
/// (a stall's return, a hang's in-flight entry): id 0, since the probes gave it none;
/// `exit`: its return and code, if it returned.
pub(crate) fn slow_call(
    api: rocsync_common::Api,
    (pid, tid): (u32, u32),
    (enter_ns, exit): (u64, Option<(u64, i64)>),
    arg0: u64,
) -> Call {
    Call {
        api,
        pid,
        tid,
        correlation: 0,
        enter_ns,
        exit_ns: exit.map(|(ns, _)| ns),
        ret: exit.map(|(_, ret)| ret),
        args: [arg0, 0, 0],
        filtered: false,
    }
}

/// What a trigger asks to record.
pub(crate) struct Start {
    pub spec: TraceSpec,
    pub origin: Origin,
    /// The client waiting for the files.
    pub reply: Option<PendingReply>,
    /// The slow call a stall or hang trace is for, entered before its recording: the
    /// trace holds it, whether or not the flight recorder does.
    pub slow_call: Option<Call>,
}

impl Start {
    pub(crate) fn new(spec: TraceSpec, origin: Origin) -> Self {
        Self {
            spec,
            origin,
            reply: None,
            slow_call: None,
        }
    }
}
