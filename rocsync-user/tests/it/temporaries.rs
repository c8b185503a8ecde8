//! Temporary outputs a killed rocsync left (`.NAME.rocsync-PID-NONCE.tmp`) are removed by
//! the next run writing into that directory; nothing else is, and no link is followed.

use std::{
    io::Write as _,
    path::Path,
    time::{Duration, Instant},
};

use crate::common::*;

const RAW: &str = concat!(
    r#"{"rocsync_raw":{"version":"0.1.0","clock_offset_ns":1700000000000000000,"command":["app"]}}"#,
    "\n",
    r#"{"api":"hipDeviceSynchronize","pid":9,"tid":9,"correlation":1,"enter_ns":1000,"exit_ns":2000,"ret":0,"args":{}}"#,
    "\n",
    r#"{"rocsync_raw_end":{}}"#,
    "\n"
);

/// A pid no process has now (one that just exited).
fn dead_pid() -> u32 {
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

fn names(dir: &Path) -> std::collections::BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn stale_temporaries_of_dead_rocsyncs_are_removed_and_nothing_else() {
    let dir = TempDir::new();
    let out = TempDir::new();
    let raw = dir.path("c.jsonl");
    std::fs::write(&raw, RAW).unwrap();
    let (dead, me) = (dead_pid(), std::process::id());
    let victim = dir.path("victim");
    std::fs::write(&victim, b"keep").unwrap();
    let at = |n: String| out.path(&n);
    let stale = [
        format!(".t.json.rocsync-{dead}-1f.tmp"),
        // A live process, but not a rocsync, holding no lock.
        format!(".u.json.rocsync-{me}-2a.tmp"),
    ];
    for n in &stale {
        std::fs::write(at(n.clone()), b"partial").unwrap();
    }
    // A live writer this /proc cannot see (another pid namespace) holds its lock.
    let locked = format!(".l.json.rocsync-{dead}-3b.tmp");
    let held = std::fs::File::create(at(locked.clone())).unwrap();
    rustix::fs::flock(&held, rustix::fs::FlockOperation::NonBlockingLockExclusive).unwrap();
    let link = format!(".v.json.rocsync-{dead}-4c.tmp");
    std::os::unix::fs::symlink(&victim, at(link.clone())).unwrap();
    let fifo = format!(".f.json.rocsync-{dead}-5d.tmp");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        at(fifo.clone()),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let other = format!(".w.json.other-{dead}-6e.tmp");
    std::fs::write(at(other.clone()), b"mine").unwrap();
    run_ok(
        rocsync()
            .arg("convert")
            .arg(&raw)
            .arg("-o")
            .arg(out.path("t.json")),
    );
    let left = names(out.0.path());
    for n in &stale {
        assert!(!left.contains(n), "{n} removed: {left:?}");
    }
    for n in [&locked, &link, &fifo, &other, &"t.json".to_string()] {
        assert!(left.contains(n), "{n} kept: {left:?}");
    }
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
}

/// A convert killed with SIGKILL leaves its temporary; the next one removes it.
#[test]
fn a_killed_converts_temporary_is_removed_by_the_next_run() {
    let dir = TempDir::new();
    let big = dir.path("big.jsonl");
    let mut w = std::io::BufWriter::new(std::fs::File::create(&big).unwrap());
    w.write_all(RAW.lines().next().unwrap().as_bytes()).unwrap();
    for c in 1..=400_000u64 {
        write!(
            w,
            "\n{{\"api\":\"hipDeviceSynchronize\",\"pid\":9,\"tid\":9,\"correlation\":{c},\"enter_ns\":{c}0,\"exit_ns\":{c}5,\"ret\":0,\"args\":{{}}}}"
        )
        .unwrap();
    }
    w.write_all(b"\n").unwrap();
    drop(w);
    let out = TempDir::new();
    let mut child = rocsync()
        .arg("convert")
        .arg(&big)
        .arg("-o")
        .arg(out.path("t.json"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The temporary is made before the input is read: kill once it is there.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !names(out.0.path()).iter().any(|n| n.ends_with(".tmp")) {
        assert!(Instant::now() < deadline, "no temporary appeared");
        std::thread::yield_now();
    }
    child.end();
    let left = names(out.0.path());
    assert!(
        !left.contains("t.json"),
        "killed before it finished: {left:?}"
    );
    assert_eq!(left.len(), 1, "{left:?}");
    let raw = dir.path("c.jsonl");
    std::fs::write(&raw, RAW).unwrap();
    run_ok(
        rocsync()
            .arg("convert")
            .arg(&raw)
            .arg("-o")
            .arg(out.path("u.json")),
    );
    assert_eq!(names(out.0.path()), ["u.json".to_string()].into());
}
