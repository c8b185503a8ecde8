//! What a terminal's job control does to rocsync — Ctrl-Z and `fg`, Ctrl-C, a hangup,
//! `kill -9 %1` — never leaves a target held at a library load: rocsync suspended holds
//! none, and the watchdog outlives rocsync's job. Needs root (eBPF).

use std::{
    os::unix::process::CommandExt as _,
    process::Child,
    time::{Duration, Instant},
};

use crate::common::*;

/// rocsync's children (from every thread's /proc children list).
fn children(pid: u32) -> Vec<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// `rocsync attach --wait` on the looping target, in a process group of its own (a
/// terminal's job), once it answers the target's stops; with what it says on stderr.
fn attach_as_a_job(target: &Target) -> (Child, Lines) {
    attach_as_a_job_with(attach_command(target.pid()))
}

fn attach_as_a_job_with(mut cmd: std::process::Command) -> (Child, Lines) {
    let mut tracer = spawn_piped(cmd.process_group(0));
    let mut said = Lines::of(tracer.stderr.take().expect("piped stderr"));
    said.wait_for("waiting for process");
    (tracer, said)
}

/// What job control does to rocsync's job — Ctrl-C, Ctrl-\, Ctrl-Z, a hangup, then
/// `kill -9 %1` — and a service manager's SIGTERM to every process of its cgroup must not
/// end the watchdog: it continues what rocsync left stopped.
#[test]
fn the_watchdog_outlives_what_is_sent_to_the_job() {
    if !can_trace("the_watchdog_outlives_what_is_sent_to_the_job") {
        return;
    }
    let target = Target::start();
    // The watchdog is the path of kernels without the release at rocsync's exit
    // (`probes::release`): taken here on any kernel.
    let mut cmd = attach_command(target.pid());
    cmd.env("ROCSYNC_WATCHDOG", "1");
    let (mut tracer, _said) = attach_as_a_job_with(cmd);
    let rocsync = tracer.id() as i32;
    let watchdog = children(tracer.id());
    assert_eq!(watchdog.len(), 1, "one watchdog: {watchdog:?}");
    // Frozen, rocsync continues nothing: the target's next library load leaves it stopped.
    // SAFETY: signals the rocsync this test started.
    unsafe { libc::kill(rocsync, libc::SIGSTOP) };
    wait_until_stopped(target.pid(), "the target");
    for sig in ENDING.into_iter().chain([libc::SIGTSTP]) {
        // SAFETY: signals the job this test started, and rocsync's watchdog.
        unsafe {
            libc::kill(-rocsync, sig);
            libc::kill(watchdog[0] as i32, sig);
        }
    }
    // Each signal taken by the watchdog (none left pending) before the job is killed.
    wait_until_no_signal_pending(watchdog[0]);
    // SAFETY: as above: the job, as `kill -9 %1` does.
    unsafe { libc::kill(-rocsync, libc::SIGKILL) };
    tracer.wait().unwrap();
    assert_continued(target.pid(), "pid left stopped: the watchdog was ended");
}

/// Ctrl-Z suspends rocsync; a target in another job goes on loading libraries meanwhile
/// and is never held (it would wait for rocsync until `fg`). Continued, rocsync holds it
/// again, and says and records that it was suspended.
#[test]
fn a_suspended_rocsync_holds_no_target() {
    if !can_trace("a_suspended_rocsync_holds_no_target") {
        return;
    }
    let target = Target::start();
    let (mut tracer, mut said) = attach_as_a_job(&target);
    let rocsync = tracer.id() as i32;
    // SAFETY: signals the job this test started, as Ctrl-Z does.
    unsafe { libc::kill(-rocsync, libc::SIGTSTP) };
    wait_until_stopped(tracer.id(), "rocsync");
    // Hundreds of loads a second, none held.
    assert_never_stopped(target.pid(), Duration::from_millis(500));
    assert_eq!(state(tracer.id()), 'T', "still suspended");
    // SAFETY: as above, as `fg` does.
    unsafe { libc::kill(-rocsync, libc::SIGCONT) };
    // Held again once rocsync says so (it says it after the loader probe holds targets
    // again): frozen now (SIGSTOP is not Ctrl-Z), rocsync leaves the next load held.
    said.wait_for("rocsync: continued after");
    // SAFETY: as above.
    unsafe { libc::kill(rocsync, libc::SIGSTOP) };
    wait_until_stopped(target.pid(), "the target");
    // SAFETY: as above.
    unsafe {
        libc::kill(rocsync, libc::SIGCONT);
        libc::kill(rocsync, libc::SIGTERM);
    }
    let status = wait_within(&mut tracer, Duration::from_secs(20), "rocsync");
    assert!(status.success(), "{status}");
    assert_never_stopped(target.pid(), Duration::from_millis(300));
    let trace = read_json(
        &std::env::temp_dir().join(format!("rocsync-never-stopped-{}.json", target.pid())),
    );
    assert_eq!(
        trace["rocsync"]["suspended"]["times"], 1,
        "{}",
        trace["rocsync"]
    );
}

/// Waits until `pid` is stopped (`T`).
fn wait_until_stopped(pid: u32, what: &str) {
    let start = Instant::now();
    while state(pid) != 'T' {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{what} never stopped"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until `pid` has no signal pending (`SigPnd`, `ShdPnd` in /proc/PID/status).
fn wait_until_no_signal_pending(pid: u32) {
    let start = Instant::now();
    while ["SigPnd:", "ShdPnd:"]
        .iter()
        .any(|f| !process_signal_mask(pid, f).is_empty())
    {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "signals left pending"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// `rocsync run -- dlopen_loop` as a terminal's job, once the command runs; with the
/// command's pid.
fn run_job(trace: &std::path::Path) -> (Child, u32) {
    let mut cmd = rocsync();
    cmd.args(["run", "--no-status", "-o"])
        .arg(trace)
        .arg("--")
        .arg(rocsync_tests::dlopen_loop())
        .process_group(0);
    let mut tracer = spawn_piped(&mut cmd);
    await_ready(&mut tracer);
    let command: Vec<u32> = children(tracer.id())
        .into_iter()
        .filter(|&p| {
            std::fs::read_to_string(format!("/proc/{p}/comm"))
                .is_ok_and(|c| c.trim() == "dlopen_loop")
        })
        .collect();
    let [command] = command[..] else {
        panic!("one command under rocsync run: {command:?}");
    };
    (tracer, command)
}

/// The probes' map NAME (pid → the time of its latest stop: `STOPPED` by the loader
/// probe, `CONTINUED` by rocsync once it handled that stop), found among rocsync's open
/// descriptors.
fn probe_map(rocsync: u32, name: &str) -> aya::maps::HashMap<aya::maps::MapData, u32, u64> {
    let fds = std::fs::read_dir(format!("/proc/{rocsync}/fdinfo")).unwrap();
    for fd in fds.flatten() {
        let Ok(info) = std::fs::read_to_string(fd.path()) else {
            continue;
        };
        let Some(id) = info
            .lines()
            .find_map(|l| l.strip_prefix("map_id:"))
            .and_then(|v| v.trim().parse().ok())
        else {
            continue;
        };
        let named = aya::maps::MapInfo::from_id(id).is_ok_and(|i| i.name_as_str() == Some(name));
        if named {
            let data = aya::maps::MapData::from_id(id).unwrap();
            return aya::maps::Map::from_map_data(data)
                .and_then(aya::maps::HashMap::try_from)
                .unwrap();
        }
    }
    panic!("rocsync {rocsync} holds no map {name}");
}

/// Fails unless `pid` stays stopped over `over`.
fn assert_stays_stopped(pid: u32, over: Duration, why: &str) {
    let start = Instant::now();
    while start.elapsed() < over {
        assert_eq!(state(pid), 'T', "{why}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Ends a `run` job (SIGTERM, forwarded to its command) and returns its trace.
fn end_job(mut tracer: Child, trace: &std::path::Path) -> serde_json::Value {
    // SAFETY: signals the rocsync this test started.
    unsafe { libc::kill(tracer.id() as i32, libc::SIGTERM) };
    wait_within(&mut tracer, Duration::from_secs(20), "rocsync");
    read_json(trace)
}

/// Under `run` the command is in rocsync's job: Ctrl-Z suspends both, and rocsync does
/// not continue the command behind the shell's back; `fg` continues both.
#[test]
fn ctrl_z_of_a_run_job_leaves_its_command_suspended_with_it() {
    if !can_trace("ctrl_z_of_a_run_job_leaves_its_command_suspended_with_it") {
        return;
    }
    let dir = TempDir::new();
    let trace = dir.path("trace.json");
    let (tracer, command) = run_job(&trace);
    let job = tracer.id() as i32;
    // SAFETY: signals the job this test started, as Ctrl-Z does.
    unsafe { libc::kill(-job, libc::SIGTSTP) };
    wait_until_stopped(tracer.id(), "rocsync");
    wait_until_stopped(command, "the command");
    assert_stays_stopped(
        command,
        Duration::from_millis(300),
        "the suspended command was continued",
    );
    // SAFETY: as above, as `fg` does.
    unsafe { libc::kill(-job, libc::SIGCONT) };
    let t = end_job(tracer, &trace);
    assert_eq!(t["rocsync"]["suspended"]["times"], 1, "{}", t["rocsync"]);
}

/// A Ctrl-Z that reaches the command while rocsync holds it at a load is not lost when
/// rocsync lets it go (a SIGCONT would discard the stops pending): the command stays
/// suspended until `fg`.
#[test]
fn a_ctrl_z_while_held_at_a_load_still_suspends_the_command() {
    if !can_trace("a_ctrl_z_while_held_at_a_load_still_suspends_the_command") {
        return;
    }
    let dir = TempDir::new();
    let trace = dir.path("trace.json");
    let (tracer, command) = run_job(&trace);
    let rocsync = tracer.id() as i32;
    let (stops, continued) = (
        probe_map(tracer.id(), "STOPPED"),
        probe_map(tracer.id(), "CONTINUED"),
    );
    for _ in 0..3 {
        // Frozen while rocsync waits and the command runs, not while rocsync is continuing
        // it: a SIGSTOP is taken at a syscall's return, such as the read of the command's
        // pending signals right before its SIGCONT, and a Ctrl-Z sent in that gap is lost
        // (a gap of microseconds when nothing freezes rocsync).
        let start = Instant::now();
        while state(command) == 'T' || state(tracer.id()) != 'S' {
            assert!(start.elapsed() < Duration::from_secs(10), "never idle");
            std::thread::sleep(Duration::from_millis(1));
        }
        // SAFETY: signals the processes this test started: rocsync frozen, so the
        // command's next load is held; the command is sent SIGTSTP there; rocsync goes on
        // and continues it.
        unsafe { libc::kill(rocsync, libc::SIGSTOP) };
        wait_until_stopped(command, "the command");
        // The stop that holds it (the probe records it before it signals).
        let held = stops.get(&command, 0).expect("the command's stop recorded");
        // SAFETY: kill has no memory preconditions.
        unsafe {
            libc::kill(command as i32, libc::SIGTSTP);
            libc::kill(rocsync, libc::SIGCONT);
        }
        // rocsync has acted on that stop once it records it continued (after it decided
        // whether to signal the command): only then does the command's state show what it
        // did.
        let start = Instant::now();
        while continued.get(&command, 0).ok() != Some(held) {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "rocsync never acted on the held load"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_stays_stopped(
            command,
            Duration::from_millis(300),
            "the command held at a load ran on after its Ctrl-Z",
        );
        // SAFETY: as above, as `fg` does.
        unsafe { libc::kill(command as i32, libc::SIGCONT) };
    }
    let t = end_job(tracer, &trace);
    assert_eq!(t["rocsync"]["suspended"]["times"], 0, "{}", t["rocsync"]);
}
