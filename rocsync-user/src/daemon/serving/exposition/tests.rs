//! The exposition's text, series by series.

use super::*;
use rocsync_common::MetricValue;

/// Every series the daemon can show, each with a value.
fn everything() -> String {
    let mut v = MetricValue {
        calls: 3,
        timed: 3,
        wait_ns: 6_000,
        ..Default::default()
    };
    v.buckets[0] = 1;
    v.buckets[2] = 2;
    let key = MetricKey {
        api: Api::HipStreamSynchronize as u32,
        device: 1,
    };
    let series = Series {
        key,
        value: v,
        labels: String::new(),
        estimated: 2,
        group: 0,
    };
    render(&Snapshot {
        series: &[series],
        unlabelled: Some((5, 3)),
        packets: &[
            (AqlAgent::Ordinal(1), "barrier_and", 7),
            (AqlAgent::Unknown, "kernel_dispatch", 2),
        ],
        drops: &KernelDrops::default(),
        tracked: 1,
        cpu_seconds: 0.5,
        flight_evicted: Some(6),
        traces_written: 2,
        traces_truncated: 1,
        not_started: NotStarted {
            sampled: 3,
            scheduled: 4,
        },
        files_probed: 2,
        files_refused: Refused {
            unusable: 1,
            per_user_limit: 5,
            user_fuse: 6,
        },
        budget: BudgetView {
            limit: Some(0.01),
            call_seconds: Some((2e-6, 1e-5, 1e-6)),
            highest: 0.25,
            highest_when_shed: 0.75,
            over: vec![("shed_only", 0), ("shared_series", 1)],
            shed: vec![("hipEventQuery", 1), ("cudaEventQuery", 0)],
            duty: (0.25, 1),
            flight_unrecorded: Some(vec![("hipEventRecord", 9)]),
        },
        stall_traces: StallView {
            traces: 1,
            skipped_interval: 49,
            hangs_untraced: vec![("interval", 2), ("not_started", 0)],
            in_flight: vec![("hipStreamSynchronize", 2.5)],
            untimed: (3, 0),
            // As the daemon's triggers count, each family with every reason.
            counters: {
                let mut c = Vec::new();
                for t in crate::daemon::triggers::Triggers::default().each() {
                    t.counters(&mut c);
                }
                // The probes' count the daemon adds after the triggers' (`stall_view`).
                c.push(Counter {
                    family: &families::DEPENDENCY_EVICTED,
                    label: Some(("state", "event_record")),
                    value: 1.0,
                });
                c.push(Counter {
                    family: &families::DEPENDENCY_SHARED_LANE,
                    label: None,
                    value: 2.0,
                });
                c
            },
            ..StallView::default()
        },
        uploads: Some(UploadView {
            pending: 3,
            ..UploadView::default()
        }),
        collectives: &[("0xabc".into(), "1".into(), 77, 20)],
        collectives_left_out: 3,
    })
}

#[test]
fn each_local_rank_shows_its_last_collective() {
    let text = everything();
    assert!(text.contains("rocsync_collective_seq{comm=\"0xabc\",rank=\"1\",pid=\"77\"} 20"));
    assert!(text.contains("rocsync_collective_seq_left_out_total{reason=\"user_limit\"} 3"));
}

#[test]
fn histogram_buckets_are_cumulative_and_end_in_the_count() {
    let text = everything();
    let l = "api=\"hipStreamSynchronize\",device=\"1\"";
    assert!(text.contains(&format!(
        "rocsync_sync_wait_seconds_bucket{{{l},le=\"0.000001\"}} 1"
    )));
    assert!(text.contains(&format!(
        "rocsync_sync_wait_seconds_bucket{{{l},le=\"0.000004\"}} 3"
    )));
    assert!(text.contains(&format!(
        "rocsync_sync_wait_seconds_bucket{{{l},le=\"+Inf\"}} 3"
    )));
    assert!(text.contains(&format!("rocsync_sync_wait_seconds_count{{{l}}} 3")));
    assert!(text.contains("rocsync_aql_packets_total{device=\"1\",kind=\"barrier_and\"} 7"));
    assert!(
        text.contains("rocsync_aql_packets_total{device=\"unknown\",kind=\"kernel_dispatch\"} 2")
    );
    assert!(text.contains("rocsync_traces_written_total 2"));
    assert!(text.contains("rocsync_traces_truncated_total 1\n"));
    assert!(text.contains("rocsync_probed_files 2"));
    assert!(text.contains("rocsync_files_refused_total{reason=\"per_user_limit\"} 5"));
    assert!(text.contains("rocsync_traces_not_started_total{origin=\"sampled\"} 3"));
    assert!(text.contains("rocsync_traces_not_started_total{origin=\"dyno_scheduled\"} 4"));
    assert!(text.contains("rocsync_probes_shed{api=\"hipEventQuery\"} 1\n"));
    assert!(text.contains("rocsync_probe_cost_ratio 0.25\n"));
    assert!(text.contains("rocsync_probe_cost_when_shed_ratio 0.75\n"));
    assert!(text.contains("rocsync_budget_ratio 0.01\n"));
    assert!(text.contains("rocsync_over_budget_processes{reason=\"shared_series\"} 1\n"));
    assert!(text.contains("rocsync_over_budget_processes{reason=\"shed_only\"} 0\n"));
    assert!(text.contains("rocsync_stall_traces_total 1\n"));
    assert!(text.contains("rocsync_upload_pending 3\n"));
    assert!(text.contains("rocsync_upload_lost_total 0\n"));
    assert!(text.contains(&format!(
        "rocsync_build_info{{version=\"{}\",commit=\"{}\"}} 1\n",
        env!("CARGO_PKG_VERSION"),
        env!("ROCSYNC_COMMIT")
    )));
    assert!(text.contains("rocsync_calls_in_flight_seconds{api=\"hipStreamSynchronize\"} 2.5\n"));
    assert!(text.contains("rocsync_stall_traces_skipped_total{reason=\"interval\"} 49\n"));
    assert!(text.contains("rocsync_hangs_untraced_total{reason=\"interval\"} 2\n"));
    assert!(text.contains("rocsync_dependency_shared_lane_users 2\n"));
}

/// The metrics table of docs/daemon.md names every family `/metrics` may show, and a
/// scrape with everything on shows each family of the table.
#[test]
fn every_metric_is_in_the_daemon_docs_table() {
    let docs = include_str!("../../../../../docs/daemon.md");
    let text = everything();
    let shown: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.split(' ').next())
        .collect();
    let defined: Vec<&str> = families::ALL.iter().map(|f| f.name).collect();
    assert_eq!(shown, defined);
    let missing: Vec<&&str> = defined
        .iter()
        .filter(|n| !docs.contains(&format!("| `{n}` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/daemon.md's table lacks {missing:?}"
    );
}

/// Each family's samples follow its header, all together (the text format's rule:
/// a sample apart from its family is another family to a parser).
#[test]
fn every_family_s_samples_are_together() {
    let text = everything();
    let mut family = "";
    let mut seen = std::collections::BTreeSet::new();
    for line in text.lines() {
        if let Some(name) = line
            .strip_prefix("# TYPE ")
            .and_then(|l| l.split(' ').next())
        {
            assert!(seen.insert(name), "{name} twice");
            family = name;
        } else if !line.starts_with('#') {
            let name = line.split(['{', ' ']).next().unwrap_or_default();
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s).filter(|b| *b == family))
                .unwrap_or(name);
            assert_eq!(base, family, "{line}");
        }
    }
}
