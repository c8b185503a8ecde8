//! Traces are written off the daemon's loop: while a large flight recorder dump is being
//! written, the daemon answers scrapes and requests (a second dump is refused: one at a
//! time), and the dump, once written, holds every call. Needs root.

use std::{
    io::{BufRead as _, BufReader, Write as _},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use crate::common::{daemon::*, *};

/// Calls the process makes (paced, so the daemon drains them all): a recorder of 1.2 M
/// records, written in about a second here.
const CALLS: u32 = 600_000;
const RATE: &str = "200000";

/// What the test reads of a dump of 600 000 calls (a `serde_json::Value` of it would take
/// gigabytes).
#[derive(serde::Deserialize)]
struct Trace {
    #[serde(rename = "traceEvents")]
    events: Vec<Event>,
    rocsync: serde_json::Value,
}

#[derive(serde::Deserialize)]
struct Event {
    cat: Option<String>,
    name: Option<String>,
}

#[test]
fn a_flight_dump_is_written_while_the_daemon_goes_on() {
    let name = "a_flight_dump_is_written_while_the_daemon_goes_on";
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    // The call loop under a path of the test's own, for the daemon's filter.
    let exe = own_bench_calls(&dir);
    let (daemon, mut lines) = start_daemon(&dir, &exe, &["--flight-recorder", "10m"]);
    let addr = metrics_addr(&lines);
    let mut target = Command::new(&exe)
        .arg(rocsync_tests::sim_hip())
        .args(["hipStreamSynchronize", &CALLS.to_string(), "1", RATE])
        .env("BENCH_GATE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = BufReader::new(target.stdout.take().unwrap());
    let mut line = String::new();
    said.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "loaded");
    lines.wait_for(&format!("tracking pid {}", target.id()));
    writeln!(target.stdin.take().unwrap(), "go").unwrap();
    assert!(target.wait().unwrap().success());

    let sock = dir.path("rocsync.sock");
    let mut first = rocsync()
        .args(["trace", "--flight", "--socket"])
        .arg(&sock)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The dump has begun once its file exists.
    let traces = dir.path("state/traces");
    let start = Instant::now();
    while !std::fs::read_dir(&traces).is_ok_and(|mut d| d.next().is_some()) {
        assert!(start.elapsed() < Duration::from_secs(30), "no dump begun");
        std::thread::sleep(Duration::from_millis(5));
    }
    // While it is written: a scrape is answered, the status says it, a second dump is
    // refused.
    assert!(get(&addr, "/healthz").starts_with("HTTP/1.1 200"));
    let status = daemon_status(&sock);
    assert!(
        status["writing"][0]
            .as_str()
            .is_some_and(|n| n.starts_with("flight recorder dump")),
        "{status}"
    );
    let second = rocsync()
        .args(["trace", "--flight", "--socket"])
        .arg(&sock)
        .output()
        .unwrap();
    assert!(
        first.try_wait().unwrap().is_none(),
        "the dump was still being written: the scrape and the second request were answered meanwhile"
    );
    let refusal = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success());
    assert!(
        refusal.contains("being written for an earlier request"),
        "{refusal}"
    );

    let first = first.wait_with_output().unwrap();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let file = String::from_utf8(first.stdout).unwrap().trim().to_string();
    stop(daemon);
    let t: Trace = serde_json::from_reader(BufReader::new(std::fs::File::open(&file).unwrap()))
        .expect("valid JSON");
    let rows: Vec<&Event> = t
        .events
        .iter()
        .filter(|e| e.cat.as_deref() == Some("cuda_runtime"))
        .collect();
    // The loop's warm-up calls come first (1000), then CALLS: each in the dump, or (the
    // daemon's reader fell behind in a loaded moment) counted lost in it.
    let links = apis::expected_call_probe_links();
    assert_eq!(t.rocsync["parameters"]["call_probe_links"], links);
    let drops = &t.rocsync["drops"];
    let lost = drops["lost_ids"].as_u64().unwrap();
    assert_eq!(
        rows.len() as u64 + lost,
        u64::from(CALLS) + 1000,
        "every call of the loop, or counted lost; the dump's drops: {drops}"
    );
    assert!(
        rows.iter()
            .all(|e| e.name.as_deref() == Some("hipStreamSynchronize"))
    );
}
