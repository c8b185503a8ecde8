//! The daemon's fleet series: the overhead budget, stalls and hangs.

use crate::daemon::{
    budget::period::View as BudgetView, outputs::upload::UploadView,
    serving::exposition::families::*,
};

/// Stalls and hangs as `/metrics` shows them.
#[derive(Clone, Debug, Default)]
pub(crate) struct StallView {
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
    /// Calls whose start the kernel could not keep: (their user's share, the map full).
    pub untimed: (u64, u64),
    /// What the triggers count of their own (`Trigger::counters`), each family's
    /// samples together.
    pub counters: Vec<Counter>,
}

/// A count a trigger keeps, as `/metrics` shows it: its family (in `families.rs`, so the
/// docs' table has it), a label, the value.
#[derive(Clone, Debug)]
pub(crate) struct Counter {
    pub family: &'static Family,
    pub label: Option<(&'static str, &'static str)>,
    pub value: f64,
}

pub(super) fn render_budget(t: &mut Text, b: &BudgetView) {
    let mut f = t.family(&PROBES_SHED);
    for (api, files) in &b.shed {
        f.labelled(&format!("api=\"{api}\""), files);
    }
    t.family(&PROBE_COST).value(b.highest);
    t.family(&PROBE_COST_SHED).value(b.highest_when_shed);
    let mut f = t.family(&BUDGET);
    if let Some(limit) = b.limit {
        f.value(limit);
    }
    let mut f = t.family(&PROBE_CALL);
    if let Some((emulated, stepped, alone)) = b.call_seconds {
        f.labelled("site=\"emulated\"", emulated);
        f.labelled("site=\"single_stepped\"", stepped);
        f.labelled("site=\"entry_alone\"", alone);
    }
    let mut f = t.family(&OVER_BUDGET);
    for (reason, n) in &b.over {
        f.labelled(&format!("reason=\"{reason}\""), n);
    }
    t.family(&PROBES_DUTY).value(b.duty.0);
    t.family(&PROBES_CYCLED).value(b.duty.1);
    if let Some(unrecorded) = &b.flight_unrecorded {
        let mut f = t.family(&FLIGHT_UNRECORDED);
        for (api, n) in unrecorded {
            f.labelled(&format!("api=\"{api}\""), n);
        }
    }
}

pub(super) fn render_stalls(t: &mut Text, st: &StallView) {
    t.family(&STALL_TRACES).value(st.traces);
    let mut f = t.family(&STALL_TRACES_SKIPPED);
    for (reason, n) in [
        ("interval", st.skipped_interval),
        ("node_limit", st.skipped_node_limit),
        ("not_started", st.skipped_not_started),
        ("hang_trace", st.skipped_hang),
    ] {
        f.labelled(&format!("reason=\"{reason}\""), n);
    }
    t.family(&HANG_TRACES).value(st.hang_traces);
    let mut f = t.family(&HANGS_UNTRACED);
    for (reason, n) in &st.hangs_untraced {
        f.labelled(&format!("reason=\"{reason}\""), n);
    }
    for (i, c) in st.counters.iter().enumerate() {
        let first = i == 0 || st.counters[i - 1].family.name != c.family.name;
        let mut f = match first {
            true => t.family(c.family),
            false => t.samples(c.family),
        };
        match c.label {
            Some((k, v)) => f.labelled(&format!("{k}=\"{v}\""), c.value),
            None => f.value(c.value),
        }
    }
    let mut f = t.family(&CALLS_IN_FLIGHT);
    for (api, secs) in &st.in_flight {
        f.labelled(&format!("api=\"{api}\""), secs);
    }
    let mut f = t.family(&CALLS_UNTIMED);
    f.labelled("reason=\"user_share\"", st.untimed.0);
    f.labelled("reason=\"full\"", st.untimed.1);
}

pub(super) fn render_uploads(t: &mut Text, u: &UploadView) {
    for (family, value) in [
        (&UPLOADS, u.uploaded),
        (&UPLOAD_BYTES, u.bytes),
        (&UPLOAD_FAILURES, u.failures),
        (&UPLOADS_REFUSED, u.refused),
        (&UPLOAD_PENDING, u.pending),
        (&UPLOAD_LOST, u.lost),
    ] {
        t.family(family).value(value);
    }
}
