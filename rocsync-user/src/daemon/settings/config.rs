//! The daemon's settings: a TOML file (`--config`), every key also a flag (flags win),
//! reloaded on SIGHUP.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Context as _, Result, bail};
use serde::Deserialize;

use crate::daemon::outputs::retention::Retention;
use crate::daemon::outputs::upload::StoreSettings;
use crate::daemon::serving::protocol::DEFAULT_SOCKET;
pub use crate::daemon::tracking::filters::Filters;
use crate::daemon::tracking::pods::MetricLabels;
use crate::kubernetes::HostState;
use crate::units::{Share, duration_key, parse_budget, parse_duration, parse_learning, parse_size};
use crate::users;

pub const DEFAULT_STATE_DIR: &str = "/var/lib/rocsync";
pub const DEFAULT_METRICS_ADDR: &str = "127.0.0.1:9464";
/// One daemon per node: two would count every call twice and record the same processes
/// without seeing each other's sessions.
pub const DEFAULT_LOCK: &str = "/run/rocsync/daemon.lock";
/// The probes' default share of a tracked process's CPU time. On the H200 a training
/// loop's probes cost nothing measurable and a dense-sync loop's (~100 000 calls/s)
/// about 17 %: 1 % leaves the first alone and sheds the second's polling.
pub const DEFAULT_BUDGET: Share = Share(0.01);
/// A stall trace's span after the stall, and the least time between two of a process's
/// (and of the node's) stall traces.
pub const DEFAULT_STALL_WINDOW_AFTER: Duration = Duration::from_secs(2);
pub const DEFAULT_STALL_INTERVAL: Duration = Duration::from_secs(60);
/// A hang trace ends at the latest this long after it began.
pub const DEFAULT_HANG_BOUND: Duration = Duration::from_secs(120);
/// A trace's largest file: a hang beside flooding threads wrote 5.4 GB in 30 s.
pub const DEFAULT_TRACE_MAX_BYTES: u64 = 512 << 20;
/// A synchronisation blocked this long is a hang (a stall is found at its return).
pub const DEFAULT_HANG_AFTER: Duration = Duration::from_secs(1);

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    budget: Option<String>,
    #[serde(default, deserialize_with = "duration_key")]
    capture_on_stall: Option<String>,
    #[serde(default, deserialize_with = "duration_key")]
    stall_window_after: Option<String>,
    #[serde(default, deserialize_with = "duration_key")]
    stall_interval: Option<String>,
    #[serde(default, deserialize_with = "duration_key")]
    hang_bound: Option<String>,
    #[serde(default, deserialize_with = "duration_key")]
    hang_after: Option<String>,
    trace_max_bytes: Option<String>,
    kubelet_root: Option<PathBuf>,
    runtime_state: Option<PathBuf>,
    upload: Option<String>,
    upload_endpoint: Option<String>,
    upload_region: Option<String>,
    node_name: Option<String>,
    dynolog_addr: Option<String>,
    #[serde(default, deserialize_with = "duration_key")]
    learn_devices: Option<String>,
    #[serde(default, deserialize_with = "duration_key")]
    flight_recorder: Option<String>,
    #[serde(default, deserialize_with = "duration_key")]
    sample_window: Option<String>,
    #[serde(default, deserialize_with = "duration_key")]
    sample_every: Option<String>,
    retention_max_bytes: Option<String>,
    #[serde(default, deserialize_with = "duration_key")]
    retention_max_age: Option<String>,
    socket: Option<PathBuf>,
    group: Option<String>,
    state_dir: Option<PathBuf>,
    metrics_addr: Option<String>,
    #[serde(default)]
    include_exe: Vec<String>,
    #[serde(default)]
    exclude_exe: Vec<String>,
    #[serde(default)]
    include_cgroup: Vec<String>,
    #[serde(default)]
    exclude_cgroup: Vec<String>,
    #[serde(default)]
    user: Vec<String>,
    /// The key before it was named as its flag (`--user`): read, with a warning.
    #[serde(default)]
    users: Vec<String>,
    max_files_per_user: Option<usize>,
    #[serde(default)]
    metric_labels: Vec<String>,
}

/// The settings given on the command line (each `None`/empty where not given): the
/// configuration file's name, and the values that win over the file's.
#[derive(Clone, Debug, Default)]
pub struct ConfigFlags {
    pub config: Option<PathBuf>,
    pub socket: Option<PathBuf>,
    pub group: Option<String>,
    pub state_dir: Option<PathBuf>,
    pub metrics_addr: Option<String>,
    pub filters: Filters,
    pub dynolog_addr: Option<String>,
    pub flight_recorder: Option<String>,
    pub sample_window: Option<String>,
    pub sample_every: Option<String>,
    pub retention_max_bytes: Option<String>,
    pub retention_max_age: Option<String>,
    pub learn_devices: Option<String>,
    pub budget: Option<String>,
    pub capture_on_stall: Option<String>,
    pub stall_window_after: Option<String>,
    pub stall_interval: Option<String>,
    pub hang_bound: Option<String>,
    pub hang_after: Option<String>,
    pub trace_max_bytes: Option<String>,
    pub kubelet_root: Option<PathBuf>,
    pub runtime_state: Option<PathBuf>,
    pub upload: Option<String>,
    pub upload_endpoint: Option<String>,
    pub upload_region: Option<String>,
    pub node_name: Option<String>,
    /// Empty: not given.
    pub metric_labels: Vec<String>,
    pub lock: Option<PathBuf>,
}

/// The settings in effect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DaemonConfig {
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
    /// A synchronisation longer than this gets a trace of its process (`None`: never).
    pub capture_on_stall: Option<Duration>,
    /// How long a stall trace goes on after the stall.
    pub stall_window_after: Duration,
    /// At most one stall trace per process, and per node, this often.
    pub stall_interval: Duration,
    /// Longest a hang trace records a process whose call has not returned.
    pub hang_bound: Duration,
    /// A synchronisation still blocked this long is a hang (at least the stall
    /// threshold).
    pub hang_after: Duration,
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
    /// The node's daemon lock (a flag only: a reload keeps the one taken at start).
    pub lock: PathBuf,
}

impl DaemonConfig {
    /// The file's settings under the flags'.
    pub fn load(args: &ConfigFlags) -> Result<Self> {
        let mut file = match &args.config {
            Some(path) => parse_file(path)?,
            None => File::default(),
        };
        if !file.users.is_empty() {
            if !file.user.is_empty() {
                bail!("users: the key is now `user` (as the flag --user): give it once, as user");
            }
            crate::say!(
                "rocsync: warning: the configuration key `users` is deprecated: name it `user`, as the flag --user"
            );
            file.user = std::mem::take(&mut file.users);
        }
        let addr = args
            .metrics_addr
            .clone()
            .or(file.metrics_addr)
            .unwrap_or_else(|| DEFAULT_METRICS_ADDR.into());
        let metrics_addr = addr
            .parse()
            .with_context(|| format!("--metrics-addr {addr:?}: expected ADDRESS:PORT"))?;
        let mut filters = Filters {
            include_exe: file.include_exe,
            exclude_exe: file.exclude_exe,
            include_cgroup: file.include_cgroup,
            exclude_cgroup: file.exclude_cgroup,
            users: file.user,
            max_files_per_user: file.max_files_per_user,
        };
        let flags = &args.filters;
        for (from, into) in [
            (&flags.include_exe, &mut filters.include_exe),
            (&flags.exclude_exe, &mut filters.exclude_exe),
            (&flags.include_cgroup, &mut filters.include_cgroup),
            (&flags.exclude_cgroup, &mut filters.exclude_cgroup),
            (&flags.users, &mut filters.users),
        ] {
            if !from.is_empty() {
                *into = from.clone();
            }
        }
        let pick = |flag: &Option<String>, key: Option<String>| flag.clone().or(key);
        let duration = |name: &str, v: Option<String>| -> Result<Option<Duration>> {
            v.map(|v| parse_duration(&v).map_err(|e| anyhow::anyhow!("{name}: {e}")))
                .transpose()
        };
        let window = duration(
            "sample_window",
            pick(&args.sample_window, file.sample_window),
        )?;
        let every = duration("sample_every", pick(&args.sample_every, file.sample_every))?;
        let dynolog_addr = pick(&args.dynolog_addr, file.dynolog_addr)
            .map(|a| {
                a.parse()
                    .with_context(|| format!("--dynolog-addr {a:?}: expected ADDRESS:PORT"))
            })
            .transpose()?;
        let flight_recorder = duration(
            "flight_recorder",
            pick(&args.flight_recorder, file.flight_recorder),
        )?;
        let sampling = match (window, every) {
            (Some(w), Some(e)) if w < e => Some((w, e)),
            (Some(_), Some(_)) => bail!("sample_window must be shorter than sample_every"),
            (None, None) => None,
            _ => bail!("sampling needs both sample_window and sample_every"),
        };
        let retention = Retention {
            max_bytes: pick(&args.retention_max_bytes, file.retention_max_bytes)
                .map(|v| parse_size(&v).map_err(|e| anyhow::anyhow!("retention_max_bytes: {e}")))
                .transpose()?,
            max_age: duration(
                "retention_max_age",
                pick(&args.retention_max_age, file.retention_max_age),
            )?,
        };
        let learn_devices = pick(&args.learn_devices, file.learn_devices)
            .map(|v| parse_learning(&v).map_err(|e| anyhow::anyhow!("learn_devices: {e}")))
            .transpose()?
            .unwrap_or(crate::probes::LEARN_DEVICES);
        let budget = match pick(&args.budget, file.budget) {
            Some(v) => parse_budget(&v).map_err(|e| anyhow::anyhow!("budget: {e}"))?,
            None => Some(DEFAULT_BUDGET),
        };
        let capture_on_stall = duration(
            "capture_on_stall",
            pick(&args.capture_on_stall, file.capture_on_stall),
        )?;
        let stall_window_after = duration(
            "stall_window_after",
            pick(&args.stall_window_after, file.stall_window_after),
        )?
        .unwrap_or(DEFAULT_STALL_WINDOW_AFTER);
        let stall_interval = duration(
            "stall_interval",
            pick(&args.stall_interval, file.stall_interval),
        )?
        .unwrap_or(DEFAULT_STALL_INTERVAL);
        let hang_bound = duration("hang_bound", pick(&args.hang_bound, file.hang_bound))?
            .unwrap_or(DEFAULT_HANG_BOUND);
        let hang_after = duration("hang_after", pick(&args.hang_after, file.hang_after))?
            .unwrap_or(DEFAULT_HANG_AFTER)
            .max(capture_on_stall.unwrap_or_default());
        let trace_max_bytes = pick(&args.trace_max_bytes, file.trace_max_bytes)
            .map(|v| parse_size(&v).map_err(|e| anyhow::anyhow!("trace_max_bytes: {e}")))
            .transpose()?
            .unwrap_or(DEFAULT_TRACE_MAX_BYTES);
        if trace_max_bytes < 1 << 20 {
            bail!(
                "trace_max_bytes must be at least 1MB (a trace's header and summary alone take kilobytes)"
            );
        }
        let defaults = HostState::default();
        let host_state = HostState {
            kubelet_root: (args.kubelet_root.clone().or(file.kubelet_root))
                .unwrap_or(defaults.kubelet_root),
            runtime_state: (args.runtime_state.clone().or(file.runtime_state))
                .unwrap_or(defaults.runtime_state),
        };
        let upload = match pick(&args.upload, file.upload) {
            Some(url) => Some(StoreSettings {
                destination: url.parse().context("upload")?,
                endpoint: pick(&args.upload_endpoint, file.upload_endpoint),
                region: pick(&args.upload_region, file.upload_region),
            }),
            None => None,
        };
        if stall_interval < Duration::from_secs(1) {
            bail!("stall_interval must be at least 1s (a stall trace's name holds its second)");
        }
        if filters.max_files_per_user == Some(0) {
            bail!("max_files_per_user must be at least 1 (a user's job maps a runtime or two)");
        }
        for u in &filters.users {
            users::user_id(u).context("user")?;
        }
        let labels = match args.metric_labels.is_empty() {
            true => &file.metric_labels,
            false => &args.metric_labels,
        };
        let metric_labels = MetricLabels::parse(labels)?;
        let group = match args.group.clone().or(file.group) {
            Some(g) => Some(users::group_id(&g)?),
            None => None,
        };
        Ok(Self {
            dynolog_addr,
            learn_devices,
            budget,
            capture_on_stall,
            stall_window_after,
            stall_interval,
            hang_bound,
            trace_max_bytes,
            host_state,
            hang_after,
            upload,
            node_name: pick(&args.node_name, file.node_name),
            metric_labels,
            flight_recorder,
            sampling,
            retention,
            socket: args
                .socket
                .clone()
                .or(file.socket)
                .unwrap_or_else(|| DEFAULT_SOCKET.into()),
            group,
            state_dir: args
                .state_dir
                .clone()
                .or(file.state_dir)
                .unwrap_or_else(|| DEFAULT_STATE_DIR.into()),
            metrics_addr,
            filters,
            lock: args.lock.clone().unwrap_or_else(|| DEFAULT_LOCK.into()),
        })
    }
}

fn parse_file(path: &Path) -> Result<File> {
    let meta = std::fs::metadata(path)
        .with_context(|| format!("cannot read the configuration {}", path.display()))?;
    if !meta.is_file() || meta.len() > 1 << 20 {
        bail!(
            "{}: the configuration must be a regular file under 1 MiB",
            path.display()
        );
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the configuration {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("{}: not a valid configuration", path.display()))
}

#[cfg(test)]
mod tests;
