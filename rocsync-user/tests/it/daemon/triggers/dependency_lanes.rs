//! The dependency state a blocked call is followed back through is kept per user (issue
//! 60): while a root process blocks in a synchronisation that waits on an event recorded
//! on another stream, `nobody` records and waits on 300 000 handles never seen before.
//! Before, one LRU over all users gave root's record up to the flood, and the stall no
//! longer said what it waited on; now the flood pushes out only `nobody`'s own handles,
//! counted. Needs root.

use std::{os::unix::process::CommandExt, process::Command};

use crate::common::{daemon::*, *};

#[test]
fn another_users_flood_of_events_leaves_roots_chain_whole() {
    let name = "another_users_flood_of_events_leaves_roots_chain_whole";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    // The scenario where `nobody` can run it, its log in a folder of its own.
    let theirs = nobodys_folder(&dir, "theirs");
    // The chain is read at the stall's return, long after the flood.
    let args = ["--capture-on-stall", "50ms", "--hang-after", "off"];
    let (daemon, mut lines) = start_daemon(&dir, &exe, &args);
    let mut roots = Gated::start(
        Command::new(&exe)
            .args(["gated", "stall", "1", "8000000"])
            .env("SCENARIO_LOG", dir.path("stall.log")),
    );
    lines.wait_for(&format!("tracking pid {}", roots.child.id()));
    let mut flood = Gated::start(
        Command::new(&exe)
            .args(["gated", "distinct", "300000"])
            .env("SCENARIO_LOG", theirs.join("distinct.log"))
            .uid(65534)
            .gid(65534),
    );
    lines.wait_for(&format!("tracking pid {}", flood.child.id()));
    // Root records, waits and blocks for 8 s; meanwhile the flood.
    roots.open();
    flood.open();
    assert!(flood.child.wait().unwrap().success());
    let pid = roots.child.id();
    assert!(roots.child.wait().unwrap().success());
    lines.wait_for(&format!("stall: pid {pid}'s hipStreamSynchronize took"));
    let said = lines.1.last().unwrap();
    assert!(
        said.contains("(waited on event 0x") && said.contains("recorded on stream 0x"),
        "root's chain was pushed out: {said}"
    );
    // The flood pushed out its own: 300 000 handles of each kind in 8192.
    let addr = metrics_addr(&lines);
    let evicted = |state: &str| {
        metric(
            &addr,
            &format!("rocsync_dependency_evicted_total{{state=\"{state}\"}}"),
        )
    };
    assert!(evicted("event_record") >= 250_000.0);
    assert!(evicted("stream_wait") >= 250_000.0);
    stop(daemon);
}
