//! Every daemon setting, defined once: its flag and TOML key, its help, its type and its
//! one default, whether a reload keeps it until a restart, and how `--check` shows it
//! (see `defined.rs`). How they combine into the settings in effect is `config.rs`.

use std::{net::SocketAddr, time::Duration};

use super::{
    defined::settings,
    shown::{duration, list, off, or},
    value::{BudgetMode, ReturnProbes},
};
use crate::{
    calls::probes::LEARN_DEVICES,
    daemon::{
        outputs::upload::{S3Url, redacted},
        serving::protocol::DEFAULT_SOCKET,
    },
    kubernetes::{DEFAULT_KUBELET_ROOT, DEFAULT_RUNTIME_STATE},
    units::Share,
};

settings! {
    /// The socket `rocsync trace` asks
    socket: path "PATH" = DEFAULT_SOCKET, restart => |c| c.socket.display().to_string();
    /// Members of this group (name or id) may ask for traces, besides root
    group: text "GROUP", restart => |c| c.group.map_or("none (root only)".into(), |g| format!("gid {g}"));
    /// Where the daemon keeps its state and the traces it writes
    state_dir: path "DIR" = "/var/lib/rocsync" => |c| c.state_dir.display().to_string();
    /// Serve /metrics and /healthz here
    metrics_addr: text "ADDR:PORT" as SocketAddr = "127.0.0.1:9464", restart => |c| c.metrics_addr.to_string();
    /// Also answer dynolog's `dyno gputrace` here (e.g. 127.0.0.1:1778; it has no
    /// authentication: keep it on localhost); its log files must lie in the state directory
    dynolog_addr: text "ADDR:PORT" as SocketAddr, restart => |c| c.dynolog_addr.map_or_else(off, |a| a.to_string());
    /// Keep every tracked process's calls of the last DURATION (e.g. 10s) in memory, for
    /// `rocsync trace --flight` (costs a capture's per-call price while probed; held to
    /// `--budget` by its duty cycle like counting)
    flight_recorder: duration "DURATION" as Duration, restart => |c| c.flight_recorder.map_or_else(off, duration);
    /// Record every tracked process for this long (e.g. 2s) every --sample-every
    sample_window: duration "DURATION" as Duration => |c| c.sampling.map_or_else(off, |(w, _)| duration(w));
    /// How often a sampled window starts (e.g. 5m; the first at a random point of it)
    sample_every: duration "DURATION" as Duration => |c| c.sampling.map_or_else(off, |(_, e)| duration(e));
    /// Keep the state directory's traces under this total (e.g. 10G), shared evenly by the
    /// users of the processes traced: the user most over their share loses their oldest
    /// first [default: a tenth of its file system, at most 4G]; none: no limit
    retention_max_bytes: size "SIZE" as Option<u64> => |c| c.retention.max_bytes.map_or("none".into(), |b| b.to_string());
    /// Remove traces older than this (e.g. 7d)
    retention_max_age: duration "DURATION" as Duration => |c| c.retention.max_age.map_or("none".into(), duration);
    /// Learn the devices of processes running at start from *GetDevice for this long;
    /// each call traps meanwhile. 0 or off: never
    learn_devices: duration "DURATION" as Option<Duration> = LEARN_DEVICES, restart => |c| match c.learn_devices.is_zero() {
        true => off(),
        false => duration(c.learn_devices),
    };
    /// Most share of a tracked process's CPU time its probes may cost (e.g. 1%, 0.5%):
    /// above it, polling calls (*EventQuery) stop being probed until the rate falls,
    /// then records and waits are probed in a duty cycle; off: no budget
    // On the H200 a training loop's probes cost nothing measurable and a dense-sync
    // loop's (~100 000 calls/s) about 17 %: 1 % leaves the first alone and sheds the
    // second's polling.
    budget: percent "PERCENT" as Option<Share> = "1%" => |c| c.budget.map_or_else(off, |b| b.to_string());
    /// How the budget is held: cycle (polls shed, then records, stream waits and
    /// destroys probed one second in N, their counts estimated meanwhile), or shed-only
    /// (polls shed; records and waits always probed, exact, even over budget)
    budget_mode: text "MODE" as BudgetMode = "cycle" => |c| if c.budget_cycles { "cycle" } else { "shed-only" }.into();
    /// Which return probes stay attached while only counting: those of calls that may
    /// block (one trap for records, stream waits, destroys and polls, whose errors are
    /// then not counted), or all (exact error counts, two traps each)
    return_probes: text "MODE" as ReturnProbes = "needed", restart => |c| if c.all_returns { "all" } else { "needed" }.into();
    /// Trace a process on its own when one of its synchronisations takes longer than
    /// DURATION (e.g. 50ms): the flight recorder's span before (when on) and
    /// --stall-window-after after, as stall-<api>-<pid>-<time>.json
    capture_on_stall: duration "DURATION" as Option<Duration> = "off" => |c| c.capture_on_stall.map_or_else(off, duration);
    /// How long a stall trace goes on after the stall
    stall_window_after: duration "DURATION" as Duration = "2s" => |c| duration(c.stall_window_after);
    /// At most one stall trace per process, and per node, this often
    stall_interval: duration "DURATION" as Duration = "60s" => |c| duration(c.stall_interval);
    /// A synchronisation still blocked this long (at least --capture-on-stall) is a hang,
    /// its process traced while it blocks; off: no hang traces
    // Traced with no flag set (`docs/daemon.md`, "Hangs by default"): above the wait a
    // healthy step usually makes at its end, so jobs that run well give no hang traces;
    // far below a real hang's minutes (PyTorch's NCCL watchdog waits 10), so it is
    // traced long before anything kills it; and a 6 s blocked synchronize (as measured
    // on the H100) is caught. Cheap: one read of the kernel's calls in flight a second.
    hang_after: duration "DURATION" as Option<Duration> = "5s" => |c| c.hang_after.map_or_else(off, duration);
    /// A synchronisation still blocked after --hang-after is a hang: its process is
    /// traced until the call returns, the process exits, or this long
    hang_bound: duration "DURATION" as Duration = "2m" => |c| duration(c.hang_bound);
    /// A trace that reaches SIZE on disk (any of its files; bytes, or with K, M or G)
    /// ends there, marked truncated: one process cannot fill the disk
    // A hang beside flooding threads wrote 5.4 GB in 30 s.
    trace_max_bytes: size "SIZE" as u64 = "512M" => |c| c.trace_max_bytes.to_string();
    /// Where the node's kubelet keeps its state (its --root-dir): the pods' namespaces
    /// it projects
    kubelet_root: path "DIR" = DEFAULT_KUBELET_ROOT, restart => |c| c.host_state.kubelet_root.display().to_string();
    /// Where the container runtimes keep their state (containerd's and CRI-O's bundles
    /// name each container's pod)
    runtime_state: path "DIR" = DEFAULT_RUNTIME_STATE, restart => |c| c.host_state.runtime_state.display().to_string();
    /// Upload every trace written to s3://BUCKET[/PREFIX] (credentials from AWS_* or
    /// ~/.aws/credentials); traces wait on disk while the store is down
    upload: text "S3_URL" as S3Url => |c| c.upload.as_ref().map_or_else(off, |u| u.destination.to_string());
    /// An S3-compatible server's URL for --upload (path-style requests) [default: AWS, or
    /// AWS_ENDPOINT_URL]
    upload_endpoint: text "URL" => |c| or(c.upload.as_ref().and_then(|u| u.endpoint.as_deref()).map(redacted), "default");
    /// The bucket's region for --upload [default: AWS_REGION / AWS_DEFAULT_REGION, else
    /// us-east-1]
    upload_region: text "REGION" => |c| or(c.upload.as_ref().and_then(|u| u.region.clone()), "default");
    /// This node's name in upload keys [default: NODE_NAME, else the host name]
    node_name: text "NAME" => |c| or(c.node_name.clone(), "default");
    /// Label the per-API series with the Kubernetes namespace and/or pod of the processes
    /// counted (e.g. namespace,pod; empty values outside Kubernetes). Off by default: the
    /// series then grow with the pods on the node
    metric_labels: labels "LABELS", restart => |c| list(&c.metric_labels.names(), "none");
    /// With --metric-labels, the most series one pod may have of the 1 024 the kernel
    /// holds: past it the pod's calls are counted in the node's series
    /// (rocsync_unlabelled_calls_total), so no pod takes every series
    // Eight pods at the default fill the kernel's.
    max_series_per_pod: count "N" = 128, restart => |c| c.max_series_per_pod.to_string();
    /// Only these executables (file name or full path; may repeat)
    include_exe: list "EXE" => |c| list(&c.filters.include_exe, "any");
    /// Never these executables
    exclude_exe: list "EXE" => |c| list(&c.filters.exclude_exe, "none");
    /// Only processes whose cgroup path contains this (a pod, a container)
    include_cgroup: list "PATH" => |c| list(&c.filters.include_cgroup, "any");
    /// Never processes whose cgroup path contains this
    exclude_cgroup: list "PATH" => |c| list(&c.filters.exclude_cgroup, "none");
    /// Only processes of these users (name or uid)
    user: list "USER" => |c| list(&c.filters.users, "any");
    /// Most runtime library files probed for one user's processes: a user cannot make
    /// the daemon probe files without end
    // A job maps a few (HIP, HSA, a framework carrying its own copy), per container.
    max_files_per_user: count "N" = 16 => |c| c.filters.max_files_per_user.to_string();
}
