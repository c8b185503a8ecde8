//! Every metric family `/metrics` shows: name, kind and help, once. `render` writes
//! their samples through [`Text::family`]; the docs' table is checked against this list.

use std::fmt::{Display, Write as _};

#[derive(Debug)]
pub(crate) struct Family {
    pub name: &'static str,
    pub kind: &'static str,
    pub help: &'static str,
}

macro_rules! families {
    ($($id:ident: $name:literal $kind:ident $help:literal;)+) => {
        $(pub(crate) const $id: Family = Family { name: $name, kind: stringify!($kind), help: $help };)+
        /// All of them, in the order a scrape shows them (the docs' table is checked
        /// against it).
        #[cfg(test)]
        pub(crate) const ALL: &[&Family] = &[$(&$id),+];
    };
}

families! {
    SYNC_CALLS: "rocsync_sync_calls_total" counter
        "Calls of hooked GPU runtime functions, by API and device.";
    SYNC_CALLS_ESTIMATED: "rocsync_sync_calls_estimated_total" counter
        "Of rocsync_sync_calls_total, the calls estimated rather than counted: made while the budget's duty cycle had their probes off (--budget-mode cycle), at the rate of the second probed before.";
    SYNC_CALL_ERRORS: "rocsync_sync_call_errors_total" counter
        "Calls that returned an error, by API and device.";
    CROSS_STREAM_WAITS: "rocsync_cross_stream_waits_total" counter
        "Stream waits on an event recorded on another stream.";
    STALLS: "rocsync_stalls_total" counter
        "Synchronisations longer than the stall threshold (--capture-on-stall, else --hang-after), by API and device.";
    STALL_TRACES: "rocsync_stall_traces_total" counter
        "Stall traces started; skipped ones are counted in rocsync_stall_traces_skipped_total.";
    STALL_TRACES_SKIPPED: "rocsync_stall_traces_skipped_total" counter
        "Stalls with no trace of their own, by reason: interval (another of the process or its user within --stall-interval, not 4x shorter), node_limit (8 on the node within the interval), not_started, hang_trace (a hang trace held it).";
    HANG_TRACES: "rocsync_hang_traces_total" counter
        "Hang traces started: a synchronisation still blocked after --hang-after.";
    HANGS_UNTRACED: "rocsync_hangs_untraced_total" counter
        "Hangs without a trace (yet), once per call and reason: interval (the process had a hang trace within --stall-interval), user_limit (4 of its user recording), node_limit (32 recording), not_started. All but not_started are looked at again while the call blocks.";
    BEHIND_UNTRACED: "rocsync_behind_untraced_total" counter
        "Ranks behind a hang without a trace of their own, once per collective they are at, by reason: user_limit (2 of its user's laggards traced), node_limit (8 traced), not_started.";
    STUCK_TRACES: "rocsync_stuck_rank_traces_total" counter
        "Traces of stuck ranks started, by reason: behind (its collectives stopped for --hang-after while another local rank of its communicator went further), stopped (for --hang-after and 50 times its usual interval between collectives).";
    STUCK_UNTRACED: "rocsync_stuck_ranks_untraced_total" counter
        "Stuck ranks without a trace of their own, once per collective they stopped at, by reason: traced (a hang or laggard trace records them already), user_limit (2 of its user's recording), node_limit (8 recording), not_started.";
    DEPENDENCY_EVICTED: "rocsync_dependency_evicted_total" counter
        "Handles the hang chain's dependency state pushed out for room, each by a newer one of the same user (8192 a user, apart from other users'), by state: event_record, stream_wait.";
    DEPENDENCY_SHARED_LANE: "rocsync_dependency_shared_lane_users" gauge
        "Users whose dependency state shares the last of its 8 lanes (the 8th user other than root on): one of them can push out another's handles. 0 while the last lane has one user.";
    CALLS_IN_FLIGHT: "rocsync_calls_in_flight_seconds" gauge
        "The oldest synchronisation in flight of tracked processes, by API (read each second; with --capture-on-stall).";
    CALLS_UNTIMED: "rocsync_calls_untimed_total" counter
        "Calls whose start the kernel could not keep, so neither timed nor seen as stalls or hangs, by reason: user_share (their user's live threads held 8192 calls' starts), full (65536 threads' were held). A thread's start is kept from its first call to its exit.";
    UPLOADS: "rocsync_uploads_total" counter
        "Traces uploaded to the store (--upload).";
    UPLOAD_BYTES: "rocsync_upload_bytes_total" counter
        "Bytes of traces uploaded.";
    UPLOAD_FAILURES: "rocsync_upload_failures_total" counter
        "Upload attempts that failed (each trace is retried on its own; it waits on disk).";
    UPLOADS_REFUSED: "rocsync_uploads_refused_total" counter
        "Traces the store refused for good (denied, not authenticated): set aside, tried again at the next start.";
    UPLOAD_PENDING: "rocsync_upload_pending" gauge
        "Traces waiting for their upload.";
    UPLOAD_LOST: "rocsync_upload_lost_total" counter
        "Traces retention removed (for size) before their upload.";
    SYNC_WAIT: "rocsync_sync_wait_seconds" histogram
        "Time spent in synchronisation calls (entry to return), by API and device.";
    AQL_PACKETS: "rocsync_aql_packets_total" counter
        "AQL packets the tracked processes published, by HSA agent (its ordinal; unknown for a queue found at its first doorbell) and packet kind.";
    DROPPED_RECORDS: "rocsync_dropped_records_total" counter
        "Records the probes could not deliver, by reason.";
    UNLABELLED_CALLS: "rocsync_unlabelled_calls_total" counter
        "Calls of processes with label values counted under empty ones (--metric-labels), by reason: series_full (the kernel held as many labelled series as it can), pod_cap (their pod had --max-series-per-pod).";
    COLLECTIVE_SEQ: "rocsync_collective_seq" gauge
        "The last collective (or send/receive) each local rank entered, by communicator id (the same on every rank), rank and pid: a rank whose number stays below its communicator's others is behind.";
    COLLECTIVE_SEQ_LEFT_OUT: "rocsync_collective_seq_left_out_total" counter
        "Series of rocsync_collective_seq not shown, each counted once while it stays out, by reason: user_limit (its user's processes had 256 shown).";
    TRACKED: "rocsync_tracked_processes" gauge
        "Processes mapping a GPU runtime that the daemon counts.";
    PROBED_FILES: "rocsync_probed_files" gauge
        "Runtime library files probed now (released when no process they serve lives).";
    FILES_REFUSED: "rocsync_files_refused_total" counter
        "Runtime library files not probed, by reason: unusable (not a runtime, or past the bounds of what is read), per_user_limit (their user's cap), user_fuse (on a user's FUSE mount: never read).";
    TRACES_WRITTEN: "rocsync_traces_written_total" counter
        "Trace files the daemon wrote (on request, sampled, flight recorder, dynolog).";
    TRACES_TRUNCATED: "rocsync_traces_truncated_total" counter
        "Traces that ended early, marked truncated: a file reached --trace-max-bytes, or an output failed.";
    TRACES_NOT_STARTED: "rocsync_traces_not_started_total" counter
        "Traces due to start that could not: sampled windows skipped, dyno requests with a start time that could not start then.";
    PROBES_SHED: "rocsync_probes_shed" gauge
        "Probed runtime files whose probes of this polling API are off to hold the budget.";
    PROBE_COST: "rocsync_probe_cost_ratio" gauge
        "The highest share of a tracked process's CPU time its probes cost (last second).";
    PROBE_COST_SHED: "rocsync_probe_cost_when_shed_ratio" gauge
        "Of the processes whose polling probes are shed now, the highest share of its CPU time a process's probes cost when they were shed (the log's figure).";
    BUDGET: "rocsync_budget_ratio" gauge
        "The budget: the most share of a process's CPU its probes may cost (absent: off).";
    PROBE_CALL: "rocsync_probe_call_seconds" gauge
        "What one probed call costs on this node (calibrated at start), by where its probes sit (site: emulated, single_stepped: an entry and return pair on an instruction the kernel emulates or single-steps; entry_alone: an entry without its return, on an emulated one).";
    OVER_BUDGET: "rocsync_over_budget_processes" gauge
        "Tracked processes whose records and waits alone cost more than the budget, left so, by reason (shed_only, shared_series: another user's processes in their series, recording: a trace or --return-probes all holds every probe on, other_cycle: the node's cycle holds other series, synchronizes: what stays probed is over the budget alone).";
    PROBES_DUTY: "rocsync_probes_duty_cycle" gauge
        "The share of the time the duty-cycled files' records, stream waits and destroys are probed (1: no cycle).";
    PROBES_CYCLED: "rocsync_probes_cycled_files" gauge
        "Probed runtime files whose records, stream waits and destroys are in the budget's duty cycle.";
    FLIGHT_UNRECORDED: "rocsync_flight_recorder_unrecorded_calls_total" counter
        "Calls the flight recorder did not record because the budget's duty cycle had their probes off (estimated, as in rocsync_sync_calls_estimated_total), by API; its dumps say the periods off. Shown with --flight-recorder.";
    BUILD_INFO: "rocsync_build_info" gauge
        "The daemon's release and the commit it was built from (always 1).";
    DAEMON_CPU: "rocsync_daemon_cpu_seconds_total" counter
        "CPU time the daemon itself used (user and system).";
}

/// The scrape's text, family by family.
#[derive(Default)]
pub(crate) struct Text {
    pub out: String,
}

impl Text {
    /// Begins `f` (its `# HELP` and `# TYPE`); its samples follow, all together.
    pub(crate) fn family(&mut self, f: &Family) -> Samples<'_> {
        let _ = writeln!(
            self.out,
            "# HELP {} {}\n# TYPE {} {}",
            f.name, f.help, f.name, f.kind
        );
        self.samples(f)
    }

    /// More samples of `f`, begun already.
    pub(crate) fn samples(&mut self, f: &Family) -> Samples<'_> {
        Samples {
            out: &mut self.out,
            name: f.name,
        }
    }
}

/// The samples of one family.
pub(crate) struct Samples<'a> {
    out: &'a mut String,
    name: &'static str,
}

impl Samples<'_> {
    pub(crate) fn value(&mut self, v: impl Display) {
        let _ = writeln!(self.out, "{} {v}", self.name);
    }

    /// `labels`: `k="v",…`, escaped already.
    pub(crate) fn labelled(&mut self, labels: &str, v: impl Display) {
        let _ = writeln!(self.out, "{}{{{labels}}} {v}", self.name);
    }

    /// A histogram's `_bucket`, `_sum` or `_count` sample.
    pub(crate) fn part(&mut self, suffix: &str, labels: &str, v: impl Display) {
        let _ = writeln!(self.out, "{}{suffix}{{{labels}}} {v}", self.name);
    }
}
