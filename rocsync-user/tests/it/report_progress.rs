//! A long report says how far it is (a 920 MB trace took 27 s in silence): on a terminal
//! from its first second, as `N MiB of M MiB (P %)` lines on stderr and a last `done in`,
//! while stdout holds the report alone. The trace is grown until its report takes long
//! enough to be due a line on a terminal, whatever this machine's speed.

use std::{
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use crate::common::*;

/// On a terminal the first line comes after 1 s (`read/report/load/progress.rs`).
const LONG_ENOUGH: Duration = Duration::from_secs(3);

/// A gzip of `members` × 2 000 kernel rows (which the report reads and does not use),
/// then one runtime call.
fn trace_of(path: &Path, members: usize) {
    let rows: String = (0..2_000)
        .map(|i| {
            format!(
                r#"{{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 1, "ts": {i}, "dur": 1, "args": {{"note": "{}"}}}}, "#,
                "x".repeat(200)
            )
        })
        .collect();
    let rows = Members::compressed(&rows);
    let mut gz = Members::create(path);
    gz.text(r#"{"schemaVersion": 1, "traceEvents": ["#);
    for _ in 0..members {
        gz.raw(&rows);
    }
    gz.text(concat!(
        r#"{"ph": "X", "cat": "cuda_runtime", "name": "hipDeviceSynchronize", "pid": 7, "#,
        r#""tid": 7, "ts": 1.0, "dur": 2.0, "args": {"correlation": 1}}], "#,
        r#""rocsync": {"drops": {"lost_ids": 0}}}"#
    ));
    std::io::Write::flush(&mut gz.0).unwrap();
}

/// `rocsync report TRACE` with its stdout and stderr piped: (stdout, stderr, wall time).
fn piped(trace: &Path) -> (String, String, Duration) {
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_rocsync"))
        .arg("report")
        .arg(trace)
        .output()
        .unwrap();
    let took = start.elapsed();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (stdout, stderr_of(&out), took)
}

/// The progress lines of `text`, each the share it reports.
fn shares(text: &str) -> Vec<f64> {
    text.lines()
        .filter_map(|l| {
            l.trim_end()
                .strip_prefix("rocsync: report: reading the trace: ")
        })
        .map(|l| {
            let (_, pct) = l.rsplit_once(" (").unwrap_or_else(|| panic!("{l:?}"));
            assert!(l.contains(" MiB of "), "{l:?}");
            pct.trim_end_matches(" %)").parse().unwrap()
        })
        .collect()
}

#[test]
fn a_long_report_says_how_far_it_is_on_a_terminal() {
    let dir = TempDir::new();
    let trace = dir.path("long.json.gz");
    // Grown (×4) until reading it takes long enough here.
    let mut members = 250;
    let quiet = loop {
        trace_of(&trace, members);
        let (stdout, stderr, took) = piped(&trace);
        if took >= LONG_ENOUGH || members >= 250 * 4usize.pow(4) {
            break (stdout, stderr, took);
        }
        members *= 4;
    };
    // Piped, stdout holds the report alone: a script reading it sees no progress.
    assert!(quiet.0.contains("hipDeviceSynchronize"), "{}", quiet.0);
    assert!(!quiet.0.contains("rocsync: report:"), "{}", quiet.0);
    // Whatever stderr said (a log sees lines only after 5 s) is well formed.
    shares(&quiet.1);

    // On a terminal (script(1) gives the report a pty for stdout and stderr).
    let cmd = format!(
        "{} report {}",
        env!("CARGO_BIN_EXE_rocsync"),
        trace.display()
    );
    let out = Command::new("script")
        .args(["--quiet", "--return", "--command", &cmd, "/dev/null"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let shown = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    let said = shares(&shown);
    assert!(
        !said.is_empty(),
        "no progress line on a terminal (piped it took {:?}):\n{shown}",
        quiet.2
    );
    assert!(
        said.windows(2).all(|w| w[0] <= w[1]) && said.iter().all(|&p| p <= 100.0),
        "{said:?}"
    );
    assert!(
        shown
            .lines()
            .any(|l| l.starts_with("rocsync: report: reading the trace done in ")),
        "{shown}"
    );
    assert!(shown.contains("hipDeviceSynchronize"), "{shown}");
}
