//! The budget's duty cycle: a process whose records and waits alone cost more than the
//! budget has their probes cycled (the log says so, `/metrics` shows the duty, the files
//! and the estimated counts); its synchronizations are counted exactly all along and its
//! records' and waits' counts, estimated while off, come close to what its log holds; a
//! trace asked meanwhile has every record its waits need; the cycle ends with the
//! process. Needs root.

use std::process::Stdio;

use rocsync_tests::read_log;

use crate::common::{daemon::*, *};

/// `api`'s calls in `/metrics` (over its devices).
fn calls(addr: &str, family: &str, api: &str) -> f64 {
    metric(addr, &format!("{family}{{api=\"{api}\""))
}

#[test]
fn records_and_waits_over_the_budget_are_duty_cycled_and_their_counts_estimated() {
    let name = "records_and_waits_over_the_budget_are_duty_cycled_and_their_counts_estimated";
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    let exe = own_copy(&dir);
    let (daemon, mut lines) =
        start_daemon(&dir, &exe, &["--budget", "1%", "--budget-mode", "cycle"]);
    let addr = metrics_addr(&lines);
    assert_eq!(
        metric(&addr, "rocsync_probes_duty_cycle"),
        1.0,
        "no cycle yet"
    );
    // Record, wait and synchronize between 50 µs steps of work on the host: the probes of
    // the first two alone cost the loop about 2.5 % of its CPU.
    let log = dir.path("loop.log");
    let (mut target, _) = until_duty_cycled(&exe, &["dense", "8000", "50"], &log, &mut lines);
    let pid = target.child.id();
    // Off now (its first period was on, measuring what the estimate starts from).
    until(10, "no period off", || {
        metric(&addr, "rocsync_probes_duty_cycle") < 1.0
            && calls(
                &addr,
                "rocsync_sync_calls_estimated_total",
                "hipEventRecord",
            ) > 0.0
    });
    assert_eq!(metric(&addr, "rocsync_probes_cycled_files"), 1.0);

    // A trace asked meanwhile: the probes are on for it, so every wait has its record.
    let out = rocsync()
        .args([
            "trace",
            "--pid",
            &pid.to_string(),
            "--duration",
            "1s",
            "--socket",
        ])
        .arg(dir.path("rocsync.sock"))
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    assert_ok(&out);
    let trace = read_json(std::path::Path::new(
        String::from_utf8(out.stdout).unwrap().trim(),
    ));
    let waits: Vec<&serde_json::Value> = (trace["traceEvents"].as_array().unwrap().iter())
        .filter(|e| e["name"] == "hipStreamWaitEvent" && e["cat"] == "cuda_runtime")
        .collect();
    assert!(waits.len() > 100, "{} waits in a second", waits.len());
    let unresolved: Vec<_> = (waits.iter())
        .filter_map(|w| w["args"].get("wait_on_unknown_reason"))
        .collect();
    // The first may wait on a record made just before the trace began.
    assert!(unresolved.len() <= 1, "{unresolved:?}");

    assert!(target.child.wait().unwrap().success());
    lines.wait_for("(a cycled process exited)");
    assert_eq!(metric(&addr, "rocsync_probes_duty_cycle"), 1.0);
    let logged = read_log(&dir.path("loop.log"));
    let made = |api: &str| logged.iter().filter(|l| l.api == api).count() as f64;
    // Synchronizes: exact, never cycled; nothing of theirs estimated.
    let family = "rocsync_sync_calls_total";
    let syncs = made("hipStreamSynchronize");
    assert_eq!(calls(&addr, family, "hipStreamSynchronize"), syncs);
    assert_eq!(
        calls(
            &addr,
            "rocsync_sync_calls_estimated_total",
            "hipStreamSynchronize"
        ),
        0.0
    );
    // Records and waits: mostly estimated, and close to what was made.
    for api in ["hipEventRecord", "hipStreamWaitEvent"] {
        let (shown, made) = (calls(&addr, family, api), made(api));
        let estimated = calls(&addr, "rocsync_sync_calls_estimated_total", api);
        eprintln!("{api}: {shown} shown ({estimated} estimated), {made} made");
        assert!(
            estimated > made / 8.0,
            "{api}: {estimated} of {made} estimated"
        );
        assert!(
            (shown / made - 1.0).abs() < 0.25,
            "{api}: {shown} shown, {made} made"
        );
    }
    stop(daemon);
}

/// Probes are file-wide: a file that also serves another user's process is never cycled
/// (one user's loop would make the other's counts estimates and blind their hangs'
/// chains): the loop is left over the budget, said and counted, as shed-only leaves it.
#[test]
fn a_file_another_users_process_maps_is_never_cycled() {
    use std::os::unix::{fs::PermissionsExt, process::CommandExt};
    let name = "a_file_another_users_process_maps_is_never_cycled";
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    // The program where the other user can run it, a folder of theirs for its log.
    std::fs::set_permissions(dir.path(""), std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = own_copy(&dir);
    let theirs = dir.path("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    let (daemon, mut lines) =
        start_daemon(&dir, &exe, &["--budget", "1%", "--budget-mode", "cycle"]);
    let addr = metrics_addr(&lines);
    // Theirs: held at its gate, the same runtime file mapped.
    let mut other = Gated::start(
        std::process::Command::new(&exe)
            .args(["gated", "loop", "1000"])
            .env("SCENARIO_LOG", theirs.join("loop.log"))
            .uid(65534)
            .gid(65534),
    );
    lines.wait_for(&format!("tracking pid {}", other.child.id()));
    let mut dense = Gated::start(
        std::process::Command::new(&exe)
            .args(["gated", "dense", "4000", "50"])
            .env("SCENARIO_LOG", dir.path("dense.log")),
    );
    let pid = dense.child.id();
    dense.open_when_tracked(&mut lines);
    lines.wait_for(&format!("pid {pid}'s records and waits alone cost "));
    let said = lines.1.last().unwrap().clone();
    assert!(said.contains("another user's processes too"), "{said}");
    // Counted under its reason alone.
    assert_eq!(metric(&addr, "rocsync_over_budget_processes"), 1.0);
    let over = r#"rocsync_over_budget_processes{reason="shared_series"}"#;
    assert_eq!(metric(&addr, over), 1.0);
    assert_eq!(metric(&addr, "rocsync_probes_duty_cycle"), 1.0);
    assert_eq!(metric(&addr, "rocsync_probes_cycled_files"), 0.0);
    assert!(dense.child.wait().unwrap().success());
    // Every record and wait counted, none estimated.
    let logged = read_log(&dir.path("dense.log"));
    let made = logged.iter().filter(|l| l.api == "hipEventRecord").count() as f64;
    assert_eq!(
        calls(&addr, "rocsync_sync_calls_total", "hipEventRecord"),
        made
    );
    assert_eq!(metric(&addr, "rocsync_sync_calls_estimated_total"), 0.0);
    other.child.end();
    stop(daemon);
}

/// A budget its synchronizes alone are over (they stay probed): the cycle runs at its
/// slowest, and the process is counted over the budget under `synchronizes` all along,
/// through the periods off too (it was counted only in the one second in 30 that
/// measured it, and said again each time).
#[test]
fn a_process_whose_synchronizes_alone_are_over_the_budget_stays_counted_so() {
    let name = "a_process_whose_synchronizes_alone_are_over_the_budget_stays_counted_so";
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    let exe = own_copy(&dir);
    let (daemon, mut lines) =
        start_daemon(&dir, &exe, &["--budget", "0.6%", "--budget-mode", "cycle"]);
    let addr = metrics_addr(&lines);
    let mut target = Gated::start(
        std::process::Command::new(&exe)
            .args(["gated", "dense", "30000", "50"])
            .env("SCENARIO_LOG", dir.path("loop.log")),
    );
    let pid = target.child.id();
    target.open_when_tracked(&mut lines);
    lines.wait_for(&format!("pid {pid}'s records and waits alone cost "));
    lines.wait_for("what stays probed (synchronizes) costs more on its own");
    let over = r#"rocsync_over_budget_processes{reason="synchronizes"}"#;
    // Sampled through the periods off that follow (29 s of every 30).
    for _ in 0..20 {
        assert_eq!(metric(&addr, over), 1.0);
        assert_eq!(metric(&addr, "rocsync_over_budget_processes"), 1.0);
        std::thread::sleep(std::time::Duration::from_millis(150));
    }
    let said = lines
        .1
        .iter()
        .filter(|l| l.contains("costs more on its own"))
        .count();
    assert_eq!(said, 1, "said once");
    target.child.end();
    stop(daemon);
}
