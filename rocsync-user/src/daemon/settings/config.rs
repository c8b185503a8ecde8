//! The daemon's settings: a TOML file (`--config`), every key also a flag (flags win),
//! reloaded on SIGHUP.

use std::{path::Path, time::Duration};

use anyhow::{Context as _, Result, bail};

use crate::daemon::outputs::retention::{self, Retention};
use crate::daemon::outputs::upload::StoreSettings;
use crate::daemon::serving::protocol::DEFAULT_SOCKET;
pub use crate::daemon::tracking::filters::Filters;
use crate::daemon::tracking::pods::MetricLabels;
use crate::kubernetes::HostState;
use crate::units::{Share, parse_budget, parse_duration, parse_learning, parse_size};
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
/// Labelled series one pod may have by default: eight pods at their cap fill the kernel's.
pub const DEFAULT_SERIES_PER_POD: usize = 128;
const LABELLED_SERIES_USIZE: usize = crate::daemon::tracking::pods::LABELLED_SERIES as usize;
/// A synchronisation blocked this long is a hang, traced while it blocks, with no flag
/// set (`docs/daemon.md`, "Hangs by default"): above the wait a healthy step usually
/// makes at its end, so jobs that run well give no hang traces; far below a real hang's
/// minutes (PyTorch's NCCL watchdog waits 10), so it is traced long before anything
/// kills it; and a 6 s blocked synchronize (as measured on the H100) is caught. Cheap:
/// one read of the kernel's calls in flight a second; a hang trace records a process
/// whose thread is blocked.
pub const DEFAULT_HANG_AFTER: Duration = Duration::from_secs(5);

pub use super::keys::ConfigFlags;

pub use super::effect::DaemonConfig;

impl DaemonConfig {
    /// The file's settings under the flags'.
    pub fn load(flags: &ConfigFlags) -> Result<Self> {
        let args = &match &flags.config {
            Some(path) => flags.over(parse_file(path)?),
            None => flags.clone(),
        };
        let addr = args
            .metrics_addr
            .clone()
            .unwrap_or_else(|| DEFAULT_METRICS_ADDR.into());
        let metrics_addr = addr
            .parse()
            .with_context(|| format!("--metrics-addr {addr:?}: expected ADDRESS:PORT"))?;
        let filters = Filters {
            include_exe: args.include_exe.clone(),
            exclude_exe: args.exclude_exe.clone(),
            include_cgroup: args.include_cgroup.clone(),
            exclude_cgroup: args.exclude_cgroup.clone(),
            users: args.user.clone(),
            max_files_per_user: args.max_files_per_user,
        };
        let duration = |name: &str, v: Option<String>| -> Result<Option<Duration>> {
            v.map(|v| parse_duration(&v).map_err(|e| anyhow::anyhow!("{name}: {e}")))
                .transpose()
        };
        let window = duration("sample_window", args.sample_window.clone())?;
        let every = duration("sample_every", args.sample_every.clone())?;
        let dynolog_addr = args
            .dynolog_addr
            .clone()
            .map(|a| {
                a.parse()
                    .with_context(|| format!("--dynolog-addr {a:?}: expected ADDRESS:PORT"))
            })
            .transpose()?;
        let flight_recorder = duration("flight_recorder", args.flight_recorder.clone())?;
        let sampling = match (window, every) {
            (Some(w), Some(e)) if w < e => Some((w, e)),
            (Some(_), Some(_)) => bail!("sample_window must be shorter than sample_every"),
            (None, None) => None,
            _ => bail!("sampling needs both sample_window and sample_every"),
        };
        let state_dir = (args.state_dir.clone()).unwrap_or_else(|| DEFAULT_STATE_DIR.into());
        let retention = Retention {
            max_bytes: match args.retention_max_bytes.as_deref() {
                None => Some(retention::default_max_bytes(&state_dir)),
                Some("none") => None,
                Some(v) => Some(parse_size(v).map_err(|e| {
                    anyhow::anyhow!("retention_max_bytes: {e}, or none (no limit)")
                })?),
            },
            max_age: duration("retention_max_age", args.retention_max_age.clone())?,
        };
        let learn_devices = args
            .learn_devices
            .clone()
            .map(|v| parse_learning(&v).map_err(|e| anyhow::anyhow!("learn_devices: {e}")))
            .transpose()?
            .unwrap_or(crate::probes::LEARN_DEVICES);
        let budget = match args.budget.clone() {
            Some(v) => parse_budget(&v).map_err(|e| anyhow::anyhow!("budget: {e}"))?,
            None => Some(DEFAULT_BUDGET),
        };
        let budget_cycles = match args.budget_mode.as_deref() {
            None | Some("cycle") => true,
            Some("shed-only") => false,
            Some(other) => bail!("budget_mode is cycle or shed-only, not {other:?}"),
        };
        let all_returns = match args.return_probes.as_deref() {
            None | Some("needed") => false,
            Some("all") => true,
            Some(other) => bail!("return_probes is needed or all, not {other:?}"),
        };
        // `off` as a value, so that a flag can undo the file's setting.
        let switch = |name: &str, v: &Option<String>| -> Result<Option<Option<Duration>>> {
            let on = |v| parse_duration(v).map_err(|e| anyhow::anyhow!("{name}: {e}; or off"));
            let given = v.as_deref().map(|v| match v {
                "off" => Ok(None),
                v => on(v).map(Some),
            });
            given.transpose()
        };
        // Stall traces stay asked for: what is slow depends on the workload.
        let capture_on_stall = switch("capture_on_stall", &args.capture_on_stall)?.flatten();
        let stall_window_after = duration("stall_window_after", args.stall_window_after.clone())?
            .unwrap_or(DEFAULT_STALL_WINDOW_AFTER);
        let stall_interval = duration("stall_interval", args.stall_interval.clone())?
            .unwrap_or(DEFAULT_STALL_INTERVAL);
        let hang_bound =
            duration("hang_bound", args.hang_bound.clone())?.unwrap_or(DEFAULT_HANG_BOUND);
        // Hangs on unless turned off, whether stalls are traced or not.
        let hang_after = switch("hang_after", &args.hang_after)?
            .unwrap_or(Some(DEFAULT_HANG_AFTER))
            .map(|h| h.max(capture_on_stall.unwrap_or_default()));
        let trace_max_bytes = args
            .trace_max_bytes
            .clone()
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
            kubelet_root: args.kubelet_root.clone().unwrap_or(defaults.kubelet_root),
            runtime_state: args.runtime_state.clone().unwrap_or(defaults.runtime_state),
        };
        if let Some(e) = &args.upload_endpoint {
            crate::daemon::outputs::upload::check_endpoint(e)?;
        }
        let upload = match args.upload.clone() {
            Some(url) => Some(StoreSettings {
                destination: url.parse().context("upload")?,
                endpoint: args.upload_endpoint.clone(),
                region: args.upload_region.clone(),
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
        let metric_labels = MetricLabels::parse(&args.metric_labels)?;
        let max_series_per_pod = match args.max_series_per_pod.unwrap_or(DEFAULT_SERIES_PER_POD) {
            n @ 1..=LABELLED_SERIES_USIZE => n as u32,
            n => bail!("max_series_per_pod must be from 1 to {LABELLED_SERIES_USIZE}, not {n}"),
        };
        let group = match args.group.clone() {
            Some(g) => Some(users::group_id(&g)?),
            None => None,
        };
        Ok(Self {
            dynolog_addr,
            learn_devices,
            budget,
            budget_cycles,
            all_returns,
            capture_on_stall,
            stall_window_after,
            stall_interval,
            hang_bound,
            trace_max_bytes,
            host_state,
            hang_after,
            upload,
            node_name: args.node_name.clone(),
            metric_labels,
            max_series_per_pod,
            flight_recorder,
            sampling,
            retention,
            socket: args.socket.clone().unwrap_or_else(|| DEFAULT_SOCKET.into()),
            group,
            state_dir,
            metrics_addr,
            filters,
            lock: args.lock.clone().unwrap_or_else(|| DEFAULT_LOCK.into()),
        })
    }
}

impl DaemonConfig {
    /// These settings, but those set up at start as they were in `old` (the listeners,
    /// the flight recorder, the socket's group, the learning done, the pods' state and
    /// labels): a reload says they wait for a restart (each setting `restart`).
    pub fn keeping_start(self, old: &Self) -> Self {
        Self {
            socket: old.socket.clone(),
            metrics_addr: old.metrics_addr,
            dynolog_addr: old.dynolog_addr,
            flight_recorder: old.flight_recorder,
            group: old.group,
            learn_devices: old.learn_devices,
            metric_labels: old.metric_labels,
            max_series_per_pod: old.max_series_per_pod,
            host_state: old.host_state.clone(),
            ..self
        }
    }
}

/// The configuration file's keys; the old `users` is read as `user`, with a warning.
fn parse_file(path: &Path) -> Result<ConfigFlags> {
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
    parse(&text).with_context(|| format!("{}: not a valid configuration", path.display()))
}

fn parse(text: &str) -> Result<ConfigFlags> {
    let mut table: toml::Table = toml::from_str(text)?;
    if let Some(users) = table.remove("users") {
        if table.contains_key("user") {
            bail!("users: the key is now `user` (as the flag --user): give it once, as user");
        }
        crate::say!(
            "rocsync: warning: the configuration key `users` is deprecated: name it `user`, as the flag --user"
        );
        table.insert("user".into(), users);
    }
    ConfigFlags::from_toml(table)
}

#[cfg(test)]
mod tests;
