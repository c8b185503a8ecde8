//! The daemon finds every kind of GPU process started after it: one linked against the
//! runtime, one that `dlopen`s it late (tracked only from the load on), and one in a
//! mount namespace of its own whose runtime exists only there (a container's). `rocsync
//! status` lists the three, and a process its filters exclude gets no probes;
//! `/metrics`, parsed by Prometheus's Python client, counts exactly the calls their three
//! logs hold. Processes found at start have their devices learnt from a temporary
//! `*GetDevice` probe, which fills no trace. Needs root, `unshare`, and
//! `ROCSYNC_HTA_PYTHON` (a Python with prometheus_client; `cargo xtask test` sets it).

use std::{collections::BTreeMap, process::Command};

use crate::common::{daemon::*, *};

fn tracked(sock: &std::path::Path) -> Vec<u32> {
    daemon_status(sock)["tracked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pid"].as_u64().unwrap() as u32)
        .collect()
}

#[test]
fn linked_late_loading_and_namespaced_processes_are_found_and_counted() {
    let name = "linked_late_loading_and_namespaced_processes_are_found_and_counted";
    let Some((dir, linked, python)) = metrics_test(name) else {
        return;
    };
    let late = dir.path("scenario_dl");
    std::fs::copy(rocsync_tests::scenario_dlopen(), &late).unwrap();
    let late_arg = format!("--include-exe={}", late.display());
    let (daemon, mut lines) = start_daemon(&dir, &linked, &[&late_arg]);
    let sock = dir.path("rocsync.sock");
    let log = |n: &str| dir.path(&format!("{n}.log"));

    let mut a = Gated::start(
        Command::new(&linked)
            .args(["gated", "basic"])
            .env("SCENARIO_LOG", log("linked")),
    );
    lines.wait_for(&format!("tracking pid {}", a.child.id()));

    // Maps no runtime until its dlopen: not tracked before, tracked from the load on.
    let mut b = Gated::start(
        Command::new(&late)
            .args(["gated", "loaded", "basic"])
            .env("SCENARIO_HIP", rocsync_tests::sim_hip())
            .env("SCENARIO_LOG", log("late")),
    );
    assert!(!tracked(&sock).contains(&b.child.id()));
    b.open();
    b.said.wait_for("loaded");
    lines.wait_for(&format!("tracking pid {}", b.child.id()));

    // A process the filters exclude: its library gets no probes (nothing traps its calls).
    let other = dir.path("excluded");
    std::fs::create_dir(&other).unwrap();
    std::fs::copy(&late, other.join("scenario_dl")).unwrap();
    std::fs::copy(rocsync_tests::sim_hip(), other.join("libamdhip64.so")).unwrap();
    let mut x = Gated::start(
        Command::new(other.join("scenario_dl"))
            .args(["gated", "loaded", "basic"])
            .env("SCENARIO_HIP", other.join("libamdhip64.so"))
            .env("SCENARIO_LOG", log("excluded")),
    );
    x.open();
    x.said.wait_for("loaded");

    // Its own mount namespace, where the runtime lies on a tmpfs the host cannot see.
    let hidden = dir.path("ns");
    std::fs::create_dir(&hidden).unwrap();
    let script = format!(
        "mount -t tmpfs rocsync-test {h} && cp {lib} {h}/libamdhip64.so && exec {late} gated loaded basic",
        h = hidden.display(),
        lib = rocsync_tests::sim_hip().display(),
        late = late.display(),
    );
    let mut c = Gated::start(
        Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", &script])
            .env("SCENARIO_HIP", hidden.join("libamdhip64.so"))
            .env("SCENARIO_LOG", log("namespaced")),
    );
    assert!(
        std::fs::read_dir(&hidden).unwrap().next().is_none(),
        "the host sees an empty directory"
    );
    c.open();
    c.said.wait_for("loaded");
    lines.wait_for(&format!("tracking pid {}", c.child.id()));

    let pids = [a.child.id(), b.child.id(), c.child.id()];
    let listed = tracked(&sock);
    assert!(pids.iter().all(|p| listed.contains(p)), "{listed:?}");
    assert!(!listed.contains(&x.child.id()));
    // Its load was announced before the namespaced one's, which the daemon has handled.
    let excluded_lib = other.join("libamdhip64.so");
    assert!(
        !lines
            .1
            .iter()
            .any(|l| l.contains("probing") && l.contains(excluded_lib.to_str().unwrap())),
        "{:#?}",
        lines.1
    );

    // Now the calls, each process's whole run counted.
    a.open();
    b.open();
    c.open();
    x.open();
    for g in [&mut a, &mut b, &mut c, &mut x] {
        assert!(g.child.wait().unwrap().success());
    }
    let m = Metrics::scrape(&python, &metrics_addr(&lines));
    stop(daemon);

    let mut expected: BTreeMap<String, usize> = BTreeMap::new();
    for n in ["linked", "late", "namespaced"] {
        let logged = probed(&rocsync_tests::read_log(&log(n)));
        assert!(!logged.is_empty(), "{n} called");
        for l in logged {
            *expected.entry(l.api).or_default() += 1;
        }
    }
    for (api, calls) in &expected {
        assert_eq!(m.sum("rocsync_sync_calls_total", api), *calls, "{api}");
    }
}

#[test]
fn devices_chosen_before_the_daemon_started_are_learnt() {
    let name = "devices_chosen_before_the_daemon_started_are_learnt";
    let Some((dir, exe, python)) = metrics_test(name) else {
        return;
    };
    // The thread chose device 1 and made a stream before the daemon existed.
    let mut target = Gated::start(
        Command::new(&exe)
            .arg("gated_device")
            .env("SCENARIO_LOG", dir.path("s.log")),
    );
    let (daemon, mut lines) = start_daemon(&dir, &exe, &[]);
    // Found by the scan at start, before the daemon says it runs.
    let found = format!("tracking pid {}", target.child.id());
    assert!(lines.1.iter().any(|l| l.contains(&found)), "{:#?}", lines.1);
    // hipGetDevice (learnt), then its syncs: on device 1.
    target.open();
    target.said.wait_for("called");
    lines.wait_for("*GetDevice probes removed");
    target.open();
    assert!(target.child.wait().unwrap().success());
    let m = Metrics::scrape(&python, &metrics_addr(&lines));
    stop(daemon);
    let calls = "rocsync_sync_calls_total";
    assert_eq!(m.on(calls, "hipStreamSynchronize", "1"), 1);
    assert_eq!(m.on(calls, "hipDeviceSynchronize", "1"), 2);
    assert_eq!(m.sum(calls, "hipDeviceSynchronize"), 2, "none on device 0");
    assert_eq!(
        m.sum(calls, "hipGetDevice"),
        0,
        "learnt from, never counted"
    );
}

/// A process found by the scan at start meets the temporary `*GetDevice` probes while the
/// flight recorder records it: a thread's calls are recorded until one succeeds, and none
/// while the probes go. Nothing is lost: the learning floods neither the ring nor the dump.
#[test]
fn the_flight_recorder_keeps_one_get_device_per_thread_while_the_daemon_learns() {
    let name = "the_flight_recorder_keeps_one_get_device_per_thread_while_the_daemon_learns";
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    let exe = own_bench_calls(&dir);
    // Two threads calling hipGetDevice(&d), which succeeds: 50 000 calls a second, for up
    // to 8 s, the runtime mapped before the daemon starts.
    let mut target = Gated::start_at(
        Command::new(&exe)
            .arg(rocsync_tests::sim_hip())
            .args(["hipGetDevice", "200000", "2", "50000"])
            .env("BENCH_GATE", "1")
            .env("BENCH_OUT_INT", "1"),
        "loaded",
    );
    let (daemon, mut lines) = start_daemon(&dir, &exe, &["--flight-recorder", "10m"]);
    let found = format!("tracking pid {}", target.child.id());
    assert!(lines.1.iter().any(|l| l.contains(&found)), "{:#?}", lines.1);
    target.open();
    lines.wait_for("*GetDevice probes removed");
    let still_calling = target.child.try_wait().unwrap().is_none();
    let file = ask_daemon(&dir.path("rocsync.sock"), &["trace", "--flight"]);
    stop(daemon);
    target.child.end();
    assert!(
        still_calling,
        "the loop ended before the probes were removed"
    );
    let t = read_json(std::path::Path::new(file.trim()));
    let calls = &t["rocsync"]["calls_per_api"]["hipGetDevice"];
    let get_device = calls["calls"].as_u64().unwrap();
    assert!(
        (1..=3).contains(&get_device),
        "one per thread at most: {calls}"
    );
    let drops = t["rocsync"]["drops"].as_object().unwrap();
    assert!(drops.values().all(|n| n == 0), "{drops:?}");
}

#[test]
fn a_process_whose_name_is_not_utf8_is_tracked_and_shown_escaped() {
    use std::os::unix::ffi::OsStrExt as _;
    let name = "a_process_whose_name_is_not_utf8_is_tracked_and_shown_escaped";
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    // Any user names their executables: `rt\xff` (not UTF-8) then a right-to-left
    // override. Its maps were unreadable as UTF-8, and it went untracked: a hang hidden.
    let mut bytes = dir.path("rt").as_os_str().as_bytes().to_vec();
    bytes.extend_from_slice(b"\xff\xe2\x80\xaeexe");
    let exe = std::path::PathBuf::from(std::ffi::OsStr::from_bytes(&bytes));
    std::fs::copy(rocsync_tests::scenario(), &exe).unwrap();
    // The filter sees the name as shown (lossily).
    let include = format!("--include-exe={}", exe.display());
    let (daemon, mut lines) = start_daemon(&dir, &dir.path("none"), &[&include]);
    let mut target = Gated::start(
        Command::new(&exe)
            .args(["gated", "basic"])
            .env("SCENARIO_HIP", rocsync_tests::sim_hip())
            .env("SCENARIO_LOG", dir.path("odd.log")),
    );
    lines.wait_for(&format!("tracking pid {}", target.child.id()));
    let line = lines.1.last().unwrap().clone();
    assert!(line.contains("rt\u{fffd}\\u{202e}exe"), "{line}");
    let status = ask_daemon(&dir.path("rocsync.sock"), &["status"]);
    assert!(
        status.contains("\\u{202e}") && !status.contains('\u{202e}'),
        "{status}"
    );
    target.open();
    assert!(target.child.wait().unwrap().success());
    stop(daemon);
}

/// A process mapping a runtime file whose probes are still being detached (its last
/// process gone) is recorded once per call: the file's new probes wait for the old
/// ones. CI saw a real runtime's trace with every call twice: another test's process of
/// the same program had just ended.
#[test]
fn a_process_mapping_a_file_whose_probes_are_being_released_is_recorded_once() {
    let name = "a_process_mapping_a_file_whose_probes_are_being_released_is_recorded_once";
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    // Copies of their own: no other test's process keeps the file probed.
    let (exe, libs) = (dir.path("scenario"), dir.path("lib"));
    std::fs::copy(rocsync_tests::scenario(), &exe).unwrap();
    std::fs::create_dir(&libs).unwrap();
    std::fs::copy(rocsync_tests::sim_hip(), libs.join("libamdhip64.so")).unwrap();
    let (daemon, mut lines) = start_daemon(&dir, &exe, &[]);
    let start = |n: &str| {
        Gated::start(
            Command::new(&exe)
                .args(["gated", "basic"])
                .env("LD_LIBRARY_PATH", &libs)
                .env("SCENARIO_LOG", dir.path(&format!("{n}.log"))),
        )
    };
    let mut first = start("first");
    first.open_when_tracked(&mut lines);
    assert!(first.child.wait().unwrap().success());
    lines.wait_for("no longer probing");

    let mut second = start("second");
    let pid = second.child.id();
    lines.wait_for(&format!("tracking pid {pid}"));
    let client = rocsync()
        .args([
            "trace",
            "--pid",
            &pid.to_string(),
            "--duration",
            "2s",
            "--socket",
        ])
        .arg(dir.path("rocsync.sock"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    lines.wait_for(&format!("recording pid(s) [{pid}]"));
    second.open();
    assert!(second.child.wait().unwrap().success());
    let out = client.wait_with_output().unwrap();
    assert!(out.status.success(), "the trace failed");
    let trace = read_json(std::path::Path::new(
        String::from_utf8(out.stdout).unwrap().trim(),
    ));
    let logged = rocsync_tests::read_log(&dir.path("second.log"));
    assert_rows_match_log(&trace, Some(pid), &logged);
    stop(daemon);
}
