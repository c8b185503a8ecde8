//! What was typed (`cli`) turned into the settings the commands run with: the one place
//! that knows both.

use crate::{
    backend::{RUNTIMES, Runtime},
    capture::CaptureSettings,
    cli::{CaptureArgs, DaemonArgs, FilterArgs},
    daemon::config::{ConfigFlags, Filters},
    probes::{ApiChoice, ProbeOptions},
};

impl From<CaptureArgs> for CaptureSettings {
    fn from(a: CaptureArgs) -> Self {
        // An unknown name cannot come: clap admits only the runtimes' names.
        let runtimes = match a.backend.as_deref().and_then(Runtime::by_name) {
            Some(r) => vec![r],
            None => RUNTIMES.iter().collect(),
        };
        CaptureSettings {
            output: a.output,
            raw: a.raw,
            force: a.force,
            verbose: a.verbose,
            runtimes,
            agents: a.agents.unwrap_or_default(),
            apis: ApiChoice {
                extra: a.probe.into_iter().flat_map(|l| l.0).collect(),
                skip: a.skip,
                temporary: Vec::new(),
            },
            probes: ProbeOptions {
                ring_bytes: Some(a.ring_size),
                at_entry: a.probe_at_entry,
                diagnostics: a.verbose,
                classic_uprobes: a.classic_uprobes,
                labelled_series: None,
            },
            // Running threads' devices are learnt by `attach` alone (`AttachArgs`).
            learn_devices: std::time::Duration::ZERO,
            status_line: !a.no_status,
            follow: !a.no_follow,
            daemon_socket: a.daemon_socket,
        }
    }
}

impl From<FilterArgs> for Filters {
    fn from(f: FilterArgs) -> Self {
        Filters {
            include_exe: f.include_exe,
            exclude_exe: f.exclude_exe,
            include_cgroup: f.include_cgroup,
            exclude_cgroup: f.exclude_cgroup,
            users: f.users,
            max_files_per_user: None,
        }
    }
}

impl From<DaemonArgs> for ConfigFlags {
    fn from(a: DaemonArgs) -> Self {
        ConfigFlags {
            config: a.config,
            socket: a.socket,
            group: a.group,
            state_dir: a.state_dir,
            metrics_addr: a.metrics_addr,
            filters: a.filters.into(),
            dynolog_addr: a.dynolog_addr,
            flight_recorder: a.flight_recorder,
            sample_window: a.sample_window,
            sample_every: a.sample_every,
            retention_max_bytes: a.retention_max_bytes,
            retention_max_age: a.retention_max_age,
            learn_devices: a.learn_devices,
            budget: a.budget,
            capture_on_stall: a.capture_on_stall,
            stall_window_after: a.stall_window_after,
            stall_interval: a.stall_interval,
            upload: a.upload,
            upload_endpoint: a.upload_endpoint,
            upload_region: a.upload_region,
            node_name: a.node_name,
            hang_bound: a.hang_bound,
            hang_after: a.hang_after,
            trace_max_bytes: a.trace_max_bytes,
            kubelet_root: a.kubelet_root,
            runtime_state: a.runtime_state,
            metric_labels: a.metric_labels,
            lock: a.lock,
        }
    }
}
