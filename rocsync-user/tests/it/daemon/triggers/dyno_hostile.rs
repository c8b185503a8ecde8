//! What any local user can send the daemon's dynolog port (it has no authentication):
//! requests waiting and pid lists are bounded, a log file names no other request's
//! trace and replaces no file, one at a link or FIFO is answered with the failure,
//! control characters are refused and never reach the log raw, and dyno's traces are
//! under retention. The unprivileged peer is `nobody` (`setpriv`). Needs root.

use std::{
    io::{Read as _, Write as _},
    os::unix::fs::MetadataExt as _,
    path::Path,
    process::Command,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use serde_json::{Value, json};

use crate::common::{daemon::*, *};

/// A daemon answering dyno, and a process it tracks calling the runtime for `ms`.
struct Dyno {
    dir: TempDir,
    daemon: Daemon,
    lines: Lines,
    addr: String,
    target: Reaped,
    pid: u32,
}

fn dyno_daemon(name: &str, ms: u32, extra: &[&str]) -> Option<Dyno> {
    let (dir, exe) = daemon_test(name)?;
    let mut args = vec!["--dynolog-addr", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let (daemon, mut lines) = start_daemon(&dir, &exe, &args);
    let addr = lines
        .1
        .iter()
        .find_map(|l| l.strip_prefix("rocsync daemon: dynolog requests on "))
        .unwrap()
        .to_string();
    let target = tracked_loop(&dir, &exe, &mut lines, ms);
    let pid = target.id();
    // The daemon makes it; made here too, the tests fail for their own reason on a
    // daemon that does not.
    std::fs::create_dir_all(dir.path("state/dyno")).unwrap();
    Some(Dyno {
        dir,
        daemon,
        lines,
        addr,
        target,
        pid,
    })
}

/// A `setKinetOnDemandRequest` for `log`, `pids`, `config` lines after the log file's.
fn request(log: &str, pids: &[u32], config: &str) -> String {
    json!({
        "fn": "setKinetOnDemandRequest",
        "config": format!("ACTIVITIES_LOG_FILE={log}\n{config}"),
        "job_id": 0, "pids": pids, "process_limit": 3,
    })
    .to_string()
}

/// One dynolog exchange sent by `nobody` (bash's `/dev/tcp`, as an unprivileged local
/// user would); the answer.
fn as_nobody(addr: &str, request: &str) -> Value {
    let (host, port) = addr.rsplit_once(':').unwrap();
    let len: String = (request.len() as i32)
        .to_ne_bytes()
        .iter()
        .map(|b| format!("\\x{b:02x}"))
        .collect();
    let script = format!(
        "exec 3<>/dev/tcp/{host}/{port} && printf '{len}' >&3 && printf '%s' \"$1\" >&3 && cat <&3"
    );
    let out = run_ok(
        Command::new("setpriv")
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
            .args(["bash", "-c", &script, "dyno"])
            .arg(request),
    );
    serde_json::from_slice(&out.stdout[4..]).unwrap()
}

fn error(answer: &Value) -> &str {
    answer["error"].as_str().unwrap_or_default()
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Polls `done` every 20 ms until it holds, or fails after 20 s saying `what`.
fn poll(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn dyno_requests_of_a_peer_are_bounded_and_refused_clearly() {
    let Some(mut d) = dyno_daemon(
        "dyno_requests_of_a_peer_are_bounded_and_refused_clearly",
        20_000,
        &[],
    ) else {
        return;
    };
    let log = |n: usize| {
        d.dir
            .path(&format!("state/dyno/w{n}.json"))
            .display()
            .to_string()
    };
    let later = format!("PROFILE_START_TIME={}", unix_ms() + 600_000);
    // A pid list past the bound is refused whole.
    let long = vec![d.pid; 1025];
    let answer = as_nobody(&d.addr, &request(&log(0), &long, &later));
    assert!(error(&answer).contains("at most 1024"), "{answer}");
    // Eight waiting requests of nobody's, each naming the process 1024 times …
    let many = vec![d.pid; 1024];
    for n in 1..=8 {
        let answer = as_nobody(&d.addr, &request(&log(n), &many, &later));
        assert_eq!(answer["processesMatched"], json!([d.pid]), "{answer}");
    }
    // … and a ninth is refused, saying why; root may still ask.
    let answer = as_nobody(&d.addr, &request(&log(9), &many, &later));
    assert_eq!(answer["processesMatched"], json!([]), "{answer}");
    assert!(
        error(&answer).contains("uid 65534 has 8 dyno traces waiting for their start"),
        "{answer}"
    );
    let answer = dyno_exchange(&d.addr, &request(&log(10), &[d.pid], &later));
    assert_eq!(answer["processesMatched"], json!([d.pid]), "{answer}");
    let status = daemon_status(&d.dir.path("rocsync.sock"));
    assert_eq!(status["scheduled"].as_array().unwrap().len(), 9, "{status}");
    d.lines.wait_for("from uid 0 starts in");
    // No line repeats a list: each names the process once.
    let scheduled: Vec<&String> = d
        .lines
        .1
        .iter()
        .filter(|l| l.contains("starts in"))
        .collect();
    assert_eq!(scheduled.len(), 9, "{scheduled:#?}");
    for l in &d.lines.1 {
        assert!(l.len() < 500, "a long log line: {l}");
    }
    d.target.end();
    stop(d.daemon);
}

#[test]
fn a_dyno_request_never_replaces_a_file_nor_names_another_trace() {
    let Some(mut d) = dyno_daemon(
        "a_dyno_request_never_replaces_a_file_nor_names_another_trace",
        20_000,
        &[],
    ) else {
        return;
    };
    let sock = d.dir.path("rocsync.sock");
    let pid = d.pid.to_string();
    let written = ask_daemon(
        &sock,
        &[
            "trace",
            "--pid",
            &pid,
            "--duration",
            "200ms",
            "--name",
            "rootreq",
        ],
    );
    let root_trace = Path::new(written.trim());
    let before = (
        std::fs::read(root_trace).unwrap(),
        std::fs::metadata(root_trace).unwrap().ino(),
    );
    // nobody names root's trace, or its directory: refused, the trace untouched.
    for named in [
        root_trace.to_path_buf(),
        root_trace.with_file_name("rootreq.json"),
    ] {
        let answer = as_nobody(&d.addr, &request(named.to_str().unwrap(), &[d.pid], ""));
        assert!(error(&answer).contains("outside"), "{answer}");
    }
    // A dyno trace there before (root's, say) is never replaced.
    let kept = d.dir.path(&format!("state/dyno/kept_{pid}.json"));
    std::fs::write(&kept, "root's").unwrap();
    let ino = std::fs::metadata(&kept).unwrap().ino();
    let log = d.dir.path("state/dyno/kept.json").display().to_string();
    let answer = as_nobody(&d.addr, &request(&log, &[d.pid], ""));
    assert_eq!(answer["processesMatched"], json!([]), "{answer}");
    assert!(error(&answer).contains("exists (a file)"), "{answer}");
    // Nor may a second request take the name of one still recording.
    let log = d.dir.path("state/dyno/once.json").display().to_string();
    let first = dyno_exchange(
        &d.addr,
        &request(&log, &[d.pid], "ACTIVITIES_DURATION_MSECS=2000"),
    );
    assert_eq!(first["processesMatched"], json!([d.pid]), "{first}");
    let second = as_nobody(&d.addr, &request(&log, &[d.pid], ""));
    assert!(error(&second).contains("earlier request"), "{second}");
    d.lines.wait_for("dyno request from uid 65534 refused");
    let once = d.dir.path(&format!("state/dyno/once_{pid}.json"));
    poll("the first request's trace is written", || once.exists());
    assert_eq!(std::fs::read(&kept).unwrap(), b"root's");
    assert_eq!(std::fs::metadata(&kept).unwrap().ino(), ino);
    let after = (
        std::fs::read(root_trace).unwrap(),
        std::fs::metadata(root_trace).unwrap().ino(),
    );
    assert!(after == before, "root's trace changed");
    d.target.end();
    stop(d.daemon);
}

#[test]
fn a_dyno_trace_at_a_link_or_fifo_is_answered_with_the_failure() {
    let Some(mut d) = dyno_daemon(
        "a_dyno_trace_at_a_link_or_fifo_is_answered_with_the_failure",
        20_000,
        &[],
    ) else {
        return;
    };
    let victim = d.dir.path("victim");
    std::fs::write(&victim, "keep").unwrap();
    let at = |stem: &str| d.dir.path(&format!("state/dyno/{stem}_{}.json", d.pid));
    std::os::unix::fs::symlink(&victim, at("link")).unwrap();
    let fifo = std::ffi::CString::new(at("fifo").to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid C string.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    for (stem, kind) in [("link", "symbolic link"), ("fifo", "FIFO")] {
        let log = d
            .dir
            .path(&format!("state/dyno/{stem}.json"))
            .display()
            .to_string();
        let answer = dyno_exchange(
            &d.addr,
            &request(&log, &[d.pid], "ACTIVITIES_DURATION_MSECS=100"),
        );
        assert_eq!(answer["processesMatched"], json!([]), "{answer}");
        assert_eq!(answer["activityProfilersTriggered"], json!([]), "{answer}");
        assert!(error(&answer).contains(kind), "{answer}");
        d.lines.wait_for(&format!("{stem}_{}.json exists", d.pid));
        assert!(
            d.lines
                .1
                .last()
                .unwrap()
                .contains("dyno request from uid 0 refused")
        );
    }
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    d.target.end();
    stop(d.daemon);
}

#[test]
fn control_characters_are_refused_and_never_logged_raw() {
    let Some(mut d) = dyno_daemon(
        "control_characters_are_refused_and_never_logged_raw",
        20_000,
        &[],
    ) else {
        return;
    };
    let log = d
        .dir
        .path("state/dyno/a\u{1b}[31mred\rb.json")
        .display()
        .to_string();
    let answer = as_nobody(&d.addr, &request(&log, &[d.pid], ""));
    assert!(error(&answer).contains("control characters"), "{answer}");
    d.lines.wait_for("dyno request from uid 65534 refused");
    // On the socket too: a request's name is echoed in serde's error.
    let mut conn = std::os::unix::net::UnixStream::connect(d.dir.path("rocsync.sock")).unwrap();
    conn.write_all(b"{\"\\u001b[2J\\rforged\": {}}\n").unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).unwrap();
    assert!(reply.contains("unknown variant"), "{reply}");
    d.lines.wait_for("request refused");
    d.target.end();
    stop(d.daemon);
    let all = d.lines.all();
    let raw: Vec<&String> = all
        .iter()
        .filter(|l| l.contains(['\u{1b}', '\r']))
        .collect();
    assert!(raw.is_empty(), "control characters in the log: {raw:?}");
    assert!(
        all.iter().any(|l| l.contains("\\u{1b}[2J\\rforged")),
        "{all:#?}"
    );
}

#[test]
fn out_of_range_durations_are_refused() {
    let Some(mut d) = dyno_daemon("out_of_range_durations_are_refused", 20_000, &[]) else {
        return;
    };
    let sock = d.dir.path("rocsync.sock");
    for ms in ["-1", "0", "3600001", "1e3", "18446744073709551616", "60001"] {
        let dyno_ms = format!("ACTIVITIES_DURATION_MSECS={ms}");
        let log = d.dir.path("state/dyno/d.json").display().to_string();
        let answer = as_nobody(&d.addr, &request(&log, &[d.pid], &dyno_ms));
        assert!(error(&answer).contains("from 1 to 60000"), "{ms}: {answer}");
        // The socket's bound is an hour; dyno's port (no authentication) a minute.
        if ms == "60001" {
            continue;
        }
        let mut conn = std::os::unix::net::UnixStream::connect(&sock).unwrap();
        let asked = format!(
            "{{\"trace\": {{\"pids\": [{}], \"duration_ms\": {ms}}}}}\n",
            d.pid
        );
        conn.write_all(asked.as_bytes()).unwrap();
        let mut reply = String::new();
        conn.read_to_string(&mut reply).unwrap();
        let reply: Value = serde_json::from_str(&reply).unwrap();
        assert!(reply["error"].is_string(), "duration_ms {ms}: {reply}");
    }
    let status = daemon_status(&sock);
    assert_eq!(status["traces"], json!([]), "{status}");
    d.target.end();
    stop(d.daemon);
}

#[test]
fn dyno_traces_are_under_retention() {
    let Some(mut d) = dyno_daemon(
        "dyno_traces_are_under_retention",
        20_000,
        &["--retention-max-bytes", "1"],
    ) else {
        return;
    };
    let pid = d.pid;
    let traced = |stem: &str| d.dir.path(&format!("state/dyno/{stem}_{pid}.json"));
    for stem in ["first", "second"] {
        let log = d
            .dir
            .path(&format!("state/dyno/{stem}.json"))
            .display()
            .to_string();
        let answer = dyno_exchange(
            &d.addr,
            &request(&log, &[pid], "ACTIVITIES_DURATION_MSECS=100"),
        );
        assert_eq!(answer["processesMatched"], json!([pid]), "{answer}");
        poll(&format!("{stem} written"), || traced(stem).exists());
    }
    // The newest kept, the one before removed (a 1-byte budget).
    poll("the first dyno trace removed", || !traced("first").exists());
    d.lines.wait_for("retention removed");
    assert!(traced("second").exists());
    d.target.end();
    stop(d.daemon);
}

/// A flood of bad requests is not a flood in root's log: each peer gets a burst of lines
/// per window, the rest said as one count once the window has passed.
#[test]
fn a_peers_refusals_are_logged_in_a_bounded_burst_and_counted() {
    let Some(mut d) = dyno_daemon(
        "a_peers_refusals_are_logged_in_a_bounded_burst_and_counted",
        20_000,
        &[],
    ) else {
        return;
    };
    let log = d.dir.path("elsewhere.json").display().to_string();
    for _ in 0..50 {
        let answer = dyno_exchange(&d.addr, &request(&log, &[d.pid], ""));
        assert!(error(&answer).contains("outside"), "{answer}");
    }
    d.lines
        .wait_for_all(&["30 more dyno refusals from uid 0 in 10s not shown"]);
    let said = d
        .lines
        .1
        .iter()
        .filter(|l| l.contains("dyno request from uid 0 refused"))
        .count();
    assert_eq!(said, 20, "{:#?}", d.lines.1);
    d.target.end();
    stop(d.daemon);
}

/// dyno's traces are guests: a neighbour's trace of every agent, asked again and
/// again, never refuses root's `rocsync trace` (it did 24 times in 25 over ten
/// minutes), and the neighbour has one recording at a time — a second is answered busy.
#[test]
fn a_neighbours_dyno_traces_refuse_no_one_and_one_records_at_a_time() {
    let Some(mut d) = dyno_daemon(
        "a_neighbours_dyno_traces_refuse_no_one_and_one_records_at_a_time",
        20_000,
        &[],
    ) else {
        return;
    };
    let log = d.dir.path("state/dyno/all.json").display().to_string();
    let first = as_nobody(
        &d.addr,
        &request(&log, &[0], "ACTIVITIES_DURATION_MSECS=4000"),
    );
    assert_eq!(first["processesMatched"], json!([d.pid]), "{first}");
    d.lines
        .wait_for_all(&[&format!("recording pid(s) [{}]", d.pid)]);
    // Root's own trace of the process, on every agent, meanwhile.
    let sock = d.dir.path("rocsync.sock");
    let pid = d.pid.to_string();
    let out = ask_daemon(&sock, &["trace", "-p", &pid, "--duration", "300ms"]);
    assert_eq!(out.lines().count(), 1, "{out}");
    // The neighbour's second, while its first records: busy, said as dyno says it.
    let log2 = d.dir.path("state/dyno/again.json").display().to_string();
    let second = as_nobody(
        &d.addr,
        &request(&log2, &[0], "ACTIVITIES_DURATION_MSECS=1000"),
    );
    assert_eq!(second["activityProfilersBusy"], 1, "{second}");
    assert_eq!(second["processesMatched"], json!([]), "{second}");
    let first_file = d.dir.path(&format!("state/dyno/all_{}.json", d.pid));
    poll("the first dyno trace is written", || first_file.exists());
    // Written, it holds no one's turn: the next is taken.
    let third = as_nobody(
        &d.addr,
        &request(&log2, &[0], "ACTIVITIES_DURATION_MSECS=100"),
    );
    assert_eq!(third["processesMatched"], json!([d.pid]), "{third}");
    d.target.end();
    stop(d.daemon);
}
