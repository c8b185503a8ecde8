//! The stack reader on real targets (issue 62): every Python thread's stack by host tid, a
//! C program's native frames (with and without frame pointers), a Python in a PID
//! namespace of its own. The reader runs as the daemon runs it (`stacks::Reader`: a
//! bounded child of the rocsync binary). Needs root (`map_files`).

use std::{path::Path, process::Command};

use rocsync::stacks::{NativeFrame, Stacks};

use crate::common::*;

/// Blocks the main thread in `step()` and a second thread in `other()`.
const SCRIPT: &str = "\
import threading, time

def other():
    time.sleep(1000)  # other

def step():
    print('ready', flush=True)
    time.sleep(1000)  # step

threading.Thread(target=other, daemon=True).start()
time.sleep(0.05)
step()
";

fn line_of(marker: &str) -> i64 {
    1 + SCRIPT.lines().position(|l| l.ends_with(marker)).unwrap() as i64
}

/// Writes the script where the test says; returns its path.
pub(crate) fn script(dir: &TempDir) -> String {
    let path = dir.path("hang.py");
    std::fs::write(&path, SCRIPT).unwrap();
    path.display().to_string()
}

fn symbols(stacks: &Stacks) -> Vec<&str> {
    let frames = stacks
        .blocked()
        .unwrap()
        .native_stack
        .as_deref()
        .unwrap_or_default();
    frames.iter().filter_map(|f| f.symbol.as_deref()).collect()
}

/// Checks the Python read of the `hang.py` process `pid` whose main thread is `main`.
fn assert_python_stacks(stacks: &Stacks, main: u32, file: &str) {
    assert_eq!(stacks.error, None, "{stacks:#?}");
    assert!(stacks.python_version.as_deref().unwrap().starts_with("3."));
    let blocked = &stacks.threads[0];
    assert!(blocked.blocked && blocked.tid == main, "{stacks:#?}");
    let frames = blocked
        .python_stack
        .as_ref()
        .expect("the main thread's Python stack");
    assert_eq!(
        (
            frames[0].function.as_str(),
            frames[0].file.as_str(),
            frames[0].line
        ),
        ("step", file, line_of("# step"))
    );
    assert_eq!(frames.last().unwrap().function, "<module>");
    let other = stacks
        .threads
        .iter()
        .find(|t| {
            t.python_stack
                .as_ref()
                .is_some_and(|s| s[0].function == "other")
        })
        .expect("the second thread's stack");
    assert!(!other.blocked && other.tid != main);
    assert_eq!(
        other.python_stack.as_ref().unwrap()[0].line,
        line_of("# other")
    );
    assert_eq!(
        stacks.where_(),
        Some(format!("step (hang.py:{})", line_of("# step")))
    );
}

#[test]
fn every_python_threads_stack_by_its_host_tid() {
    if !can_read_stacks("every_python_threads_stack_by_its_host_tid") {
        return;
    }
    let dir = TempDir::new();
    let file = script(&dir);
    let target = Reaped(spawn_ready(Command::new("python3").arg(&file)));
    let pid = target.id();
    wait_in_syscall(pid, pid);
    let stacks = read_stacks(pid, pid);
    assert_python_stacks(&stacks, pid, &file);
    let read: Vec<u32> = stacks.threads.iter().map(|t| t.tid).collect();
    assert_eq!(
        read.iter()
            .copied()
            .collect::<std::collections::BTreeSet<_>>(),
        tids(pid)
    );
    // Under the Python frames, the C the interpreter runs down to the system call.
    let natives = symbols(&stacks);
    assert!(natives.contains(&"clock_nanosleep"), "{natives:?}");
    assert!(
        natives.iter().any(|s| s.contains("PyEval_EvalFrame")),
        "{natives:?}"
    );
    // The blocked thread's rows: Python outermost first, then what it called.
    let rows = stacks.rows(10.0, 5.0);
    assert_eq!(rows[0]["name"], "<module>");
    assert_eq!(rows[1]["name"], "step");
    assert_eq!(rows.last().unwrap()["name"], "clock_nanosleep");
    assert!(
        rows.iter().all(|r| r["pid"] == pid && r["tid"] == pid),
        "{rows:?}"
    );
}

#[test]
fn a_python_in_a_pid_namespace_is_matched_to_its_host_tids() {
    if !can_read_stacks("a_python_in_a_pid_namespace_is_matched_to_its_host_tids") {
        return;
    }
    let dir = TempDir::new();
    let file = script(&dir);
    let mut unshare = Command::new("unshare");
    unshare.args(["--pid", "--kill-child", "python3", &file]);
    let outer = Reaped(spawn_ready(&mut unshare));
    let children = format!("/proc/{0}/task/{0}/children", outer.id());
    let pid: u32 = std::fs::read_to_string(children)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(status.contains(&format!("NSpid:\t{pid}\t1\n")), "{status}");
    wait_in_syscall(pid, pid);
    assert_python_stacks(&read_stacks(pid, pid), pid, &file);
}

fn assert_blocked_in_sleep(program: &Path) {
    let target = Reaped(spawn_ready(&mut Command::new(program)));
    let pid = target.id();
    wait_in_syscall(pid, pid);
    let stacks = read_stacks(pid, pid);
    assert_eq!(
        (stacks.error.as_deref(), stacks.python_version.as_deref()),
        (None, None)
    );
    let thread = stacks.blocked().unwrap();
    assert_eq!(thread.python_stack, None);
    let frames = thread.native_stack.as_deref().unwrap();
    let names = symbols(&stacks);
    let at = |name: &str| names.iter().position(|n| *n == name);
    let (sleep, own, main) = (at("sleep"), at("wait_in_sleep"), at("main"));
    assert!(sleep < own && own < main && sleep.is_some(), "{frames:#?}");
    let exe = program.display().to_string();
    let mine = |f: &&NativeFrame| f.symbol.as_deref() == Some("wait_in_sleep");
    let own = frames.iter().find(mine).unwrap();
    assert!(
        own.symbolized && own.object.as_deref() == Some(exe.as_str()),
        "{own:?}"
    );
    let libc = frames
        .iter()
        .find(|f| f.symbol.as_deref() == Some("sleep"))
        .unwrap();
    assert!(
        libc.object.as_deref().unwrap().contains("libc.so"),
        "{libc:?}"
    );
    let name = program.file_name().unwrap().to_str().unwrap();
    assert_eq!(stacks.where_(), Some(format!("wait_in_sleep ({name})")));
    assert!(stacks.rows(0.0, 1.0).last().unwrap()["name"] == frames[0].symbol.as_deref().unwrap());
}

#[test]
fn a_c_programs_native_frames_down_to_the_libc_sleep() {
    if !can_read_stacks("a_c_programs_native_frames_down_to_the_libc_sleep") {
        return;
    }
    assert_blocked_in_sleep(&rocsync_tests::stacks_sleep());
}

#[test]
fn native_frames_without_frame_pointers() {
    if !can_read_stacks("native_frames_without_frame_pointers") {
        return;
    }
    assert_blocked_in_sleep(&rocsync_tests::stacks_sleep_nofp());
}

#[test]
fn a_return_probe_on_the_blocked_call_hides_only_its_callers_return() {
    if !can_read_stacks("a_return_probe_on_the_blocked_call_hides_only_its_callers_return") {
        return;
    }
    // As the daemon's probe on a synchronisation: sleep's return address is the kernel's
    // trampoline while it blocks.
    let mut cmd = Command::new(rocsync_tests::stacks_sleep_nofp());
    let mut target = Reaped(spawn_ready(
        cmd.arg("wait").stdin(std::process::Stdio::piped()),
    ));
    let pid = target.id();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let libc = maps.lines().find_map(|l| {
        l.split_whitespace()
            .nth(5)
            .filter(|p| p.contains("libc.so"))
    });
    let _probe = return_probe(pid, Path::new(libc.unwrap()), "sleep");
    use std::io::Write as _;
    writeln!(target.stdin.as_mut().unwrap(), "go").unwrap();
    wait_in_syscall(pid, pid);
    let stacks = read_stacks(pid, pid);
    let frames = stacks.blocked().unwrap().native_stack.clone().unwrap();
    let at = |name: &str| {
        frames
            .iter()
            .position(|f| f.symbol.as_deref() == Some(name))
    };
    let (sleep, own, main) = (at("sleep"), at("wait_in_sleep"), at("main"));
    // wait_in_sleep, whose return address the trampoline holds, is named by main's call
    // into it (found above it on the stack): its start, not a return address.
    assert!(
        sleep.is_some() && own == sleep.map(|s| s + 1) && main == own.map(|o| o + 1),
        "{frames:#?}"
    );
    let hidden = &frames[own.unwrap()];
    let exe = rocsync_tests::stacks_sleep_nofp().display().to_string();
    assert!(
        hidden.named_by_call
            && hidden.scanned
            && hidden.offset.is_some()
            && hidden.object.as_deref() == Some(exe.as_str()),
        "{hidden:?}"
    );
    assert!(frames[main.unwrap()].scanned, "{frames:#?}");
    assert!(
        !frames[..own.unwrap()].iter().any(|f| f.scanned),
        "{frames:#?}"
    );
    assert!(
        !frames
            .iter()
            .any(|f| f.object.as_deref() == Some("[uprobes]")),
        "{frames:#?}"
    );
    assert_eq!(
        stacks.where_(),
        Some("wait_in_sleep (stacks_sleep_nofp)".into())
    );
}

/// CUDA's default synchronize spins on a CPU, in no system call: its native stack comes
/// from one perf sample, and the thread spins on, never stopped.
#[test]
fn a_spinning_threads_native_frames_from_one_sample() {
    if !can_read_stacks("a_spinning_threads_native_frames_from_one_sample") {
        return;
    }
    let mut cmd = Command::new(rocsync_tests::stacks_sleep_nofp());
    let target = Reaped(spawn_ready(cmd.arg("spin")));
    let pid = target.0.id();
    let cpu = || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let fields: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .collect();
        (fields[0].to_string(), fields[11].parse::<u64>().unwrap())
    };
    let stacks = read_stacks(pid, pid);
    let thread = stacks.blocked().unwrap();
    assert_eq!(
        thread.native_read.as_deref(),
        Some("running: one perf sample of its registers and stack"),
        "{thread:#?}"
    );
    let names = symbols(&stacks);
    let at = |name: &str| names.iter().position(|n| *n == name);
    let (own, main) = (at("spin_until_done"), at("main"));
    assert!(own.is_some() && own < main, "{thread:#?}");
    assert_eq!(
        own,
        Some(0),
        "the sample's instruction pointer is in the loop"
    );
    // Never stopped: it is still running on a CPU, its CPU time still growing.
    let (state, before) = cpu();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let (_, after) = cpu();
    assert!(state == "R" && after > before, "{state} {before} {after}");
}
