//! Flight recorder dumps next to others (issue 60): a dump ends at `--trace-max-bytes`
//! as any trace does (a recorder of any user's flood wrote 1.64 GB files past the
//! 512 MiB bound), says so and counts what it left out; and root's `trace --flight` is
//! never refused for a group member's dump (one looping `trace --flight` kept root's
//! refused 5 of 5): the member's ends early, written as far as it went. Needs root.

use std::{
    os::unix::fs::PermissionsExt as _,
    path::Path,
    process::{Command, Stdio},
    sync::{Arc, atomic::AtomicBool, atomic::Ordering},
};

use super::writing::gated_calls;
use crate::common::{daemon::*, read_json};

/// A dump's `rocsync.parameters.truncated`, and its file's size.
fn truncated(file: &str) -> (serde_json::Value, u64) {
    let t = read_json(Path::new(file));
    let size = std::fs::metadata(file).unwrap().len();
    (t["rocsync"]["parameters"]["truncated"].clone(), size)
}

#[test]
fn a_flight_dump_ends_at_the_trace_bound_and_counts_what_it_left_out() {
    let name = "a_flight_dump_ends_at_the_trace_bound_and_counts_what_it_left_out";
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    let exe = own_bench_calls(&dir);
    let args = ["--flight-recorder", "10m", "--trace-max-bytes", "1M"];
    let (daemon, mut lines) = start_daemon(&dir, &exe, &args);
    // 20 000 calls: several MB of rows.
    let mut target = gated_calls(&exe, 20_000);
    target.open_when_tracked(&mut lines);
    assert!(target.child.wait().unwrap().success());
    let sock = dir.path("rocsync.sock");
    let file = ask_daemon(&sock, &["trace", "--flight"]);
    let (cut, size) = truncated(file.trim());
    assert_eq!(cut["reason"], "size", "{cut}");
    let max = cut["max_bytes"].as_u64().unwrap();
    assert_eq!(max, 1 << 20);
    assert!(size <= max, "{size} bytes written");
    assert!(cut["left_out"].as_u64().unwrap() > 0, "{cut}");
    let addr = metrics_addr(&lines);
    assert_eq!(metric(&addr, "rocsync_traces_truncated_total"), 1.0);
    lines.wait_for("cut at --trace-max-bytes (1048576 bytes)");
    stop(daemon);
}

#[test]
fn roots_flight_dump_ends_a_group_members_and_is_never_refused_for_it() {
    let name = "roots_flight_dump_ends_a_group_members_and_is_never_refused_for_it";
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    // nobody may use the socket (nogroup) and reach it.
    std::fs::set_permissions(dir.0.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let exe = own_bench_calls(&dir);
    let args = ["--flight-recorder", "10m", "--group", "nogroup"];
    // Each dump's file cut at 8 MB: the dumps still take their time, not the disk.
    let (daemon, mut lines) = start_daemon(
        &dir,
        &exe,
        &[&args[..], &["--trace-max-bytes", "8M"]].concat(),
    );
    let mut target = gated_calls(&exe, 300_000);
    target.open_when_tracked(&mut lines);
    assert!(target.child.wait().unwrap().success());
    let sock = dir.path("rocsync.sock");
    // The member asks again as soon as each of its dumps is written.
    let done = Arc::new(AtomicBool::new(false));
    let member = {
        let (done, sock) = (done.clone(), sock.clone());
        std::thread::spawn(move || {
            let mut theirs = Vec::new();
            while !done.load(Ordering::Relaxed) {
                let out = Command::new("setpriv")
                    .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
                    .arg(env!("CARGO_BIN_EXE_rocsync"))
                    .args(["trace", "--flight", "--socket"])
                    .arg(&sock)
                    .stderr(Stdio::null())
                    .output()
                    .unwrap();
                if out.status.success() {
                    theirs.push(String::from_utf8(out.stdout).unwrap().trim().to_string());
                }
            }
            theirs
        })
    };
    for _ in 0..5 {
        // Asked while the member's dump is written.
        until(30, "a dump of the member's being written", || {
            daemon_status(&sock)["writing"][0]
                .as_str()
                .is_some_and(|n| n.starts_with("flight recorder dump"))
        });
        let roots = ask_daemon(&sock, &["trace", "--flight"]);
        assert!(roots.trim().ends_with(".json"), "{roots}");
    }
    done.store(true, Ordering::Relaxed);
    let theirs = member.join().unwrap();
    // Theirs were written whole, or as far as they went when root asked.
    for file in &theirs {
        let (cut, _) = truncated(file);
        assert!(
            cut.is_null() || ["size", "preempted"].contains(&cut["reason"].as_str().unwrap()),
            "{cut}"
        );
    }
    let preempted = (theirs.iter())
        .filter(|f| truncated(f).0["reason"] == "preempted")
        .count();
    let said = (lines.drain().iter())
        .filter(|l| l.contains("ends early: root asked for a dump"))
        .count();
    assert_eq!(preempted, said, "each preempted dump said so once");
    stop(daemon);
}
