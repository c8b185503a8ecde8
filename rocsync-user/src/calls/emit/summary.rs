//! The report printed at the end of every capture, from the capture's one account.

use std::fmt::Write as _;

use crate::calls::stats::CaptureStats;

/// Calls per API, waits, packets, every loss by kind, and the outputs; `who` says it
/// (`rocsync`, or the daemon and its trace).
pub(crate) fn render(stats: &CaptureStats, outputs: &[String], who: &str) -> String {
    let mut s = String::new();
    let _ = write!(s, "{who}: captured {} calls", stats.calls());
    if let Some((from, until)) = stats.recorded {
        let span = until.saturating_sub(from) as f64 / 1e6;
        let _ = write!(s, " recorded over {span:.2} s");
    }
    s.push('\n');
    for (api, n) in &stats.per_api {
        let _ = write!(s, "  {api:<28} {:>9}", n.calls);
        if n.failed > 0 {
            let _ = write!(s, "  ({} returned an error)", n.failed);
        }
        if n.no_return > 0 {
            let _ = write!(s, "  ({} never returned while traced)", n.no_return);
        }
        s.push('\n');
    }
    // Calls a trace has no row of: the same count as `report`'s, and why.
    let selections: u64 = (stats.per_api.iter())
        .filter(|(api, _)| api.ends_with("SetDevice") || api.ends_with("GetDevice"))
        .map(|(_, n)| n.calls)
        .sum();
    if selections > 0 {
        let _ = writeln!(
            s,
            "  rows: {} (the {selections} device selections set the calls' devices: no row of their own)",
            stats.calls() - selections
        );
    }
    for (kind, n) in &stats.packets {
        let _ = writeln!(s, "  AQL {kind:<24} {n:>9}");
    }
    let _ = write!(
        s,
        "  waits resolved: {}, unresolved: {}",
        stats.waits_resolved,
        stats.waits_unresolved()
    );
    let reasons: Vec<String> = stats
        .unresolved
        .iter()
        .map(|(why, n)| format!("{} {n}", why.name()))
        .collect();
    if !reasons.is_empty() {
        let _ = write!(s, " ({})", reasons.join(", "));
    }
    s.push('\n');
    let unrecorded = stats.kernel.get_device_unrecorded;
    if unrecorded > 0 {
        let _ = writeln!(
            s,
            "  not recorded: {unrecorded} *GetDevice calls of attach's temporary probes \
             (threads whose device was learned, or made while the probes were removed)"
        );
    }
    if stats.calls_begun_before > 0 {
        let _ = writeln!(
            s,
            "  not recorded: {} calls begun before the recording (only their returns came)",
            stats.calls_begun_before
        );
    }
    let filtered: u64 = stats.filtered.values().sum();
    if filtered > 0 {
        let _ = writeln!(s, "  filtered by --agents: {filtered} calls");
    }
    if stats.suspensions > 0 {
        let _ = writeln!(
            s,
            "  suspended (Ctrl-Z): {} time(s), {:.1}s: runtimes loaded meanwhile were traced \
             from the resume",
            stats.suspensions,
            stats.suspended_ms as f64 / 1000.0
        );
    }
    let lost: Vec<String> = stats
        .drops()
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    match (&stats.truncated, lost.is_empty()) {
        (None, true) => _ = writeln!(s, "  lost: nothing"),
        (None, false) => _ = writeln!(s, "  lost: {}", lost.join(", ")),
        (Some(_), true) => _ = writeln!(s, "  lost: nothing counted (but see below)"),
        (Some(_), false) => _ = writeln!(s, "  lost: {} (and see below)", lost.join(", ")),
    }
    if let Some(t) = &stats.truncated {
        let _ = writeln!(
            s,
            "  truncated: {t}: the capture was cut short; what followed, and the losses its \
             trailer counts, are unknown"
        );
    }
    for line in outputs {
        let _ = writeln!(s, "  {line}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_the_temporary_probes_did_not_record_are_said_and_not_lost() {
        let mut stats = CaptureStats::default();
        stats.kernel.get_device_unrecorded = 4_000;
        let said = render(&stats, &[], "rocsync");
        assert!(
            said.contains("not recorded: 4000 *GetDevice calls"),
            "{said}"
        );
        assert!(said.contains("lost: nothing"), "{said}");
        assert_eq!(stats.lost_total(), 0);
        assert_eq!(stats.to_json()["get_device_calls_not_recorded"], 4_000);
    }

    #[test]
    fn calls_begun_before_the_recording_are_said_and_not_lost() {
        let stats = CaptureStats {
            calls_begun_before: 2,
            ..CaptureStats::default()
        };
        let said = render(&stats, &[], "rocsync");
        assert!(
            said.contains("not recorded: 2 calls begun before the recording"),
            "{said}"
        );
        assert!(said.contains("lost: nothing"), "{said}");
        assert_eq!(stats.to_json()["calls_begun_before"], 2);
        assert_eq!(stats.to_json()["drops"]["unpaired_exits"], 0);
    }

    #[test]
    fn device_selections_are_counted_and_said_to_have_no_row() {
        let mut stats = CaptureStats::default();
        stats.per_api.entry("hipSetDevice").or_default().calls = 3;
        stats
            .per_api
            .entry("hipStreamSynchronize")
            .or_default()
            .calls = 477;
        let said = render(&stats, &[], "rocsync daemon: trace 7");
        assert!(
            said.starts_with("rocsync daemon: trace 7: captured 480 calls\n"),
            "{said}"
        );
        assert!(
            said.contains("  rows: 477 (the 3 device selections"),
            "{said}"
        );
    }
}
