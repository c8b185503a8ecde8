//! File-wide call probes ask the target table of every call, through a cache in the
//! kernel: each change to the table must reach the very next call, however many calls
//! the cache answered before it.

use std::{
    io::{BufRead as _, BufReader},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use crate::common::{TempDir, can_trace};
use rocsync::calls::{
    backend::Runtime,
    probes::{ApiChoice, Probes},
};
use rocsync_common::{Backend, Config, Decoded, Switch, decode};

/// CPU time `pid` has run so far, by the kernel's scheduler (/proc/PID/schedstat).
fn ran(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).unwrap();
    Duration::from_nanos(stat.split_whitespace().next().unwrap().parse().unwrap())
}

/// A window that ends once `pid` has run `cpu` more (a fixed time would prove nothing of a
/// target the scheduler left waiting meanwhile): at most 10 s.
struct Running {
    pid: u32,
    until: Duration,
    start: Instant,
}

impl Running {
    fn for_cpu(pid: u32, cpu: Duration) -> Self {
        Running {
            pid,
            until: ran(pid) + cpu,
            start: Instant::now(),
        }
    }

    fn over(&self) -> bool {
        let ran = ran(self.pid);
        assert!(
            ran >= self.until || self.start.elapsed() < Duration::from_secs(10),
            "the target ran too little in 10 s to tell"
        );
        ran >= self.until
    }
}

/// The CPU time a window lasts: some hundreds of the loop's iterations.
const WINDOW: Duration = Duration::from_millis(50);

/// The entry and exit records of `pid` the probes write while it runs `cpu`.
fn records_over(probes: &mut Probes, pid: u32, cpu: Duration) -> (usize, usize) {
    let (mut entries, mut exits) = (0, 0);
    let window = Running::for_cpu(pid, cpu);
    loop {
        let over = window.over();
        let until = probes.calls_reserved();
        probes.drain_calls(until, |bytes| match decode(bytes) {
            Ok(Decoded::Entry(e)) if e.pid == pid => entries += 1,
            Ok(Decoded::Exit(e)) if e.pid == pid => exits += 1,
            _ => {}
        });
        if over {
            return (entries, exits);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Reads and drops what is in the ring: records of calls in flight at a change.
fn settle(probes: &mut Probes, pid: u32) {
    records_over(probes, pid, Duration::from_millis(5));
}

/// A scenario calling in a loop (`loop`), under file-wide probes of the simulated runtime
/// switched as `switch` and no target yet; returned once it loops.
fn looping_under(switch: Switch) -> (Probes, Looping) {
    let mut probes = Probes::load(Default::default()).unwrap();
    probes.set_switch(switch).unwrap();
    probes
        .attach_runtime(
            Runtime::of(Backend::Hip),
            &ApiChoice::default(),
            &rocsync_tests::sim_hip(),
            None,
            false,
        )
        .unwrap();
    let dir = TempDir::new();
    let mut child = Command::new(rocsync_tests::scenario())
        .args(["loop", "20000"])
        .env("SCENARIO_LOG", dir.path("loop.log"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut said)
        .unwrap();
    assert_eq!(said.trim(), "looping");
    (probes, Looping { child, _dir: dir })
}

struct Looping {
    child: Child,
    _dir: TempDir,
}

/// Ended by its id when the test ends, passed or not.
impl Drop for Looping {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the child this test started, by its id.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

#[test]
fn file_wide_probes_follow_every_change_to_the_target_table() {
    if !can_trace("file_wide_probes_follow_every_change_to_the_target_table") {
        return;
    }
    let (mut probes, target) = looping_under(Switch {
        capture: 1,
        by_process: 1,
        ..Switch::default()
    });
    let pid = target.child.id();
    let window = WINDOW;
    let capturing = Config {
        capture: 1,
        ..Config::INACTIVE
    };

    // Not a target: its calls, answered by the cache from the first, write nothing.
    assert_eq!(records_over(&mut probes, pid, window), (0, 0));

    probes.set_target(pid, capturing).unwrap();
    let (entries, exits) = records_over(&mut probes, pid, window);
    assert!(
        entries > 0 && exits > 0,
        "a target: {entries} entries, {exits} exits"
    );

    // Registered, not capturing: no entry; every exit (calls entered while capturing
    // complete).
    probes.set_target(pid, Config::INACTIVE).unwrap();
    settle(&mut probes, pid);
    let (entries, exits) = records_over(&mut probes, pid, window);
    assert!(
        entries == 0 && exits > 0,
        "registered: {entries} entries, {exits} exits"
    );

    probes.forget_target(pid).unwrap();
    settle(&mut probes, pid);
    assert_eq!(records_over(&mut probes, pid, window), (0, 0), "forgotten");

    probes.set_target(pid, capturing).unwrap();
    let (entries, _) = records_over(&mut probes, pid, window);
    assert!(entries > 0, "a target again: no entry");
}

/// Calls the kernel has counted so far, over every series (the daemon's mode).
fn counted(probes: &Probes) -> u64 {
    probes.metrics().unwrap().iter().map(|(_, v)| v.calls).sum()
}

#[test]
fn counting_probes_follow_every_change_to_the_target_table() {
    if !can_trace("counting_probes_follow_every_change_to_the_target_table") {
        return;
    }
    let (mut probes, target) = looping_under(Switch {
        by_process: 1,
        metrics: 1,
        ..Switch::default()
    });
    let pid = target.child.id();
    // What the kernel counts while the target runs `cpu`.
    let over_cpu = |probes: &Probes, cpu| {
        let before = counted(probes);
        let window = Running::for_cpu(pid, cpu);
        while !window.over() {
            std::thread::sleep(Duration::from_millis(2));
        }
        counted(probes) - before
    };
    let over = |probes: &Probes| over_cpu(probes, WINDOW);

    // Not tracked: its calls, answered by the cache from the first, count nothing.
    assert_eq!(over(&probes), 0, "not tracked");
    let tracked = Config {
        metrics: 1,
        ..Config::INACTIVE
    };
    probes.set_target(pid, tracked).unwrap();
    assert!(over(&probes) > 0, "tracked: nothing counted");
    probes.forget_target(pid).unwrap();
    // Calls entered before the change may still be counted: until the count settles
    // (unchanged while the target ran on).
    let start = Instant::now();
    while over_cpu(&probes, Duration::from_millis(5)) != 0 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the count never settles"
        );
    }
    assert_eq!(over(&probes), 0, "forgotten");
}
