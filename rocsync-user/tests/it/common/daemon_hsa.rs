//! Helpers of the daemon's HSA tests: the scenario over the simulated HSA runtime, held
//! until a daemon tracks it, and what the runtime says it published.

use std::{collections::BTreeMap, process::Command};

use rocsync_tests::sim_hip_over_hsa;
use serde_json::Value;

use super::{
    Gated, Lines, TempDir,
    daemon::{Daemon, Metrics, metrics_addr, own_copy_dlopen, start_daemon},
};

/// `cmd` over the simulated HSA runtime, its logs in `dir`: `s.log` (calls),
/// `packets.log` (barriers), `kernels` (how many dispatches), `every.log` (every packet,
/// see `packets.rs`).
pub(crate) fn over_hsa<'a>(cmd: &'a mut Command, dir: &TempDir) -> &'a mut Command {
    cmd.env("SCENARIO_HIP", sim_hip_over_hsa())
        .env("SCENARIO_LOG", dir.path("s.log"))
        .env("HIP_SIM_PACKET_LOG", dir.path("packets.log"))
        .env("HIP_SIM_KERNEL_COUNT", dir.path("kernels"))
        .env("HIP_SIM_EVERY_PACKET_LOG", dir.path("every.log"))
}

/// A daemon counting the scenario `mode` over HSA (its own copy, its logs in `dir`), the
/// scenario loaded and held until the daemon tracks it and has its HSA runtime probed
/// (its queues and packets are seen from its first); the metrics address.
pub(crate) fn tracked_over_hsa(dir: &TempDir, mode: &[&str]) -> (Daemon, Lines, Gated, String) {
    tracked_over_hsa_with(dir, mode, &[], &[])
}

/// [`tracked_over_hsa`] with more environment, and more daemon flags.
pub(crate) fn tracked_over_hsa_with(
    dir: &TempDir,
    mode: &[&str],
    env: &[(&str, &str)],
    flags: &[&str],
) -> (Daemon, Lines, Gated, String) {
    let exe = own_copy_dlopen(dir);
    let (daemon, mut lines) = start_daemon(dir, &exe, flags);
    let addr = metrics_addr(&lines);
    let target = Gated::start_at(
        over_hsa(Command::new(&exe).arg("loaded").args(mode), dir).envs(env.iter().copied()),
        "loaded",
    );
    let pid = target.child.id();
    lines.wait_for_all(&[&format!("tracking pid {pid}"), "(HSA queues and doorbells)"]);
    (daemon, lines, target, addr)
}

/// What the simulated runtime says it published: its barriers' (queue, write index), and
/// how many kernels.
pub(crate) fn published(dir: &TempDir) -> (Vec<(u64, u64)>, usize) {
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    let barriers = std::fs::read_to_string(dir.path("packets.log"))
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (hex(f[1]), f[2].parse().unwrap())
        })
        .collect();
    // Written once a kernel was published: a scenario that launches none has no file.
    let kernels =
        std::fs::read_to_string(dir.path("kernels")).map_or(0, |n| n.trim().parse().unwrap());
    (barriers, kernels)
}

/// A trace's packet rows: (kind, agent) → how many.
pub(crate) fn packet_rows(t: &Value) -> BTreeMap<(String, String), usize> {
    let mut rows = BTreeMap::new();
    for e in t["traceEvents"].as_array().unwrap() {
        if e["cat"] == "hsa_packet" {
            let key = (e["name"].to_string(), e["args"]["agent"].to_string());
            *rows.entry(key).or_default() += 1;
        }
    }
    rows
}

/// The `aql_packets_total` samples of one kind, summed over agents, and the agents seen.
pub(crate) fn counted(m: &Metrics, kind: &str) -> (usize, Vec<String>) {
    let samples: Vec<_> = m
        .samples
        .iter()
        .filter(|(n, l, _)| n == "rocsync_aql_packets_total" && l["kind"] == kind)
        .collect();
    let devices = samples
        .iter()
        .map(|(_, l, _)| l["device"].as_str().unwrap().to_string())
        .collect();
    (samples.iter().map(|s| s.2 as usize).sum(), devices)
}

/// The `aql_packets_total` samples summed over kinds, by device.
pub(crate) fn counted_by_device(m: &Metrics) -> BTreeMap<String, usize> {
    let mut by = BTreeMap::new();
    for (_, l, v) in m
        .samples
        .iter()
        .filter(|(n, _, _)| n == "rocsync_aql_packets_total")
    {
        *by.entry(l["device"].as_str().unwrap().to_string())
            .or_default() += *v as usize;
    }
    by
}
