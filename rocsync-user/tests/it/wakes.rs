//! The probes wake rocsync's reader at most once per drain: each wake is an interrupt on
//! the calling thread's CPU, and a reader already woken is reading. Needs root (eBPF).

use crate::common::*;

/// Unread records in a 2 MiB ring (`--ring-size 2`: 32 768 slots, a sixteenth) past
/// which a probe wakes the reader, and how often a probe looks (every 64 positions).
const WAKE_SHARE: u64 = 2048;
const LOOK_EVERY: u64 = 64;

/// "rocsync: the probes woke the reader N times in M drains" (`-v`): (N, M).
fn wakes_and_drains(stderr: &str) -> (u64, u64) {
    let line = stderr
        .lines()
        .find(|l| l.contains("the probes woke the reader"))
        .unwrap_or_else(|| panic!("no wake count in:\n{stderr}"));
    let numbers: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    match numbers[..] {
        [wakes, drains] => (wakes, drains),
        _ => panic!("unexpected line: {line}"),
    }
}

#[test]
fn a_busy_capture_wakes_its_reader_at_most_once_per_drain() {
    if !can_trace("a_busy_capture_wakes_its_reader_at_most_once_per_drain") {
        return;
    }
    let dir = TempDir::new();
    let trace = dir.path("t.json");
    // One thread calling flat out fills a 2 MiB ring's wake share (2 048 records) many
    // times between two timed drains (10 ms): the probes must wake the reader.
    let out = run_ok(
        rocsync()
            .args(["run", "-v", "--no-status", "--ring-size", "2", "-o"])
            .arg(&trace)
            .arg("--")
            .arg(rocsync_tests::bench_calls())
            .arg(rocsync_tests::sim_hip())
            .args(["hipStreamSynchronize", "300000"]),
    );
    // Every call the loop made (its 1 000 warm-up calls, then as many as its command line
    // says): a row, or counted lost.
    let t = read_json(&trace);
    let rows = call_rows(&t)
        .iter()
        .filter(|r| r.name == "hipStreamSynchronize")
        .count() as u64;
    let lost = t["rocsync"]["drops"]["lost_ids"].as_u64().unwrap();
    assert_eq!(rows + lost, 301_000, "{rows} rows, {lost} lost");
    let (wakes, drains) = wakes_and_drains(&stderr_of(&out));
    // Two records a call. Without a wake every drain is a timed one; if the records
    // outnumber a share per drain, some span between two drains held a share or more,
    // and its probe had to wake the reader (counting, not timing: a loaded machine that
    // drains more often than the loop fills a share proves nothing, and says so).
    let records = 2 * (rows + lost);
    assert!(
        wakes > 0 || records <= (drains + 1) * (WAKE_SHARE + LOOK_EVERY),
        "{records} records in {drains} drains and the probes never woke the reader"
    );
    // Each wake needs a drain to begin before the next; the last may find none after it.
    // Waking at every look past the share, this capture sent thousands.
    assert!(
        wakes <= drains + 1,
        "{wakes} wakes in {drains} drains: the probes woke a reader already woken"
    );
}
