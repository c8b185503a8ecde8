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

/// Root has a lane of its own and the first 7 other users one each; the 8th and the 9th
/// share the last with the 7th, and `rocsync_dependency_shared_lane_users` says so: 0
/// with 7 users, 2 with 8, 3 with 9 (before, the sharing showed nowhere).
#[test]
fn users_past_the_seventh_share_the_last_lane_and_are_counted() {
    use std::os::unix::fs::PermissionsExt as _;
    let name = "users_past_the_seventh_share_the_last_lane_and_are_counted";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    // Each user's log in one folder they can all write.
    let theirs = nobodys_folder(&dir, "theirs");
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (daemon, mut lines) = start_daemon(&dir, &exe, &[]);
    let addr = metrics_addr(&lines);
    let shared = || {
        let body = get(&addr, "/metrics");
        let line = (body.lines())
            .find(|l| l.starts_with("rocsync_dependency_shared_lane_users "))
            .unwrap_or_else(|| panic!("no rocsync_dependency_shared_lane_users in {body}"))
            .to_string();
        line.rsplit(' ').next().unwrap().parse::<f64>().unwrap()
    };
    // One record and one wait each, as a user of its own (no passwd entry needed).
    let mut user = |uid: u32| {
        let mut g = Gated::start(
            Command::new(&exe)
                .args(["gated", "distinct", "4"])
                .env("SCENARIO_LOG", theirs.join(format!("distinct-{uid}.log")))
                .uid(uid)
                .gid(uid),
        );
        g.open_when_tracked(&mut lines);
        assert!(g.child.wait().unwrap().success());
    };
    for uid in 61001..=61007 {
        user(uid);
    }
    assert_eq!(shared(), 0.0, "7 users, each a lane of its own");
    user(61008);
    assert_eq!(shared(), 2.0);
    user(61009);
    assert_eq!(shared(), 3.0);
    // Root's own records take no lane of another's.
    user(0);
    assert_eq!(shared(), 3.0);
    stop(daemon);
}
