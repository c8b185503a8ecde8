//! Losses forced and counted: a 4 KiB ring under a burst of calls must drop, and every
//! call made is then either written or counted as a dropped entry record — in the trace's
//! `drops` and the summary alike. Needs root (eBPF).

use crate::common::*;
use rocsync_tests::{read_log, scenario};

#[test]
fn a_tiny_ring_drops_and_every_loss_is_counted() {
    if !can_trace("a_tiny_ring_drops_and_every_loss_is_counted") {
        return;
    }
    let dir = TempDir::new();
    let (log, trace, raw) = (dir.path("s.log"), dir.path("t.json"), dir.path("r.jsonl"));
    let out = run_ok(
        rocsync()
            .args(["run", "--no-status", "--ring-size", "4K", "-o"])
            .arg(&trace)
            .arg("--raw")
            .arg(&raw)
            .arg("--")
            .arg(scenario())
            .args(["threads", "4", "3000"])
            .env("SCENARIO_LOG", &log),
    );
    let logged = read_log(&log);
    let made = probed(&logged).len() as u64;
    let t = read_json(&trace);
    let r = &t["rocsync"];
    let written = r["calls"].as_u64().unwrap();
    // What was written are calls the scenario made, in its threads' order, as many as
    // the capture says.
    let (_, captured) = read_raw(&raw);
    assert_eq!(assert_calls_within(&logged, captured) as u64, written);
    let dropped = r["drops"]["entry_records"].as_u64().unwrap();
    let lost_ids = r["drops"]["lost_ids"].as_u64().unwrap();
    assert!(dropped > 0, "a 4 KiB ring under 48 000 calls must drop");
    assert_eq!(
        written + dropped,
        made,
        "every call written or counted dropped"
    );
    // Gaps seen in the order are a subset of the dropped entries (the last ones leave
    // no gap behind them).
    assert!(lost_ids <= dropped && lost_ids > 0);
    // The summary says the same.
    let stderr = stderr_of(&out);
    let lost = stderr
        .lines()
        .find(|l| l.trim_start().starts_with("lost:"))
        .expect("a lost line");
    assert!(lost.contains(&format!("entry_records {dropped}")), "{lost}");
    assert!(
        stderr.contains(&format!("captured {written} calls")),
        "{stderr}"
    );
}
