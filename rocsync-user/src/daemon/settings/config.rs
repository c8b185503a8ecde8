//! The daemon's settings: a TOML file (`--config`), every key also a flag (flags win),
//! reloaded on SIGHUP.

use std::{path::Path, time::Duration};

use anyhow::{Context as _, Result, bail};

use crate::daemon::outputs::retention::{self, Retention};
use crate::daemon::outputs::upload::StoreSettings;
pub(crate) use crate::daemon::tracking::filters::Filters;
use crate::daemon::tracking::pods::{LABELLED_SERIES, MetricLabels};
use crate::kubernetes::HostState;
use crate::os::users;

/// One daemon per node: two would count every call twice and record the same processes
/// without seeing each other's sessions.
pub(crate) const DEFAULT_LOCK: &str = "/run/rocsync/daemon.lock";

pub(crate) use super::keys::ConfigFlags;

pub(crate) use super::effect::DaemonConfig;
use super::value::{BudgetMode, ReturnProbes};

impl DaemonConfig {
    /// The file's settings under the flags': each setting's typed value (`keys.rs`),
    /// and what they say together.
    pub(crate) fn load(flags: &ConfigFlags) -> Result<Self> {
        let args = &match &flags.config {
            Some(path) => flags.over(parse_file(path)?),
            None => flags.clone(),
        };
        let sampling = match (args.sample_window()?, args.sample_every()?) {
            (Some(w), Some(e)) if w < e => Some((w, e)),
            (Some(_), Some(_)) => bail!("sample_window must be shorter than sample_every"),
            (None, None) => None,
            _ => bail!("sampling needs both sample_window and sample_every"),
        };
        let state_dir = args.state_dir();
        let retention = Retention {
            max_bytes: (args.retention_max_bytes()?)
                .unwrap_or_else(|| Some(retention::default_max_bytes(&state_dir))),
            max_age: args.retention_max_age()?,
        };
        // Stall traces stay asked for: what is slow depends on the workload. Hangs are
        // traced unless turned off, at the stall threshold at least.
        let capture_on_stall = args.capture_on_stall()?;
        let hang_after = (args.hang_after()?).map(|h| h.max(capture_on_stall.unwrap_or_default()));
        let trace_max_bytes = args.trace_max_bytes()?;
        if trace_max_bytes < 1 << 20 {
            bail!(
                "trace_max_bytes must be at least 1MB (a trace's header and summary alone take kilobytes)"
            );
        }
        if let Some(e) = &args.upload_endpoint {
            crate::daemon::outputs::upload::check_endpoint(e)?;
        }
        let upload = args.upload()?.map(|destination| StoreSettings {
            destination,
            endpoint: args.upload_endpoint.clone(),
            region: args.upload_region.clone(),
        });
        let stall_interval = args.stall_interval()?;
        if stall_interval < Duration::from_secs(1) {
            bail!("stall_interval must be at least 1s (a stall trace's name holds its second)");
        }
        let filters = Filters {
            include_exe: args.include_exe.clone(),
            exclude_exe: args.exclude_exe.clone(),
            include_cgroup: args.include_cgroup.clone(),
            exclude_cgroup: args.exclude_cgroup.clone(),
            users: args.user.clone(),
            max_files_per_user: args.max_files_per_user(),
        };
        if filters.max_files_per_user == 0 {
            bail!("max_files_per_user must be at least 1 (a user's job maps a runtime or two)");
        }
        for u in &filters.users {
            users::user_id(u).context("user")?;
        }
        let max_series_per_pod = match args.max_series_per_pod() {
            n @ 1.. if n <= LABELLED_SERIES as usize => n as u32,
            n => bail!("max_series_per_pod must be from 1 to {LABELLED_SERIES}, not {n}"),
        };
        let group = match args.group.clone() {
            Some(g) => Some(users::group_id(&g)?),
            None => None,
        };
        Ok(Self {
            dynolog_addr: args.dynolog_addr()?,
            learn_devices: args.learn_devices()?.unwrap_or_default(),
            budget: args.budget()?,
            budget_cycles: args.budget_mode()? == BudgetMode::Cycle,
            all_returns: args.return_probes()? == ReturnProbes::All,
            capture_on_stall,
            stall_window_after: args.stall_window_after()?,
            stall_interval,
            hang_bound: args.hang_bound()?,
            trace_max_bytes,
            host_state: HostState {
                kubelet_root: args.kubelet_root(),
                runtime_state: args.runtime_state(),
            },
            hang_after,
            upload,
            node_name: args.node_name.clone(),
            metric_labels: MetricLabels::parse(&args.metric_labels)?,
            max_series_per_pod,
            flight_recorder: args.flight_recorder()?,
            sampling,
            retention,
            socket: args.socket(),
            group,
            state_dir,
            metrics_addr: args.metrics_addr()?,
            filters,
            lock: args.lock.clone().unwrap_or_else(|| DEFAULT_LOCK.into()),
        })
    }
}

impl DaemonConfig {
    /// These settings in place of `old` (a reload): each setting set up at start that
    /// changed is said to wait for a restart, and kept as it was ([`Self::keeping_start`]).
    pub(crate) fn replacing(self, old: &Self) -> Self {
        let restart = super::keys::SETTINGS.iter().filter(|s| s.restart);
        for s in restart.filter(|s| (s.shown)(old) != (s.shown)(&self)) {
            let key = s.key;
            crate::say!("rocsync daemon: warning: {key} changed: it takes effect at restart");
        }
        self.keeping_start(old)
    }

    /// These settings, but those set up at start as they were in `old` (the listeners,
    /// the flight recorder, the socket's group, the learning done, the pods' state and
    /// labels): a reload says they wait for a restart (each setting `restart`).
    pub(crate) fn keeping_start(self, old: &Self) -> Self {
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
