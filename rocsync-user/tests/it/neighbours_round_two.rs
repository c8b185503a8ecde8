//! The neighbours' second pass (its smaller items), each as the neighbour tried it: a
//! state directory others may write is refused before anything is uploaded from it;
//! `rocsync status` escapes the names processes chose; `daemon --check` never shows an
//! endpoint's credentials; `convert` refuses times that are no date instead of writing
//! negative durations; a new process is counted from its first call; a process of HSA
//! alone is tracked; and (a newcomer's finding) `trace --flight -o` copies the dump.
//! Needs root where a daemon runs.

use std::{os::unix::fs::PermissionsExt as _, path::Path};

use crate::common::{daemon::*, *};

#[test]
fn a_state_directory_others_may_write_is_refused() {
    let name = "a_state_directory_others_may_write_is_refused";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    // The neighbour's: theirs, open to all, a link to root's file planted as a trace
    // with a marker naming a key outside the prefix.
    let state = dir.path("state");
    std::fs::create_dir_all(state.join("traces")).unwrap();
    std::os::unix::fs::symlink("/etc/shadow", state.join("traces/leak.json")).unwrap();
    std::fs::write(
        state.join("traces/leak.json.upload"),
        "../../elsewhere/shadow",
    )
    .unwrap();
    for d in [state.clone(), state.join("traces")] {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let out = daemon_command(&dir, &exe, &[]).output().unwrap();
    let stderr = stderr_of(&out);
    assert!(!out.status.success(), "started: {stderr}");
    assert!(stderr.contains("may be written by others"), "{stderr}");
    // `--check` says so too, before a start would.
    let out = daemon_command(&dir, &exe, &["--check"]).output().unwrap();
    let stderr = stderr_of(&out);
    assert!(!out.status.success(), "checked: {stderr}");
    assert!(stderr.contains("may be written by others"), "{stderr}");
    // Owned by someone else, even closed: refused too.
    for d in [state.clone(), state.join("traces")] {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let nobody = |p: &Path| std::os::unix::fs::chown(p, Some(65534), Some(65534)).unwrap();
    nobody(&state);
    let out = daemon_command(&dir, &exe, &[]).output().unwrap();
    let stderr = stderr_of(&out);
    assert!(!out.status.success(), "started: {stderr}");
    assert!(stderr.contains("belongs to uid 65534"), "{stderr}");
    // Its own, but under a folder the neighbour may write (who could move it away).
    let open = dir.path("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let state = open.join("state").display().to_string();
    let out = rocsync()
        .args([
            "daemon",
            "--metrics-addr",
            "127.0.0.1:0",
            "--state-dir",
            &state,
        ])
        .arg("--socket")
        .arg(dir.path("other.sock"))
        .arg("--lock")
        .arg(dir.path("other.lock"))
        .arg("--include-exe")
        .arg(&exe)
        .output()
        .unwrap();
    let stderr = stderr_of(&out);
    assert!(!out.status.success(), "started: {stderr}");
    assert!(stderr.contains("above the state directory"), "{stderr}");
}

#[test]
fn status_escapes_the_names_processes_chose() {
    let name = "status_escapes_the_names_processes_chose";
    let Some((dir, scenario)) = daemon_test(name) else {
        return;
    };
    // An executable named to forge a line of status and colour the terminal.
    let exe = dir.path("x\ntracked processes: 0\u{1b}[31mred");
    std::fs::copy(&scenario, &exe).unwrap();
    let (daemon, mut lines) = start_daemon(&dir, &exe, &[]);
    // Long enough to be running when asked on a loaded machine (a process that has
    // exited has no executable to name).
    let mut target = tracked_loop(&dir, &exe, &mut lines, 30_000);
    let status = ask_daemon(&dir.path("rocsync.sock"), &["status"]);
    assert!(!status.contains('\u{1b}'), "{status:?}");
    let forged = status
        .lines()
        .filter(|l| l.starts_with("tracked processes"))
        .count();
    assert_eq!(forged, 1, "{status}");
    assert!(
        status.contains("x\\ntracked processes: 0\\u{1b}[31mred"),
        "{status}"
    );
    target.kill().unwrap();
    let _ = target.wait();
    stop(daemon);
}

#[test]
fn check_never_shows_an_endpoints_credentials() {
    let out = run_ok(rocsync().args([
        "daemon",
        "--check",
        "--upload",
        "s3://bucket/p",
        "--upload-endpoint",
        "http://KEY:SECRET@127.0.0.1:9000",
    ]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("SECRET") && !text.contains("KEY"), "{text}");
    assert!(text.contains("http://REDACTED@127.0.0.1:9000"), "{text}");
    // An endpoint that is no HTTP(S) URL is refused by --check, not at the first upload,
    // its credentials still hidden.
    for bad in ["ftp://KEY:SECRET@127.0.0.1:21", "http://", "127.0.0.1:9000"] {
        let out = rocsync()
            .args(["daemon", "--check", "--upload", "s3://bucket/p"])
            .args(["--upload-endpoint", bad])
            .output()
            .unwrap();
        let said = stderr_of(&out);
        assert!(!out.status.success(), "{bad} accepted");
        assert!(said.contains("expected http://HOST"), "{bad}: {said}");
        assert!(!said.contains("SECRET"), "{said}");
    }
}

#[test]
fn convert_refuses_times_that_are_no_date() {
    let dir = TempDir::new();
    let raw = dir.path("c.jsonl");
    let min = i64::MIN;
    let near_max = u64::MAX - 10;
    std::fs::write(
        &raw,
        format!(
            "{{\"rocsync_raw\":{{\"version\":\"0.1.0\",\"clock_offset_ns\":{min},\"command\":[\"app\"]}}}}\n\
             {{\"api\":\"hipDeviceSynchronize\",\"pid\":9,\"tid\":9,\"correlation\":1,\"enter_ns\":{near_max},\"exit_ns\":{},\"ret\":0,\"args\":{{}}}}\n",
            near_max + 5
        ),
    )
    .unwrap();
    let out = rocsync()
        .arg("convert")
        .arg(&raw)
        .arg("-o")
        .arg(dir.path("t.json"))
        .output()
        .unwrap();
    let stderr = stderr_of(&out);
    assert!(!out.status.success(), "converted: {stderr}");
    assert!(
        stderr.contains("line 2") && stderr.contains("no date"),
        "{stderr}"
    );
    assert!(!dir.path("t.json").exists());
}

#[test]
fn a_new_process_is_counted_from_its_first_call() {
    let name = "a_new_process_is_counted_from_its_first_call";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let (daemon, mut lines) = start_daemon(&dir, &exe, &[]);
    let addr = metrics_addr(&lines);
    // A process keeps the runtime probed (one record, then an 8 s block)...
    let mut held = Gated::start(
        std::process::Command::new(&exe)
            .args(["gated", "stall", "1", "8000000"])
            .env("SCENARIO_LOG", dir.path("held.log")),
    );
    held.open_when_tracked(&mut lines);
    wait_for_calls(&addr, "hipStreamWaitEvent", 0, 1);
    // ...and a new one calls at once, before the daemon has read its library load: its
    // first calls trap, counted as early, and become its counts once it is tracked.
    let log = dir.path("new.log");
    let new = std::process::Command::new(&exe)
        .args(["loop", "300"])
        .env("SCENARIO_LOG", &log)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(new.success());
    assert!(held.child.wait().unwrap().success());
    let logged = |file: &str| {
        rocsync_tests::read_log(&dir.path(file))
            .iter()
            .filter(|c| c.api == "hipEventRecord")
            .count() as u64
    };
    let made = logged("held.log") + logged("new.log");
    assert!(made > 100, "{made}");
    until(10, "the calls counted", || {
        calls_counted(&addr, "hipEventRecord") >= made
    });
    assert_eq!(calls_counted(&addr, "hipEventRecord"), made);
    stop(daemon);
}

#[test]
fn a_process_of_hsa_alone_is_tracked_and_its_packets_counted() {
    let name = "a_process_of_hsa_alone_is_tracked_and_its_packets_counted";
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    // A program that maps the HSA runtime and nothing of HIP or CUDA (as OpenCL on ROCm).
    let exe = dir.path("hsa_scenario");
    std::fs::copy(rocsync_tests::hsa_scenario(), &exe).unwrap();
    let (daemon, mut lines) = start_daemon(&dir, &exe, &[]);
    let addr = metrics_addr(&lines);
    let log = dir.path("packets.log");
    let mut target = Gated::start(
        std::process::Command::new(&exe)
            .args(["12", "64"])
            .env("SCENARIO_GATE", "0")
            .env("SCENARIO_LOG", &log),
    );
    target.open_when_tracked(&mut lines);
    assert!(target.child.wait().unwrap().success());
    let published = std::fs::read_to_string(&log).unwrap().lines().count();
    assert!(published >= 36, "{published}");
    let counted = || {
        get(&addr, "/metrics")
            .lines()
            .filter(|l| l.starts_with("rocsync_aql_packets_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as usize
    };
    until(10, "its packets counted", || counted() >= published);
    assert_eq!(counted(), published);
    // A pid that does not exist is said to be none, not "not tracked".
    let out = rocsync()
        .args(["trace", "-p", "999999999", "--socket"])
        .arg(dir.path("rocsync.sock"))
        .output()
        .unwrap();
    let err = stderr_of(&out);
    assert!(
        !out.status.success() && err.contains("pid 999999999 does not exist"),
        "{err}"
    );
    stop(daemon);
}

#[test]
fn a_flight_dump_is_copied_where_o_says() {
    let name = "a_flight_dump_is_copied_where_o_says";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let (daemon, mut lines) = start_daemon(&dir, &exe, &["--flight-recorder", "10s"]);
    let mut target = tracked_loop(&dir, &exe, &mut lines, 3000);
    let sock = dir.path("rocsync.sock");
    wait_for_calls(&metrics_addr(&lines), "hipEventRecord", 0, 20);
    for out in ["dump.json", "dump.json.gz"] {
        let file = dir.path(out);
        let said = ask_daemon(&sock, &["trace", "--flight", "-o", file.to_str().unwrap()]);
        assert_eq!(said.trim(), file.display().to_string());
        let mut text = String::new();
        let raw = std::fs::File::open(&file).unwrap();
        let mut reader: Box<dyn std::io::Read> = match out.ends_with(".gz") {
            true => Box::new(flate2::read::GzDecoder::new(raw)),
            false => Box::new(raw),
        };
        std::io::Read::read_to_string(&mut reader, &mut text).unwrap();
        let t: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(t["rocsync"]["parameters"]["mode"], "daemon flight recorder");
        assert!(t["rocsync"]["calls"].as_u64().unwrap() > 0, "{out}");
    }
    target.kill().unwrap();
    let _ = target.wait();
    stop(daemon);
}
