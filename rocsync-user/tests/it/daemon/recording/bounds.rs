//! One process can neither fill the disk nor the daemon's memory: a hang beside threads
//! that flood records and waits gives a trace that ends at `--trace-max-bytes`, marked
//! truncated and counted, while the daemon stays small; temporaries a killed daemon left
//! are swept at start. Needs root.

use std::{os::unix::fs::DirBuilderExt as _, process::Command};

use crate::{
    common::{daemon::*, *},
    daemon::triggers::stalls::stall_traces,
};

/// The daemon's peak resident set, from its status (kB).
fn peak_rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_hang_beside_a_flood_ends_at_the_size_bound_and_the_daemon_stays_small() {
    let name = "a_hang_beside_a_flood_ends_at_the_size_bound_and_the_daemon_stays_small";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    // A killed daemon's temporary (its pid long gone), 4 MB of a cut trace.
    let traces = dir.path("state/traces");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&traces)
        .unwrap();
    let stale = traces.join(".hang-x.json.rocsync-999999999-abc.tmp");
    std::fs::write(&stale, vec![b' '; 4 << 20]).unwrap();
    let max = 2u64 << 20;
    // Hangs past 1 s (the default was 1 s before it was 5 s): the block is 4 s.
    let flags = [
        "--capture-on-stall",
        "50ms",
        "--hang-after",
        "1s",
        "--trace-max-bytes",
        "2M",
    ];
    let (daemon, mut lines) = start_daemon(&dir, &exe, &flags);
    assert!(!stale.exists(), "the stale temporary is still there");
    let addr = metrics_addr(&lines);
    // Blocked 4 s while a thread records and waits flat out; niced, so that the tests
    // beside it (timing a daemon's ticks) keep their CPU.
    let mut target = Gated::start(
        Command::new("nice")
            .args(["-n", "19"])
            .arg(&exe)
            .args(["gated", "flood", "4000000", "1"]),
    );
    target.open_when_tracked(&mut lines);
    let pid = target.child.id();
    lines.wait_for(&format!("hang: pid {pid}'s hipStreamSynchronize"));
    lines.wait_for("ends early: a file reached --trace-max-bytes");
    target.said.wait_for("flooded ");
    let said = target.said.1.last().unwrap().clone();
    let flooded: u64 = said.trim_start_matches("flooded ").parse().unwrap();
    assert!(target.child.wait().unwrap().success());
    let listed = stall_traces(&dir.path("rocsync.sock"), 1);
    let file = listed
        .iter()
        .find(|f| {
            f.to_string_lossy()
                .contains(&format!("hang-hipStreamSynchronize-{pid}-"))
        })
        .unwrap_or_else(|| panic!("no hang trace of {pid} in {listed:?}"));
    let size = std::fs::metadata(file).unwrap().len();
    // Cut short of its bound, by room for what follows: the file's end (its metadata and
    // summary), not more rows.
    assert!(size <= max, "{size} bytes for a bound of {max}");
    assert!(size >= max - max / 16, "{size} bytes for a bound of {max}");
    let t = read_json(file);
    let p = &t["rocsync"]["parameters"];
    assert_eq!(p["truncated"]["reason"], "size", "{p}");
    assert!(p["truncated"]["bytes_when_ended"].as_u64().unwrap() >= max - max / 16);
    // What came after is counted, not written.
    assert!(p["truncated"]["left_out"].as_u64().unwrap() > 0, "{p}");
    assert_eq!(p["hang"]["ended"], "truncated");
    // It holds a part of the flood, and says so: far fewer calls than were made.
    let calls = t["rocsync"]["calls"].as_u64().unwrap();
    assert!(
        calls > 1000 && calls < flooded,
        "{calls} of {flooded} calls"
    );
    // The hang's, and maybe its return's stall trace too (the flood's calls the daemon
    // had yet to read when it began are its own): each cut short is counted.
    assert!(metric(&addr, "rocsync_traces_truncated_total") >= 1.0);
    let peak_mb = peak_rss_kb(daemon.id()) / 1024;
    assert!(peak_mb <= 256, "the daemon peaked at {peak_mb} MB");
    stop(daemon);
}
