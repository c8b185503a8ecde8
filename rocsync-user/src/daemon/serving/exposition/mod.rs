//! The daemon's metrics in Prometheus's text format (version 0.0.4). No pid label:
//! series are per API and device, so their number stays bounded on a busy node; with
//! `--metric-labels`, also per namespace and/or pod (`labelled`).

use std::fmt::Write as _;

use rocsync_common::{Api, AqlAgent, MetricKey, OTHER_DEVICE, WAIT_BUCKETS};

mod fleet;
mod labelled;

pub use fleet::{BudgetView, StallView, UploadView};
pub use labelled::{Series, read as read_series};

use crate::daemon::tracking::files::Refused;
use crate::stats::KernelDrops;

/// What one scrape shows.
pub struct Snapshot<'a> {
    pub series: &'a [Series],
    /// With labels: calls of labelled processes counted without them.
    pub unlabelled: Option<u64>,
    /// AQL packets published, per agent and kind.
    pub packets: &'a [(AqlAgent, &'static str, u64)],
    pub drops: &'a KernelDrops,
    pub tracked: usize,
    pub cpu_seconds: f64,
    /// With the flight recorder on: records it dropped for memory before their time.
    pub flight_evicted: Option<u64>,
    /// Trace files written (on request, sampled, flight recorder, dynolog).
    pub traces_written: u64,
    /// Traces that ended early: a file reached `--trace-max-bytes`, or an output failed.
    pub traces_truncated: u64,
    pub not_started: NotStarted,
    /// Runtime library files probed now, and those refused.
    pub files_probed: usize,
    pub files_refused: Refused,
    pub budget: BudgetView,
    pub stall_traces: StallView,
    pub uploads: Option<UploadView>,
}

/// Traces the daemon was due to start on its own and could not: nobody else would know.
/// (A request refused at once is answered with the reason instead.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NotStarted {
    /// Sampled windows skipped: another session records the agents.
    pub sampled: u64,
    /// dyno requests with a start time that could not start then (their processes gone,
    /// their agents recorded by another session, the daemon stopping).
    pub scheduled: u64,
}

pub(crate) fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn labels(s: &Series) -> String {
    let api = Api::from_u32(s.key.api).map_or("unknown", |a| a.symbol());
    let extra = &s.labels;
    match s.key.device {
        OTHER_DEVICE => format!("api=\"{api}\",device=\"other\"{extra}"),
        d => format!("api=\"{api}\",device=\"{d}\"{extra}"),
    }
}

/// Upper bound of histogram bucket `i`, in seconds (2^i µs).
fn bound(i: usize) -> String {
    format!("{}", (1u64 << i) as f64 / 1e6)
}

pub fn render(s: &Snapshot<'_>) -> String {
    let mut out = String::new();
    header(
        &mut out,
        "rocsync_sync_calls_total",
        "counter",
        "Calls of hooked GPU runtime functions, by API and device.",
    );
    for x in s.series {
        let _ = writeln!(
            out,
            "rocsync_sync_calls_total{{{}}} {}",
            labels(x),
            x.value.calls
        );
    }
    header(
        &mut out,
        "rocsync_sync_call_errors_total",
        "counter",
        "Calls that returned an error, by API and device.",
    );
    for x in s.series {
        let _ = writeln!(
            out,
            "rocsync_sync_call_errors_total{{{}}} {}",
            labels(x),
            x.value.errors
        );
    }
    header(
        &mut out,
        "rocsync_cross_stream_waits_total",
        "counter",
        "Stream waits on an event recorded on another stream.",
    );
    for x in s.series.iter().filter(|x| is_stream_wait(&x.key)) {
        let _ = writeln!(
            out,
            "rocsync_cross_stream_waits_total{{{}}} {}",
            labels(x),
            x.value.cross_stream
        );
    }
    header(
        &mut out,
        "rocsync_stalls_total",
        "counter",
        "Synchronisations longer than the stall threshold (--capture-on-stall), by API and device.",
    );
    for x in s.series.iter().filter(|x| x.value.timed > 0) {
        let _ = writeln!(
            out,
            "rocsync_stalls_total{{{}}} {}",
            labels(x),
            x.value.stalls
        );
    }
    fleet::render_stalls(&mut out, &s.stall_traces);
    if let Some(u) = &s.uploads {
        fleet::render_uploads(&mut out, u);
    }
    header(
        &mut out,
        "rocsync_sync_wait_seconds",
        "histogram",
        "Time spent in synchronisation calls (entry to return), by API and device.",
    );
    for x in s.series.iter().filter(|x| x.value.timed > 0) {
        let (l, v) = (labels(x), &x.value);
        let mut cumulative = 0;
        for i in 0..WAIT_BUCKETS - 1 {
            cumulative += v.buckets[i];
            let _ = writeln!(
                out,
                "rocsync_sync_wait_seconds_bucket{{{l},le=\"{}\"}} {cumulative}",
                bound(i)
            );
        }
        let _ = writeln!(
            out,
            "rocsync_sync_wait_seconds_bucket{{{l},le=\"+Inf\"}} {}",
            v.timed
        );
        let _ = writeln!(
            out,
            "rocsync_sync_wait_seconds_sum{{{l}}} {}",
            v.wait_ns as f64 / 1e9
        );
        let _ = writeln!(out, "rocsync_sync_wait_seconds_count{{{l}}} {}", v.timed);
    }
    header(
        &mut out,
        "rocsync_aql_packets_total",
        "counter",
        "AQL packets the tracked processes published, by HSA agent (its ordinal; unknown \
         for a queue found at its first doorbell) and packet kind.",
    );
    for (agent, kind, n) in s.packets {
        let device = match agent {
            AqlAgent::Ordinal(o) => o.to_string(),
            AqlAgent::Other => "other".into(),
            AqlAgent::Unknown => "unknown".into(),
        };
        let _ = writeln!(
            out,
            "rocsync_aql_packets_total{{device=\"{device}\",kind=\"{kind}\"}} {n}"
        );
    }
    header(
        &mut out,
        "rocsync_dropped_records_total",
        "counter",
        "Records the probes could not deliver, by reason.",
    );
    let d = s.drops;
    for (reason, n) in [
        ("entry_records", d.entries),
        ("exit_records", d.exits),
        ("library_loads", d.library_loads),
        ("queue_records", d.queues),
        ("packet_records", d.packets),
        ("packets_truncated", d.packets_truncated),
        ("packets_unread", d.packets_unread),
        ("out_params", d.out_params),
    ] {
        let _ = writeln!(
            out,
            "rocsync_dropped_records_total{{reason=\"{reason}\"}} {n}"
        );
    }
    if let Some(n) = s.unlabelled {
        header(
            &mut out,
            "rocsync_unlabelled_calls_total",
            "counter",
            "Calls of processes with label values counted under empty ones: the kernel held as many labelled series as it can (--metric-labels).",
        );
        let _ = writeln!(out, "rocsync_unlabelled_calls_total {n}");
    }
    if let Some(n) = s.flight_evicted {
        let _ = writeln!(
            out,
            "rocsync_dropped_records_total{{reason=\"flight_recorder_memory\"}} {n}"
        );
    }
    header(
        &mut out,
        "rocsync_tracked_processes",
        "gauge",
        "Processes mapping a GPU runtime that the daemon counts.",
    );
    let _ = writeln!(out, "rocsync_tracked_processes {}", s.tracked);
    header(
        &mut out,
        "rocsync_probed_files",
        "gauge",
        "Runtime library files probed now (released when no process they serve lives).",
    );
    let _ = writeln!(out, "rocsync_probed_files {}", s.files_probed);
    header(
        &mut out,
        "rocsync_files_refused_total",
        "counter",
        "Runtime library files not probed, by reason: unusable (not a runtime, or past the bounds of what is read), per_user_limit (their user's cap).",
    );
    for (reason, n) in [
        ("unusable", s.files_refused.unusable),
        ("per_user_limit", s.files_refused.per_user_limit),
    ] {
        let _ = writeln!(
            out,
            "rocsync_files_refused_total{{reason=\"{reason}\"}} {n}"
        );
    }
    header(
        &mut out,
        "rocsync_traces_written_total",
        "counter",
        "Trace files the daemon wrote (on request, sampled, flight recorder, dynolog).",
    );
    let _ = writeln!(out, "rocsync_traces_written_total {}", s.traces_written);
    header(
        &mut out,
        "rocsync_traces_truncated_total",
        "counter",
        "Traces that ended early, marked truncated: a file reached --trace-max-bytes, or an output failed.",
    );
    let _ = writeln!(out, "rocsync_traces_truncated_total {}", s.traces_truncated);
    header(
        &mut out,
        "rocsync_traces_not_started_total",
        "counter",
        "Traces due to start that could not: sampled windows skipped, dyno requests with a start time that could not start then.",
    );
    for (origin, n) in [
        ("sampled", s.not_started.sampled),
        ("dyno_scheduled", s.not_started.scheduled),
    ] {
        let _ = writeln!(
            out,
            "rocsync_traces_not_started_total{{origin=\"{origin}\"}} {n}"
        );
    }
    fleet::render_budget(&mut out, &s.budget);
    header(
        &mut out,
        "rocsync_build_info",
        "gauge",
        "The daemon's release and the commit it was built from (always 1).",
    );
    let _ = writeln!(
        out,
        "rocsync_build_info{{version=\"{}\",commit=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION"),
        env!("ROCSYNC_COMMIT")
    );
    header(
        &mut out,
        "rocsync_daemon_cpu_seconds_total",
        "counter",
        "CPU time the daemon itself used (user and system).",
    );
    let _ = writeln!(out, "rocsync_daemon_cpu_seconds_total {}", s.cpu_seconds);
    out
}

fn is_stream_wait(k: &MetricKey) -> bool {
    Api::from_u32(k.api).is_some_and(|a| a.symbol().contains("StreamWaitEvent"))
}

/// This process's CPU time, from /proc/self/stat (utime + stime, in clock ticks).
pub fn own_cpu_seconds() -> f64 {
    let Some(s) = crate::procfs::Stat::of_self() else {
        return 0.0;
    };
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (s.utime + s.stime) as f64 / ticks
}

#[cfg(test)]
mod tests;
