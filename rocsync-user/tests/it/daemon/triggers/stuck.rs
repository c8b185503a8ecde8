//! A rank whose collectives stop is traced on its own node, whether or not any rank
//! blocks in a call: a one-rank job over the simulated RCCL (each collective completes
//! at once) makes collectives every 20 ms for 4 s, then sleeps on the host before #200. No call
//! is in flight, so no hang; the daemon's stuck-rank trigger traces it as `stopped`
//! (more than --hang-after, and 50 times its usual interval), once, and its trace ends
//! when the rank goes on. Needs root.

use std::process::{Command, Stdio};

use crate::{
    collectives::{comm_id_of, job_lines},
    common::{daemon::*, read_json},
    daemon::triggers::stalls::stall_traces,
};

#[test]
fn a_rank_whose_collectives_stop_is_traced_though_no_call_blocks() {
    let name = "a_rank_whose_collectives_stop_is_traced_though_no_call_blocks";
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    let exe = own_nccl_ranks(&dir);
    let (daemon, mut lines) = start_daemon(&dir, &exe, &["--hang-after", "1s"]);
    let addr = metrics_addr(&lines);
    // 1 rank, 300 collectives 20 ms apart, a 6 s pause before #200, 1.5 s to be tracked.
    let mut job = Command::new(&exe)
        .args(["1", "300", "0", "200", "6000", "1500", "20"])
        .env("TMPDIR", dir.path(""))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = job_lines(&mut job);
    let uid = rx.recv().unwrap();
    let id = comm_id_of(uid.strip_prefix("uid ").unwrap());
    // The rank's own process (the job's first forks it): "rank 0 pid P started".
    let started = rx.recv().unwrap();
    let pid: u32 = started.split(' ').nth(3).unwrap().parse().unwrap();
    lines.wait_for(&format!(
        "stuck rank: pid {pid} (rank 0) has been at #199 of comm {id}"
    ));
    assert!(
        lines.1.last().unwrap().contains("(stopped)"),
        "{:?}",
        lines.1.last()
    );
    assert_eq!(
        metric(&addr, "rocsync_stuck_rank_traces_total{reason=\"stopped\"}"),
        1.0
    );
    // No hang: nothing was in flight.
    assert_eq!(metric(&addr, "rocsync_hang_traces_total"), 0.0);
    assert!(job.wait().unwrap().success());
    let listed = stall_traces(&dir.path("rocsync.sock"), 1);
    let file = (listed.iter())
        .find(|f| {
            f.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!("stuck-{pid}-"))
        })
        .unwrap_or_else(|| panic!("no stuck-{pid}-… in {listed:?}"));
    let t = read_json(file);
    let stuck = &t["rocsync"]["parameters"]["stuck"];
    assert_eq!(
        (
            stuck["reason"].as_str(),
            stuck["seq"].as_u64(),
            stuck["comm"].as_str()
        ),
        (Some("stopped"), Some(199), Some(id.as_str())),
        "{stuck}"
    );
    assert_eq!(stuck["rank"].as_u64(), Some(0), "{stuck}");
    // Its usual interval was learnt from the collectives before (20 ms apart).
    let usual = stuck["usual_interval_s"].as_f64().unwrap();
    assert!((0.015..0.2).contains(&usual), "{stuck}");
    // The rank went on after its pause: the trace ended then, and holds #200's call.
    assert_eq!(stuck["ended"].as_str(), Some("advanced"), "{stuck}");
    let events = t["traceEvents"].as_array().unwrap();
    assert!(
        events
            .iter()
            .any(|e| e["name"] == "ncclAllReduce" && e["pid"] == pid),
        "no collective of pid {pid} in the trace"
    );
    stop(daemon);
}
