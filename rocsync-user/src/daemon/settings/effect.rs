//! The settings the daemon uses, as `config.rs` converts them from what was given.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use crate::daemon::{
    outputs::{destinations, retention::Retention, upload::StoreSettings},
    tracking::{filters::Filters, pods::MetricLabels},
};
use crate::{kubernetes::HostState, units::Share};

/// The settings in effect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DaemonConfig {
    /// Answer dynolog's `dyno gputrace` here.
    pub dynolog_addr: Option<SocketAddr>,
    /// Keep every tracked process's calls of this last span in memory.
    pub flight_recorder: Option<Duration>,
    /// Sampled windows: record every tracked process for `.0` every `.1`.
    pub sampling: Option<(Duration, Duration)>,
    pub retention: Retention,
    pub socket: PathBuf,
    /// Besides root, members of this group may ask for traces.
    pub group: Option<u32>,
    pub state_dir: PathBuf,
    pub metrics_addr: SocketAddr,
    pub filters: Filters,
    /// How long processes found at start have their threads' devices learnt (zero: not).
    pub learn_devices: Duration,
    /// The probes' most share of a tracked process's CPU time (`None`: no budget).
    pub budget: Option<Share>,
    /// Records and waits over the budget are duty-cycled (`--budget-mode cycle`).
    pub budget_cycles: bool,
    /// Every return probe attached while only counting (`--return-probes all`).
    pub all_returns: bool,
    /// A synchronisation longer than this gets a trace of its process (`None`: never).
    pub capture_on_stall: Option<Duration>,
    /// How long a stall trace goes on after the stall.
    pub stall_window_after: Duration,
    /// At most one stall trace per process, and per node, this often.
    pub stall_interval: Duration,
    /// Longest a hang trace records a process whose call has not returned.
    pub hang_bound: Duration,
    /// A synchronisation still blocked this long is a hang (at least the stall
    /// threshold; `None`: hangs are not looked for).
    pub hang_after: Option<Duration>,
    /// A trace file that reaches this size ends, marked truncated.
    pub trace_max_bytes: u64,
    /// Where the kubelet and the container runtimes keep what names a pod.
    pub host_state: HostState,
    /// Where traces are uploaded (`None`: they stay on the node).
    pub upload: Option<StoreSettings>,
    /// This node's name in upload keys (as set; see [`crate::daemon::outputs::upload::node_name`]).
    pub node_name: Option<String>,
    /// Labels the per-API series gain (none by default: each multiplies the series).
    pub metric_labels: MetricLabels,
    /// The most labelled series one pod may have.
    pub max_series_per_pod: u32,
    /// The node's daemon lock (a flag only: a reload keeps the one taken at start).
    pub lock: PathBuf,
}

impl DaemonConfig {
    /// The duration past which the kernel announces a synchronisation's return: the stall
    /// threshold, else the hang threshold, so that a hang's call returning ends its trace
    /// at once, stall capture or not (`rocsync_stalls_total` counts past it).
    pub(crate) fn kernel_threshold(&self) -> Option<Duration> {
        self.capture_on_stall.or(self.hang_after)
    }

    /// What the destinations of written traces follow.
    pub(crate) fn destinations(&self) -> destinations::Settings<'_> {
        destinations::Settings {
            upload: self.upload.as_ref(),
            node_name: self.node_name.as_deref(),
            state_dir: &self.state_dir,
            retention: self.retention,
        }
    }
}
