//! The daemon's fleet series: the overhead budget, stalls and hangs.

use std::fmt::Write as _;

use crate::daemon::serving::exposition::header;

/// Stalls and hangs as `/metrics` shows them.
#[derive(Clone, Debug, Default)]
pub struct StallView {
    pub traces: u64,
    pub skipped_interval: u64,
    pub skipped_node_limit: u64,
    pub skipped_not_started: u64,
    pub skipped_hang: u64,
    pub hang_traces: u64,
    /// Hangs with no trace (yet), by reason: each counted once per call and reason.
    pub hangs_untraced: Vec<(&'static str, u64)>,
    /// The oldest call in flight of each synchronising API (seconds).
    pub in_flight: Vec<(&'static str, f64)>,
}

/// The budget as `/metrics` shows it (no pid label: a node's processes come and go).
#[derive(Clone, Debug, Default)]
pub struct BudgetView {
    /// The limit (`None`: off).
    pub limit: Option<f64>,
    /// A probed call's calibrated price, in seconds.
    pub call_seconds: Option<f64>,
    /// The highest share of a tracked process's CPU its probes cost, last measured.
    pub highest: f64,
    /// Processes over the budget with nothing left to shed.
    pub over: usize,
    /// Polling APIs: how many probed files have each shed now.
    pub shed: Vec<(&'static str, usize)>,
}

pub fn render_budget(out: &mut String, b: &BudgetView) {
    header(
        out,
        "rocsync_probes_shed",
        "gauge",
        "Probed runtime files whose probes of this polling API are off to hold the budget.",
    );
    for (api, files) in &b.shed {
        let _ = writeln!(out, "rocsync_probes_shed{{api=\"{api}\"}} {files}");
    }
    header(
        out,
        "rocsync_probe_cost_ratio",
        "gauge",
        "The highest share of a tracked process's CPU time its probes cost (last second).",
    );
    let _ = writeln!(out, "rocsync_probe_cost_ratio {}", b.highest);
    header(
        out,
        "rocsync_budget_ratio",
        "gauge",
        "The budget: the most share of a process's CPU its probes may cost (absent: off).",
    );
    if let Some(limit) = b.limit {
        let _ = writeln!(out, "rocsync_budget_ratio {limit}");
    }
    header(
        out,
        "rocsync_probe_call_seconds",
        "gauge",
        "What one probed call costs on this node (calibrated at start).",
    );
    if let Some(c) = b.call_seconds {
        let _ = writeln!(out, "rocsync_probe_call_seconds {c}");
    }
    header(
        out,
        "rocsync_over_budget_processes",
        "gauge",
        "Tracked processes whose records and waits alone cost more than the budget (never shed).",
    );
    let _ = writeln!(out, "rocsync_over_budget_processes {}", b.over);
}

pub fn render_stalls(out: &mut String, st: &StallView) {
    header(
        out,
        "rocsync_stall_traces_total",
        "counter",
        "Stall traces started; skipped ones are counted in rocsync_stall_traces_skipped_total.",
    );
    let _ = writeln!(out, "rocsync_stall_traces_total {}", st.traces);
    header(
        out,
        "rocsync_stall_traces_skipped_total",
        "counter",
        "Stalls with no trace of their own, by reason: interval (another of the process or its user within --stall-interval, not 4x shorter), node_limit (8 on the node within the interval), not_started, hang_trace (a hang trace held it).",
    );
    for (reason, n) in [
        ("interval", st.skipped_interval),
        ("node_limit", st.skipped_node_limit),
        ("not_started", st.skipped_not_started),
        ("hang_trace", st.skipped_hang),
    ] {
        let _ = writeln!(
            out,
            "rocsync_stall_traces_skipped_total{{reason=\"{reason}\"}} {n}"
        );
    }
    header(
        out,
        "rocsync_hang_traces_total",
        "counter",
        "Hang traces started: a synchronisation still blocked after --hang-after.",
    );
    let _ = writeln!(out, "rocsync_hang_traces_total {}", st.hang_traces);
    header(
        out,
        "rocsync_hangs_untraced_total",
        "counter",
        "Hangs without a trace (yet), once per call and reason: interval (the process had a hang trace within --stall-interval), user_limit (4 of its user recording), node_limit (32 recording), not_started. All but not_started are looked at again while the call blocks.",
    );
    for (reason, n) in &st.hangs_untraced {
        let _ = writeln!(
            out,
            "rocsync_hangs_untraced_total{{reason=\"{reason}\"}} {n}"
        );
    }
    header(
        out,
        "rocsync_calls_in_flight_seconds",
        "gauge",
        "The oldest synchronisation in flight of tracked processes, by API (read each second; with --capture-on-stall).",
    );
    for (api, secs) in &st.in_flight {
        let _ = writeln!(
            out,
            "rocsync_calls_in_flight_seconds{{api=\"{api}\"}} {secs}"
        );
    }
}

/// Uploads as `/metrics` shows them (absent with uploads off).
#[derive(Clone, Debug, Default)]
pub struct UploadView {
    pub uploaded: u64,
    pub bytes: u64,
    pub failures: u64,
    pub refused: u64,
    pub pending: u64,
    pub lost: u64,
}

pub fn render_uploads(out: &mut String, u: &UploadView) {
    for (name, kind, help, value) in [
        (
            "rocsync_uploads_total",
            "counter",
            "Traces uploaded to the store (--upload).",
            u.uploaded,
        ),
        (
            "rocsync_upload_bytes_total",
            "counter",
            "Bytes of traces uploaded.",
            u.bytes,
        ),
        (
            "rocsync_upload_failures_total",
            "counter",
            "Upload attempts that failed (each trace is retried on its own; it waits on disk).",
            u.failures,
        ),
        (
            "rocsync_uploads_refused_total",
            "counter",
            "Traces the store refused for good (denied, not authenticated): set aside, tried again at the next start.",
            u.refused,
        ),
        (
            "rocsync_upload_pending",
            "gauge",
            "Traces waiting for their upload.",
            u.pending,
        ),
        (
            "rocsync_upload_lost_total",
            "counter",
            "Traces retention removed (for size) before their upload.",
            u.lost,
        ),
    ] {
        header(out, name, kind, help);
        let _ = writeln!(out, "{name} {value}");
    }
}
