//! `rocsync daemon --check`: the settings in effect, one per line, named as the flags
//! and TOML keys that set them (not a Rust `Debug` dump).

use std::time::Duration;

use crate::daemon::settings::config::DaemonConfig;

/// A duration as the flags take it: the largest unit that divides it (`2m`, `1500ms`).
pub fn duration(d: Duration) -> String {
    let ms = d.as_millis();
    for (unit, per) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
    ] {
        if ms >= per && ms.is_multiple_of(per) {
            return format!("{}{unit}", ms / per);
        }
    }
    format!("{ms}ms")
}

fn list(items: &[String], empty: &str) -> String {
    match items {
        [] => empty.into(),
        _ => items.join(", "),
    }
}

impl DaemonConfig {
    /// The settings in effect, `key  value` per line.
    pub fn summary(&self) -> String {
        let off = || "off".to_string();
        let f = &self.filters;
        let labels: Vec<String> = [("namespace", self.metric_labels.namespace)]
            .into_iter()
            .chain([("pod", self.metric_labels.pod)])
            .filter(|(_, on)| *on)
            .map(|(n, _)| n.to_string())
            .collect();
        let rows: Vec<(&str, String)> = vec![
            ("socket", self.socket.display().to_string()),
            (
                "group",
                self.group
                    .map_or("none (root only)".into(), |g| format!("gid {g}")),
            ),
            ("state_dir", self.state_dir.display().to_string()),
            ("metrics_addr", self.metrics_addr.to_string()),
            (
                "dynolog_addr",
                self.dynolog_addr.map_or_else(off, |a| a.to_string()),
            ),
            (
                "flight_recorder",
                self.flight_recorder.map_or_else(off, duration),
            ),
            (
                "sample_window",
                self.sampling.map_or_else(off, |(w, _)| duration(w)),
            ),
            (
                "sample_every",
                self.sampling.map_or_else(off, |(_, e)| duration(e)),
            ),
            (
                "retention_max_bytes",
                self.retention
                    .max_bytes
                    .map_or("none".into(), |b| b.to_string()),
            ),
            (
                "retention_max_age",
                self.retention.max_age.map_or("none".into(), duration),
            ),
            (
                "learn_devices",
                match self.learn_devices.is_zero() {
                    true => off(),
                    false => duration(self.learn_devices),
                },
            ),
            ("budget", self.budget.map_or_else(off, |b| b.to_string())),
            (
                "capture_on_stall",
                self.capture_on_stall.map_or_else(off, duration),
            ),
            ("stall_window_after", duration(self.stall_window_after)),
            ("stall_interval", duration(self.stall_interval)),
            ("hang_after", duration(self.hang_after)),
            ("hang_bound", duration(self.hang_bound)),
            ("trace_max_bytes", self.trace_max_bytes.to_string()),
            (
                "kubelet_root",
                self.host_state.kubelet_root.display().to_string(),
            ),
            (
                "runtime_state",
                self.host_state.runtime_state.display().to_string(),
            ),
            (
                "upload",
                self.upload
                    .as_ref()
                    .map_or_else(off, |u| u.destination.to_string()),
            ),
            (
                "upload_endpoint",
                self.upload
                    .as_ref()
                    .and_then(|u| u.endpoint.as_deref())
                    .map_or_else(
                        || "default".into(),
                        crate::daemon::outputs::upload::redacted,
                    ),
            ),
            (
                "upload_region",
                self.upload
                    .as_ref()
                    .and_then(|u| u.region.clone())
                    .unwrap_or_else(|| "default".into()),
            ),
            (
                "node_name",
                self.node_name.clone().unwrap_or_else(|| "default".into()),
            ),
            ("metric_labels", list(&labels, "none")),
            ("include_exe", list(&f.include_exe, "any")),
            ("exclude_exe", list(&f.exclude_exe, "none")),
            ("include_cgroup", list(&f.include_cgroup, "any")),
            ("exclude_cgroup", list(&f.exclude_cgroup, "none")),
            ("user", list(&f.users, "any")),
            (
                "max_files_per_user",
                f.max_files_per_user.map_or_else(
                    || crate::daemon::tracking::files::MAX_FILES_PER_USER.to_string(),
                    |n| n.to_string(),
                ),
            ),
        ];
        let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        rows.iter()
            .map(|(k, v)| format!("{k:width$}  {v}\n"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_the_largest_unit_that_divides_them() {
        let d = |ms| duration(Duration::from_millis(ms));
        assert_eq!(d(120_000), "2m");
        assert_eq!(d(1500), "1500ms");
        assert_eq!(d(2000), "2s");
        assert_eq!(d(7 * 86_400_000), "7d");
    }
}
