//! The read itself, run in a process of its own (`rocsync read-stacks`, [`super::child`]):
//! the threads, then every Python stack, then the blocked thread's native stack. A JSON
//! line is printed after each phase, so what was read before the reader died or ran out
//! of time is kept.

use std::{
    io::Write as _,
    time::{SystemTime, UNIX_EPOCH},
};

use serde::{Deserialize, Serialize};

use super::{
    bounds,
    model::{Stacks, Thread},
    native,
    place::python_like,
    python, tasks,
};
use crate::{calls::probes::maps, os::procfs};

/// One line of the reader's output: the stacks as read up to the end of `phase`.
#[derive(Serialize, Deserialize)]
pub struct Line {
    pub phase: Phase,
    pub stacks: Stacks,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// The threads are listed; the Python stacks are being read.
    Threads,
    /// The Python stacks are read; the native stack is being unwound.
    Python,
    /// Done.
    Native,
}

/// Reads `pid`'s stacks (`blocked`: the thread the trace is for) and prints them.
pub fn run(pid: u32, blocked: u32) -> i32 {
    // When run by hand; the daemon's side sets both to what it saw, the child's start too.
    let started = std::time::Instant::now();
    let mut stacks = Stacks {
        pid,
        read_at_unix_us: unix_us(SystemTime::now()),
        ..Stacks::default()
    };
    if !procfs::exists(pid) {
        stacks.error = Some(format!("unreadable: no process {pid}"));
        return print(Phase::Native, &stacks);
    }
    let mut cut = stacks.cut;
    stacks.executable = procfs::exe(pid).map(|p| cut.string(p.to_string_lossy().into_owned()));
    let mut tids = tasks::ordered(pid, blocked);
    if tids.len() > bounds::THREADS {
        cut.threads += (tids.len() - bounds::THREADS) as u64;
        tids.truncate(bounds::THREADS);
    }
    stacks.threads = tids
        .into_iter()
        .map(|tid| Thread {
            tid,
            name: cut.string(tasks::name(pid, tid)),
            blocked: tid == blocked,
            ..Thread::default()
        })
        .collect();
    stacks.cut = cut;
    if runs_python(pid) {
        print(Phase::Threads, &stacks);
        read_python(pid, &mut stacks);
    }
    print(Phase::Python, &stacks);
    let mut cut = stacks.cut;
    if let Some(thread) = stacks.threads.iter_mut().find(|t| t.blocked) {
        match native::read(pid, blocked, &mut cut) {
            Ok((frames, how, stopped)) => {
                thread.native_stack = Some(frames);
                thread.native_read = Some(how.into());
                thread.native_error = stopped;
            }
            Err(why) => thread.native_error = Some(cut.string(why)),
        }
    }
    stacks.cut = cut;
    stacks.took_ms = started.elapsed().as_secs_f64() * 1e3;
    print(Phase::Native, &stacks)
}

/// Whether the process has a Python interpreter mapped (its executable or a libpython).
fn runs_python(pid: u32) -> bool {
    let text = procfs::maps(pid).unwrap_or_default();
    maps::parse(&text)
        .iter()
        .any(|m| python_like(&m.path.to_string_lossy()))
}

fn read_python(pid: u32, stacks: &mut Stacks) {
    let found = python::read(pid, &mut stacks.cut);
    stacks.python_version = found.version;
    for thread in &mut stacks.threads {
        thread.python_stack = found.by_tid.get(&thread.tid).cloned();
        thread.python_error = found.error.clone();
        if thread.blocked && thread.python_stack.is_none() && found.unmatched > 0 {
            thread.python_error = Some(format!(
                "no Python stack is known for this thread: {} Python threads have no OS \
                 thread id (Python before 3.11 keeps none that can be read without stopping it)",
                found.unmatched
            ));
        }
    }
}

/// Prints one line, its threads past [`bounds::OUTPUT`] cut (the blocked thread kept).
fn print(phase: Phase, stacks: &Stacks) -> i32 {
    let mut line = Line {
        phase,
        stacks: stacks.clone(),
    };
    let mut text = serde_json::to_string(&line).unwrap_or_default();
    while text.len() > bounds::OUTPUT && line.stacks.threads.len() > 1 {
        let keep = (line.stacks.threads.len() / 2).max(1);
        line.stacks.cut.threads += (line.stacks.threads.len() - keep) as u64;
        line.stacks.threads.truncate(keep);
        text = serde_json::to_string(&line).unwrap_or_default();
    }
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(_) => 1,
    }
}

/// A time as µs since the Unix epoch (0 before it).
pub fn unix_us(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}
