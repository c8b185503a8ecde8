//! `rocsync daemon`'s command line: its settings as typed (each also a TOML key) and the
//! filters on which processes it counts.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// Settings in TOML (the keys are the long flags' names with `_`); flags win.
    /// Durations, here and in every flag: seconds (10, 1.5) or 500ms, 10s, 2m, 1h, 7d
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The socket `rocsync trace` asks [default: /run/rocsync/rocsync.sock]
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Members of this group (name or id) may ask for traces, besides root
    #[arg(long, value_name = "GROUP")]
    pub group: Option<String>,
    /// Where the daemon keeps its state and the traces it writes [default: /var/lib/rocsync]
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Serve /metrics and /healthz here [default: 127.0.0.1:9464]
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics_addr: Option<String>,
    #[command(flatten)]
    pub filters: FilterArgs,
    /// Also answer dynolog's `dyno gputrace` here (e.g. 127.0.0.1:1778; it has no
    /// authentication: keep it on localhost); its log files must lie in the state directory
    #[arg(long, value_name = "ADDR:PORT")]
    pub dynolog_addr: Option<String>,
    /// Keep every tracked process's calls of the last DURATION (e.g. 10s) in memory, for
    /// `rocsync trace --flight` (costs a capture's per-call price all the time)
    #[arg(long, value_name = "DURATION", allow_negative_numbers = true)]
    pub flight_recorder: Option<String>,
    /// Record every tracked process for this long (e.g. 2s) every --sample-every
    #[arg(long, value_name = "DURATION", allow_negative_numbers = true)]
    pub sample_window: Option<String>,
    /// How often a sampled window starts (e.g. 5m; the first at a random point of it)
    #[arg(long, value_name = "DURATION", allow_negative_numbers = true)]
    pub sample_every: Option<String>,
    /// Keep the state directory's traces under this total (e.g. 10G), oldest removed first
    #[arg(long, value_name = "SIZE")]
    pub retention_max_bytes: Option<String>,
    /// Remove traces older than this (e.g. 7d)
    #[arg(long, value_name = "DURATION", allow_negative_numbers = true)]
    pub retention_max_age: Option<String>,
    /// Learn the devices of processes running at start from *GetDevice for this long
    /// [default: 100ms]; each call traps meanwhile. 0 or off: never
    #[arg(long, value_name = "DURATION", allow_negative_numbers = true)]
    pub learn_devices: Option<String>,
    /// Most share of a tracked process's CPU time its probes may cost (e.g. 1%, 0.5%)
    /// [default: 1%]: above it, polling calls (*EventQuery) stop being probed until the
    /// rate falls; off: no budget
    #[arg(long, value_name = "PERCENT")]
    pub budget: Option<String>,
    /// Trace a process on its own when one of its synchronisations takes longer than
    /// DURATION (e.g. 50ms): the flight recorder's span before (when on) and
    /// --stall-window-after after, as stall-<api>-<pid>-<time>.json
    #[arg(long, value_name = "DURATION", allow_negative_numbers = true)]
    pub capture_on_stall: Option<String>,
    /// How long a stall trace goes on after the stall [default: 2s]
    #[arg(long, value_name = "DURATION", allow_negative_numbers = true)]
    pub stall_window_after: Option<String>,
    /// At most one stall trace per process, and per node, this often [default: 60s]
    #[arg(long, value_name = "DURATION", allow_negative_numbers = true)]
    pub stall_interval: Option<String>,
    /// A synchronisation still blocked after --hang-after is a hang: its process is
    /// traced until the call returns, the process exits, or this long [default: 2m]
    #[arg(long, value_name = "DURATION", allow_negative_numbers = true)]
    pub hang_bound: Option<String>,
    /// Where the node's kubelet keeps its state (its --root-dir): the pods' namespaces
    /// it projects [default: /var/lib/kubelet]
    #[arg(long, value_name = "DIR")]
    pub kubelet_root: Option<PathBuf>,
    /// Where the container runtimes keep their state (containerd's and CRI-O's bundles
    /// name each container's pod) [default: /run]
    #[arg(long, value_name = "DIR")]
    pub runtime_state: Option<PathBuf>,
    /// A trace that reaches SIZE on disk (any of its files; bytes, or with K, M or G)
    /// ends there, marked truncated: one process cannot fill the disk [default: 512M]
    #[arg(long, value_name = "SIZE")]
    pub trace_max_bytes: Option<String>,
    /// A synchronisation still blocked this long is a hang [default: 1s, at least
    /// --capture-on-stall]
    #[arg(long, value_name = "DURATION", allow_negative_numbers = true)]
    pub hang_after: Option<String>,
    /// Upload every trace written to s3://BUCKET[/PREFIX] (credentials from AWS_* or
    /// ~/.aws/credentials); traces wait on disk while the store is down
    #[arg(long, value_name = "S3_URL")]
    pub upload: Option<String>,
    /// An S3-compatible server's URL for --upload (path-style requests) [default: AWS, or
    /// AWS_ENDPOINT_URL]
    #[arg(long, value_name = "URL")]
    pub upload_endpoint: Option<String>,
    /// The bucket's region for --upload [default: AWS_REGION / AWS_DEFAULT_REGION, else
    /// us-east-1]
    #[arg(long, value_name = "REGION")]
    pub upload_region: Option<String>,
    /// This node's name in upload keys [default: NODE_NAME, else the host name]
    #[arg(long, value_name = "NAME")]
    pub node_name: Option<String>,
    /// Label the per-API series with the Kubernetes namespace and/or pod of the processes
    /// counted (e.g. namespace,pod; empty values outside Kubernetes). Off by default: the
    /// series then grow with the pods on the node
    #[arg(long, value_name = "LABELS", value_delimiter = ',')]
    pub metric_labels: Vec<String>,
    /// Check the configuration, print the settings in effect, and exit
    #[arg(long)]
    pub check: bool,
    /// The lock that keeps one daemon per node [default: /run/rocsync/daemon.lock]
    /// (tests run daemons side by side)
    #[arg(long, value_name = "PATH", hide = true)]
    pub lock: Option<PathBuf>,
}

/// Which processes the daemon counts (each flag may repeat; default: every process that
/// maps a GPU runtime).
#[derive(Debug, Args, Default)]
pub struct FilterArgs {
    /// Only these executables (file name or full path)
    #[arg(long, value_name = "EXE")]
    pub include_exe: Vec<String>,
    /// Never these executables
    #[arg(long, value_name = "EXE")]
    pub exclude_exe: Vec<String>,
    /// Only processes whose cgroup path contains this (a pod, a container)
    #[arg(long, value_name = "PATH")]
    pub include_cgroup: Vec<String>,
    /// Never processes whose cgroup path contains this
    #[arg(long, value_name = "PATH")]
    pub exclude_cgroup: Vec<String>,
    /// Only processes of these users (name or uid)
    #[arg(long = "user", value_name = "USER")]
    pub users: Vec<String>,
}
