//! The daemon's unix-socket protocol, one set of types for both ends: a client
//! (`rocsync trace`, `rocsync status`, a standalone capture's claim) writes one
//! [`Request`] as a JSON line; the daemon answers one [`Reply`] line and closes (a claim's
//! connection stays open: the claim lasts as long as it).
//!
//! - `{"trace": {"pids": [P, …] | "all": true | "cgroup": PATH | "pod": {"namespace": NS,
//!   "name": NAME} | "flight": true, "duration_ms": N, "name": S, "agents": "0,1",
//!   "send_files": true}}`, answered
//!   `{"files": [PATH, …], "pids": [P, …]}` once written (with `send_files`, a read-only
//!   descriptor of each file rides along), or `{"error": MESSAGE}`;
//! - `{"claim": {"name": S, "agents": "0,1" | null}}`: a standalone capture's agents,
//!   answered `{"claimed": S}` and held until the client closes the connection;
//! - `{"status": {}}`: the tracked processes (with their pod, when in one) and the
//!   sessions running.

use serde::{Deserialize, Serialize};

use crate::{
    calls::agents::AgentSet,
    kubernetes::{Pod, PodName},
};

/// Pids one request may name (a node's ranks are far fewer).
pub(crate) const MAX_PIDS: usize = 1024;

/// Where `rocsync daemon` listens unless told otherwise.
pub(crate) const DEFAULT_SOCKET: &str = "/run/rocsync/rocsync.sock";

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Request {
    Trace(TraceRequest),
    Claim(ClaimRequest),
    Status {},
}

/// A trace asked for; checked into the daemon's own request by `socket::checked`.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct TraceRequest {
    /// Processes to record (each must be tracked).
    #[serde(default)]
    pub pids: Vec<u32>,
    /// Every tracked process.
    #[serde(default)]
    pub all: bool,
    /// What the flight recorder holds, at once.
    #[serde(default)]
    pub flight: bool,
    /// The tracked processes whose cgroup path contains this.
    #[serde(default)]
    pub cgroup: Option<String>,
    /// Every tracked process of this pod.
    #[serde(default)]
    pub pod: Option<PodName>,
    #[serde(default)]
    pub agents: AgentSet,
    /// How long to record (default 1 s).
    #[serde(default)]
    pub duration_ms: Option<u64>,
    /// The traces' file name stem.
    #[serde(default)]
    pub name: Option<String>,
    /// Send the written files' descriptors with the answer (`rocsync trace -o`).
    #[serde(default)]
    pub send_files: bool,
}

/// A standalone capture's hold on its agents.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ClaimRequest {
    pub name: String,
    #[serde(default)]
    pub agents: AgentSet,
}

/// The daemon's answer. Fields are in alphabetical order: the answer's bytes are what
/// `rocsync status --json` prints, as they were when the daemon wrote JSON maps.
#[derive(Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum Reply {
    Refused { error: String },
    Claimed { claimed: String },
    Written(Written),
    Status(Status),
}

/// The traces written: each file, and the process it holds.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Written {
    pub files: Vec<String>,
    pub pids: Vec<Option<u32>>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Status {
    /// Standalone captures holding agents.
    pub claims: Vec<String>,
    /// dyno traces waiting for their synchronized start.
    pub scheduled: Vec<Scheduled>,
    /// Traces recording.
    pub traces: Vec<Recording>,
    pub tracked: Vec<Tracked>,
    /// Traces and flight recorder dumps being written.
    pub writing: Vec<String>,
    /// The newest stall traces written (oldest first).
    #[serde(default)]
    pub stall_traces: Vec<String>,
    /// Hangs being traced now, with what each waits on.
    #[serde(default)]
    pub hangs: Vec<Hung>,
    /// Which return probes are attached: `all`, or `needed` (those of the calls that
    /// may block: records', waits' and destroys' only while something records).
    #[serde(default)]
    pub returns_probed: String,
}

/// A synchronisation blocked past `--hang-after`, its trace recording.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Hung {
    pub pid: u32,
    pub tid: u32,
    pub api: String,
    pub blocked_s: f64,
    /// What it waits on, in a line (absent: unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits_on: Option<String>,
    /// Where its thread is: the innermost frame of the program's own code (`step
    /// (train.py:142)`), once its stacks are read.
    #[serde(default, rename = "where", skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Tracked {
    pub exe: String,
    pub pid: u32,
    /// Its Kubernetes pod (absent outside Kubernetes; a part unknown is `null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<Pod>,
    /// Its NCCL/RCCL communicators, as the probes keep them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub communicators: Vec<Communicator>,
    /// What its probes cost it, as the budget measured (absent before a first period).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes: Option<ProbeCost>,
}

/// A tracked process's probes' share of its CPU time over the budget's last period, and
/// the price its calls were counted at: `emulated` or `single_stepped` (its runtime's
/// probed instructions; the daemon's log says both prices).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ProbeCost {
    pub cpu_share: f64,
    pub priced: String,
    /// While its polls are shed: the share its probes cost when they were (the log's
    /// figure); `cpu_share` is measured without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub polls_shed_at: Option<f64>,
}

/// A communicator of a tracked process: its id (the same on every rank; `null` when
/// set up before the daemon tracked it), this process's rank in it, its size, and the
/// number of its last collective.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Communicator {
    pub comm: Option<String>,
    pub rank: Option<u32>,
    pub nranks: Option<u32>,
    pub seq: u64,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Recording {
    pub id: u64,
    pub pids: Vec<u32>,
    pub session: String,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Scheduled {
    pub session: String,
    pub starts_in_ms: u64,
}

impl Reply {
    pub(crate) fn refused(e: &anyhow::Error) -> Self {
        Reply::Refused {
            error: format!("{e:#}"),
        }
    }

    /// As one line on the socket.
    pub(crate) fn line(&self) -> String {
        let mut line = serde_json::to_string(self).expect("a reply serializes");
        line.push('\n');
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_keep_their_wire_form() {
        let r: Request = serde_json::from_str(r#"{"status":{}}"#).unwrap();
        assert!(matches!(r, Request::Status {}));
        assert_eq!(
            serde_json::to_string(&Request::Status {}).unwrap(),
            r#"{"status":{}}"#
        );
        let c = Request::Claim(ClaimRequest {
            name: "run".into(),
            agents: AgentSet::All,
        });
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"claim":{"name":"run","agents":null}}"#
        );
    }

    #[test]
    fn replies_read_back_as_their_kind() {
        let w: Reply = serde_json::from_str(r#"{"files":["/a"],"pids":[7]}"#).unwrap();
        assert!(matches!(w, Reply::Written(Written { ref pids, .. }) if pids == &[Some(7)]));
        let e: Reply = serde_json::from_str(r#"{"error":"no"}"#).unwrap();
        assert!(matches!(e, Reply::Refused { .. }));
        let s = r#"{"claims":[],"scheduled":[],"traces":[],"tracked":[{"exe":"/bin/x","pid":3}],"writing":[],"stall_traces":["/t/stall-x.json"],"hangs":[{"pid":3,"tid":4,"api":"hipStreamSynchronize","blocked_s":2.5,"waits_on":"event 0x1 recorded on stream 0x2 2.0 s before"}],"returns_probed":"needed"}"#;
        let status: Reply = serde_json::from_str(s).unwrap();
        assert_eq!(status.line(), format!("{s}\n"));
        let s = r#"{"claims":[],"scheduled":[],"traces":[],"tracked":[{"exe":"/bin/x","pid":3,"pod":{"namespace":null,"name":"t-0","uid":"u","container":null}}],"writing":[],"stall_traces":[],"hangs":[],"returns_probed":"all"}"#;
        let status: Reply = serde_json::from_str(s).unwrap();
        assert_eq!(status.line(), format!("{s}\n"));
        // An older daemon's status (no stall traces, no hangs) still reads.
        let old = r#"{"claims":[],"scheduled":[],"traces":[],"tracked":[],"writing":[]}"#;
        let status: Reply = serde_json::from_str(old).unwrap();
        assert!(
            matches!(status, Reply::Status(s) if s.stall_traces.is_empty() && s.hangs.is_empty())
        );
    }
}
