//! The bounded child: whatever the reader does, the caller gets stacks or a reason.

use std::time::Duration;

use super::{
    child::{Reader, assemble},
    model::{Stacks, Thread},
    reader::{Line, Phase},
};

fn shell(script: &str) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new("/bin/sh");
    cmd.args(["-c", script]);
    cmd
}

fn bounded(wall_ms: u64) -> Reader {
    Reader {
        wall: Duration::from_millis(wall_ms),
        ..Reader::default()
    }
}

fn line(phase: Phase) -> String {
    let stacks = Stacks {
        pid: 5,
        threads: vec![
            Thread {
                tid: 6,
                blocked: true,
                ..Thread::default()
            },
            Thread {
                tid: 7,
                ..Thread::default()
            },
        ],
        ..Stacks::default()
    };
    serde_json::to_string(&Line { phase, stacks }).unwrap()
}

#[tokio::test]
async fn a_reader_past_its_time_is_killed_by_its_pid() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let script = format!("echo $$ > {}; exec sleep 100", pid_file.display());
    let (out, failed) = bounded(300).run(shell(&script)).await;
    assert!(out.is_empty());
    assert_eq!(failed.as_deref(), Some("timed out after 0.3 s"));
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    assert!(
        !std::path::Path::new(&format!("/proc/{}", pid.trim())).exists(),
        "the reader is gone, reaped"
    );
}

#[tokio::test]
async fn a_reader_that_prints_too_much_is_stopped() {
    let reader = Reader {
        output: 1000,
        ..bounded(5000)
    };
    let (out, failed) = reader.run(shell("yes")).await;
    assert!(out.len() <= 1000, "{}", out.len());
    assert_eq!(failed.as_deref(), Some("printed more than 1000 bytes"));
}

#[tokio::test]
async fn the_reader_runs_under_its_memory_and_cpu_limits() {
    let reader = Reader {
        address_space: 512 << 20,
        cpu_s: 3,
        ..bounded(5000)
    };
    let (out, failed) = reader.run(shell("ulimit -v; ulimit -t; ulimit -c")).await;
    assert_eq!(failed, None);
    assert_eq!(String::from_utf8(out).unwrap(), "524288\n3\n0\n");
}

#[tokio::test]
async fn what_a_reader_said_before_it_died_is_kept_and_the_rest_explained() {
    let script = format!("echo '{}'; kill -ABRT $$", line(Phase::Threads));
    let (out, failed) = bounded(5000).run(shell(&script)).await;
    assert_eq!(failed.as_deref(), Some("died of signal 6 (SIGABRT)"));
    let stacks = assemble(5, &out, failed);
    assert_eq!(stacks.threads.len(), 2);
    for t in &stacks.threads {
        assert_eq!(
            t.python_error.as_deref(),
            Some("unreadable: the reader died of signal 6 (SIGABRT) while reading Python stacks")
        );
    }
    assert!(
        stacks.threads[0]
            .native_error
            .as_deref()
            .unwrap()
            .starts_with("not read")
    );
    assert_eq!(stacks.error, None);
}

#[test]
fn a_reader_that_timed_out_while_unwinding_keeps_the_python_stacks() {
    let out = format!("{}\n{}\n", line(Phase::Threads), line(Phase::Python));
    let stacks = assemble(5, out.as_bytes(), Some("timed out after 2 s".into()));
    assert_eq!(stacks.threads[0].python_error, None);
    assert_eq!(
        stacks.threads[0].native_error.as_deref(),
        Some("unreadable: the reader timed out after 2 s while unwinding")
    );
    assert_eq!(stacks.threads[1].native_error, None);
}

#[test]
fn a_reader_that_said_nothing_leaves_only_the_reason() {
    let stacks = assemble(
        5,
        b"{not json\n",
        Some("died of signal 11 (SIGSEGV)".into()),
    );
    assert_eq!(
        stacks.error.as_deref(),
        Some("unreadable: the reader died of signal 11 (SIGSEGV)")
    );
    assert!(stacks.threads.is_empty());
    let done = assemble(5, format!("{}\n", line(Phase::Native)).as_bytes(), None);
    assert_eq!((done.error, done.threads.len()), (None, 2));
}
