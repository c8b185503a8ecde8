//! The daemon's metrics in Prometheus's text format (version 0.0.4). No pid label:
//! series are per API and device, so their number stays bounded on a busy node; with
//! `--metric-labels`, also per namespace and/or pod (`labelled`).

use rocsync_common::{Api, AqlAgent, MetricKey, OTHER_DEVICE, WAIT_BUCKETS};

pub(crate) mod families;
mod fleet;
mod labelled;

use families::*;

pub(crate) use crate::daemon::budget::period::View as BudgetView;
pub(crate) use crate::daemon::outputs::upload::UploadView;
pub(crate) use fleet::{Counter, StallView};
pub(crate) use labelled::{Series, read as read_series};

use crate::calls::stats::KernelDrops;
use crate::daemon::tracking::files::Refused;

/// What one scrape shows.
pub(crate) struct Snapshot<'a> {
    pub series: &'a [Series],
    /// With labels: calls of labelled processes counted without them, (the kernel's
    /// labelled series all taken, their pod at its cap).
    pub unlabelled: Option<(u64, u64)>,
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
    /// Each local rank's last collective: (comm id, rank, pid, seq).
    pub collectives: &'a [(String, String, u32, u64)],
    /// Of those, series left out for their user's share (each once while out).
    pub collectives_left_out: u64,
}

/// Traces the daemon was due to start on its own and could not: nobody else would know.
/// (A request refused at once is answered with the reason instead.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct NotStarted {
    /// Sampled windows skipped: another session records the agents.
    pub sampled: u64,
    /// dyno requests with a start time that could not start then (their processes gone,
    /// their agents recorded by another session, the daemon stopping).
    pub scheduled: u64,
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

pub(crate) fn render(s: &Snapshot<'_>) -> String {
    let mut t = Text::default();
    let mut f = t.family(&SYNC_CALLS);
    for x in s.series {
        f.labelled(&labels(x), x.value.calls);
    }
    let mut f = t.family(&SYNC_CALLS_ESTIMATED);
    for x in s.series.iter().filter(|x| x.estimated > 0) {
        f.labelled(&labels(x), x.estimated);
    }
    let mut f = t.family(&SYNC_CALL_ERRORS);
    for x in s.series {
        f.labelled(&labels(x), x.value.errors);
    }
    let mut f = t.family(&CROSS_STREAM_WAITS);
    for x in s.series.iter().filter(|x| is_stream_wait(&x.key)) {
        f.labelled(&labels(x), x.value.cross_stream);
    }
    let mut f = t.family(&STALLS);
    for x in s.series.iter().filter(|x| x.value.timed > 0) {
        f.labelled(&labels(x), x.value.stalls);
    }
    fleet::render_stalls(&mut t, &s.stall_traces);
    if let Some(u) = &s.uploads {
        fleet::render_uploads(&mut t, u);
    }
    let mut f = t.family(&SYNC_WAIT);
    for x in s.series.iter().filter(|x| x.value.timed > 0) {
        let (l, v) = (labels(x), &x.value);
        let mut cumulative = 0;
        for i in 0..WAIT_BUCKETS - 1 {
            cumulative += v.buckets[i];
            f.part("_bucket", &format!("{l},le=\"{}\"", bound(i)), cumulative);
        }
        f.part("_bucket", &format!("{l},le=\"+Inf\""), v.timed);
        f.part("_sum", &l, v.wait_ns as f64 / 1e9);
        f.part("_count", &l, v.timed);
    }
    let mut f = t.family(&AQL_PACKETS);
    for (agent, kind, n) in s.packets {
        let device = match agent {
            AqlAgent::Ordinal(o) => o.to_string(),
            AqlAgent::Other => "other".into(),
            AqlAgent::Unknown => "unknown".into(),
        };
        f.labelled(&format!("device=\"{device}\",kind=\"{kind}\""), n);
    }
    let mut f = t.family(&DROPPED_RECORDS);
    let d = s.drops;
    let flight = s.flight_evicted.map(|n| ("flight_recorder_memory", n));
    for (reason, n) in [
        ("entry_records", d.entries),
        ("exit_records", d.exits),
        ("library_loads", d.library_loads),
        ("queue_records", d.queues),
        ("packet_records", d.packets),
        ("packets_truncated", d.packets_truncated),
        ("packets_unread", d.packets_unread),
        ("out_params", d.out_params),
        ("comm_state", d.comm_state),
        ("thread_names", d.thread_names),
    ]
    .into_iter()
    .chain(flight)
    {
        f.labelled(&format!("reason=\"{reason}\""), n);
    }
    if let Some((full, cap)) = s.unlabelled {
        let mut f = t.family(&UNLABELLED_CALLS);
        f.labelled("reason=\"series_full\"", full);
        f.labelled("reason=\"pod_cap\"", cap);
    }
    let mut f = t.family(&COLLECTIVE_SEQ);
    for (comm, rank, pid, seq) in s.collectives {
        f.labelled(
            &format!("comm=\"{comm}\",rank=\"{rank}\",pid=\"{pid}\""),
            seq,
        );
    }
    let mut f = t.family(&COLLECTIVE_SEQ_LEFT_OUT);
    f.labelled("reason=\"user_limit\"", s.collectives_left_out);
    t.family(&TRACKED).value(s.tracked);
    t.family(&PROBED_FILES).value(s.files_probed);
    let mut f = t.family(&FILES_REFUSED);
    for (reason, n) in [
        ("unusable", s.files_refused.unusable),
        ("per_user_limit", s.files_refused.per_user_limit),
        ("user_fuse", s.files_refused.user_fuse),
    ] {
        f.labelled(&format!("reason=\"{reason}\""), n);
    }
    t.family(&TRACES_WRITTEN).value(s.traces_written);
    t.family(&TRACES_TRUNCATED).value(s.traces_truncated);
    let mut f = t.family(&TRACES_NOT_STARTED);
    for (origin, n) in [
        ("sampled", s.not_started.sampled),
        ("dyno_scheduled", s.not_started.scheduled),
    ] {
        f.labelled(&format!("origin=\"{origin}\""), n);
    }
    fleet::render_budget(&mut t, &s.budget);
    let build = format!(
        "version=\"{}\",commit=\"{}\"",
        env!("CARGO_PKG_VERSION"),
        env!("ROCSYNC_COMMIT")
    );
    t.family(&BUILD_INFO).labelled(&build, 1);
    t.family(&DAEMON_CPU).value(s.cpu_seconds);
    t.out
}

fn is_stream_wait(k: &MetricKey) -> bool {
    Api::from_u32(k.api).is_some_and(|a| a.symbol().contains("StreamWaitEvent"))
}

/// This process's CPU time, from /proc/self/stat (utime + stime, in clock ticks).
pub(crate) fn own_cpu_seconds() -> f64 {
    let Some(s) = crate::os::procfs::Stat::of_self() else {
        return 0.0;
    };
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (s.utime + s.stime) as f64 / ticks
}

#[cfg(test)]
mod tests;
