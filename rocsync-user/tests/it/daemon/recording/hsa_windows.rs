//! The daemon's HSA packets in traces that begin while the process runs, against the
//! simulated runtime's own log of every packet (queue, write index, kind, and the clock
//! around its doorbell): a sampled window holds exactly the packets published in its
//! span, its queues made before it placed on their agents; a queue made before the daemon
//! even started is found at its first doorbell, as `attach` finds it, and the trace holds
//! every packet published in its span. Needs root.

use std::{
    collections::BTreeSet,
    process::{Command, Stdio},
};

use crate::common::{daemon::*, daemon_hsa::*, packets::*, *};

fn monotonic_now_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

#[test]
fn a_sampled_window_holds_the_packets_published_in_its_span() {
    let name = "a_sampled_window_holds_the_packets_published_in_its_span";
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    let flags = ["--sample-window", "300ms", "--sample-every", "1s"];
    // A loop on each of two devices, each thread its own stream (and queue).
    let (daemon, _, mut target, _) =
        tracked_over_hsa_with(&dir, &["loop", "3500", "2"], &[], &flags);
    let pid = target.child.id();
    target.open();
    assert!(target.child.wait().unwrap().success());
    stop(daemon);
    let logged = read_every_packet_log(&dir.path("every.log"));
    let first_on = |queue: u64| {
        logged
            .iter()
            .filter(|p| p.queue == queue)
            .map(|p| p.before_ns)
            .min()
            .unwrap()
    };
    let traces = dir.path("state/traces");
    let mut names: Vec<String> = std::fs::read_dir(&traces)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("sample-") && n.ends_with(".json"))
        .collect();
    names.sort();
    let (mut checked, mut queues_made_before) = (0, 0);
    for n in &names {
        let t = read_json(&traces.join(n));
        if !call_rows(&t).iter().any(|r| r.pid == u64::from(pid)) {
            continue; // a window before the loop, or after it
        }
        assert_eq!(
            t["rocsync"]["drops"]["packets_unknown_queue"], 0,
            "{n}: {}",
            t["rocsync"]
        );
        let span = recorded_span(&t);
        let rows = assert_packets_of_log(&t, &logged, span, Agents::Known, |_| true);
        let devices: BTreeSet<u64> = rows.iter().filter_map(|r| r.agent).collect();
        assert_eq!(devices, BTreeSet::from([0, 1]), "{n}: both loops' packets");
        let queues: BTreeSet<u64> = rows.iter().map(|r| r.queue).collect();
        if queues.iter().all(|&q| first_on(q) < span.0) {
            queues_made_before += 1;
        }
        checked += 1;
    }
    assert!(checked > 0, "no window caught the loop: {names:?}");
    assert!(
        queues_made_before > 0,
        "no window began after the queues were made: {names:?}"
    );
}

#[test]
fn a_queue_made_before_the_daemon_started_is_found_at_its_doorbell() {
    let name = "a_queue_made_before_the_daemon_started_is_found_at_its_doorbell";
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    let exe = own_copy_dlopen(&dir);
    // The scenario first: its queues made, and packets published, with no daemon. It
    // outlives the daemon's start (its calibration took over 7 s beside a 10-minute soak).
    let mut target = over_hsa(Command::new(&exe).args(["loop", "15000", "2"]), &dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = target.id();
    Lines::of(target.stdout.take().unwrap()).wait_for("looping");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let started = monotonic_now_ns();
    let (daemon, mut lines) = start_daemon(&dir, &exe, &[]);
    lines.wait_for_all(&[&format!("tracking pid {pid}"), "(HSA queues and doorbells)"]);
    let pid_arg = pid.to_string();
    let file = ask_daemon(
        &dir.path("rocsync.sock"),
        &["trace", "--pid", &pid_arg, "--duration", "500ms"],
    );
    assert!(target.wait().unwrap().success());
    stop(daemon);
    let logged = read_every_packet_log(&dir.path("every.log"));
    // Two queues, each publishing before the daemon started.
    let queues: BTreeSet<u64> = logged.iter().map(|p| p.queue).collect();
    assert_eq!(queues.len(), 2, "one queue per loop");
    for q in &queues {
        assert!(
            logged.iter().any(|p| p.queue == *q && p.after_ns < started),
            "queue {q:#x} published nothing before the daemon started"
        );
    }
    let t = read_json(std::path::Path::new(file.trim()));
    assert_eq!(t["rocsync"]["queues_discovered"], 2, "{}", t["rocsync"]);
    assert_eq!(
        t["rocsync"]["drops"]["packets_unknown_queue"], 0,
        "{}",
        t["rocsync"]
    );
    // Every packet published in the trace's span, each on "GPU (agent unknown)" as
    // `attach` places a queue it found at a doorbell.
    let rows = assert_packets_of_log(&t, &logged, recorded_span(&t), Agents::Unknown, |_| true);
    let traced: BTreeSet<u64> = rows.iter().map(|r| r.queue).collect();
    assert_eq!(traced, queues);
    let gpu = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["cat"] == "hsa_packet")
        .unwrap()["pid"]
        .clone();
    assert!(
        names_process(&t, &gpu, "GPU (agent unknown)"),
        "the GPU process says its agent is unknown"
    );
}
