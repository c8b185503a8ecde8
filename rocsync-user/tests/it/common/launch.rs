//! Helpers that start scenarios under rocsync, and the handshakes that replace sleeps.

use std::{
    io::{BufRead as _, BufReader, Write as _},
    process::{Child, ChildStdin, Command, Stdio},
    time::{Duration, Instant},
};

use rocsync_tests::{read_log, sim_hip};

use super::{capture::*, output::*, raw::*};

pub(crate) type Traced = (Vec<rocsync_tests::LoggedCall>, Vec<RawCall>, String);

pub(crate) fn run_scenario(dir: &TempDir, program: &std::path::Path, args: &[&str]) -> Traced {
    traced_run(dir, &[], program, args)
}

/// `rocsync run [flags] --raw … -- program args`: the scenario's log, the captured calls,
/// rocsync's stderr.
pub(crate) fn traced_run(
    dir: &TempDir,
    flags: &[&str],
    program: &std::path::Path,
    args: &[&str],
) -> Traced {
    let log = dir.path("scenario.log");
    let raw = dir.path("calls.jsonl");
    let out = run_ok(
        rocsync()
            .arg("run")
            .args(flags)
            .arg("--raw")
            .arg(&raw)
            .arg("--")
            .arg(program)
            .args(args)
            .env("SCENARIO_LOG", &log)
            .env("SCENARIO_HIP", sim_hip()),
    );
    let (_, calls) = read_raw(&raw);
    (read_log(&log), calls, stderr_of(&out))
}

/// Attaches rocsync to a gated scenario, then lets the scenario start calling.
pub(crate) fn attach_and_start(
    target: &mut std::process::Child,
    raw: &std::path::Path,
) -> std::process::Child {
    let pid = target.id().to_string();
    let mut tracer = spawn_piped(
        rocsync()
            .args(["attach", "--raw"])
            .arg(raw)
            .args(["--pid", &pid]),
    );
    wait_for_line(&mut tracer, "tracing pid", Duration::from_secs(20));
    target.stdin.take().unwrap().write_all(b"go\n").unwrap();
    tracer
}

/// Starts a gated scenario (it waits for a line on stdin before calling HIP).
pub(crate) fn start_gated(
    dir: &TempDir,
    program: &std::path::Path,
    args: &[&str],
) -> std::process::Child {
    spawn_ready(
        Command::new(program)
            .arg("gated")
            .args(args)
            .env("SCENARIO_LOG", dir.path("scenario.log"))
            .env("SCENARIO_HIP", sim_hip())
            .stdin(Stdio::piped()),
    )
}

/// Starts a program that says "ready" on stdout once set up, and waits for that line.
pub(crate) fn spawn_ready(cmd: &mut Command) -> std::process::Child {
    let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
    await_ready(&mut child);
    child
}

/// Reads the child's first stdout line: "ready".
pub(crate) fn await_ready(child: &mut std::process::Child) {
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
}

/// How long a line awaited may take, however much else the child says meanwhile.
const LINE_WAIT: Duration = Duration::from_secs(60);

/// The lines a child writes to a pipe, read on a thread, waited for one at a time.
pub(crate) struct Lines(std::sync::mpsc::Receiver<String>, pub Vec<String>);

impl Lines {
    pub(crate) fn of(pipe: impl std::io::Read + Send + 'static) -> Self {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Lines(rx, Vec::new())
    }

    pub(crate) fn wait_for(&mut self, needle: &str) {
        let deadline = Instant::now() + LINE_WAIT;
        while !self.1.last().is_some_and(|l| l.contains(needle)) {
            self.next_before(deadline, || format!("no {needle:?}"));
        }
    }

    /// Waits until each of `needles` is in a line seen so far, in whatever order.
    pub(crate) fn wait_for_all(&mut self, needles: &[&str]) {
        let deadline = Instant::now() + LINE_WAIT;
        while !needles.iter().all(|n| self.1.iter().any(|l| l.contains(n))) {
            self.next_before(deadline, || format!("not all of {needles:?}"));
        }
    }

    /// One more line, read before `deadline` (a child that keeps talking without saying
    /// what is awaited fails the test too, rather than hanging it).
    fn next_before(&mut self, deadline: Instant, awaited: impl Fn() -> String) {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.0.recv_timeout(left) {
            Ok(line) => self.1.push(line),
            Err(_) => panic!("{} within {LINE_WAIT:?}; saw {:#?}", awaited(), self.1),
        }
    }

    /// Takes the lines written so far, without waiting.
    pub(crate) fn drain(&mut self) -> &[String] {
        while let Ok(line) = self.0.try_recv() {
            self.1.push(line);
        }
        &self.1
    }

    /// Every line, once the pipe closes.
    pub(crate) fn all(mut self) -> Vec<String> {
        while let Ok(line) = self.0.recv() {
            self.1.push(line);
        }
        self.1
    }
}

/// The handshake with the `hang` scenario: it said "blocking", and its main thread is
/// asleep in the runtime's synchronize (no sleep that races the capture).
pub(crate) fn wait_until_blocked(target: &mut std::process::Child) {
    let mut line = String::new();
    BufReader::new(target.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "blocking");
    let syscall = format!("/proc/{}/syscall", target.id());
    let start = std::time::Instant::now();
    // clock_nanosleep (230) or nanosleep (35): inside hipStreamSynchronize.
    while !std::fs::read_to_string(&syscall)
        .is_ok_and(|s| s.starts_with("230 ") || s.starts_with("35 "))
    {
        assert!(start.elapsed() < Duration::from_secs(10), "never blocked");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// As [`wait_until_blocked`], for a command started by `rocsync run` (its child).
pub(crate) fn wait_until_blocked_via(tracer: &mut std::process::Child) {
    let mut line = String::new();
    BufReader::new(tracer.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "blocking");
    let children = format!("/proc/{0}/task/{0}/children", tracer.id());
    // rocsync's children: its watchdog and the command.
    let child = std::fs::read_to_string(&children)
        .unwrap()
        .split_whitespace()
        .find(|c| {
            std::fs::read_to_string(format!("/proc/{c}/comm")).is_ok_and(|n| n.trim() == "scenario")
        })
        .expect("the command")
        .to_string();
    let syscall = format!("/proc/{child}/syscall");
    let start = std::time::Instant::now();
    while !std::fs::read_to_string(&syscall)
        .is_ok_and(|s| s.starts_with("230 ") || s.starts_with("35 "))
    {
        assert!(start.elapsed() < Duration::from_secs(10), "never blocked");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A gated program (a scenario's `gated MODE …`, a `bench_calls` with `BENCH_GATE`): held
/// before its first runtime call until opened.
pub(crate) struct Gated {
    pub child: Child,
    /// Its stdout: its word at the gate, then what it says.
    pub said: Lines,
    gate: ChildStdin,
}

impl Gated {
    /// Starts a scenario and waits at its gate ("ready").
    pub(crate) fn start(cmd: &mut Command) -> Gated {
        Self::start_at(cmd, "ready")
    }

    /// Starts it and waits until it says `word` at its gate.
    pub(crate) fn start_at(cmd: &mut Command, word: &str) -> Gated {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut said = Lines::of(child.stdout.take().unwrap());
        said.wait_for(word);
        let gate = child.stdin.take().unwrap();
        Gated { child, said, gate }
    }

    pub(crate) fn open(&mut self) {
        self.gate.write_all(b"go\n").unwrap();
    }

    /// Opens the gate once the daemon says it tracks the process: none of its calls is
    /// made before.
    pub(crate) fn open_when_tracked(&mut self, lines: &mut Lines) {
        lines.wait_for(&format!("tracking pid {}", self.child.id()));
        self.open();
    }
}
