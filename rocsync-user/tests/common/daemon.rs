//! Helpers of the daemon tests: a daemon of a test's own, its HTTP endpoint, its stop.

use std::{
    io::{Read as _, Write as _},
    net::TcpStream,
    path::PathBuf,
    process::Child,
};

use super::{Lines, TempDir, rocsync, spawn_piped};

/// One GET over HTTP/1.1; the whole response.
pub fn get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// The scenario program under a path of this test's own, for the daemon's filter: other
/// tests (and other daemons) run scenarios at the same time.
pub fn own_copy(dir: &TempDir) -> PathBuf {
    let exe = dir.path("scenario");
    std::fs::copy(rocsync_tests::scenario(), &exe).unwrap();
    exe
}

/// Starts a daemon counting only `exe`, with its socket and state in `dir`; returns it
/// with its stderr lines.
pub fn start_daemon(dir: &TempDir, exe: &std::path::Path, extra: &[&str]) -> (Child, Lines) {
    let mut daemon = spawn_piped(
        rocsync()
            .args(["daemon", "--metrics-addr", "127.0.0.1:0", "--state-dir"])
            .arg(dir.path("state"))
            .arg("--socket")
            .arg(dir.path("rocsync.sock"))
            .arg("--include-exe")
            .arg(exe)
            .args(extra),
    );
    let mut lines = Lines::of(daemon.stderr.take().unwrap());
    lines.wait_for("SIGTERM stops");
    (daemon, lines)
}

pub fn stop(mut daemon: Child) {
    // SAFETY: signals the daemon this test started.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    assert!(daemon.wait().unwrap().success());
}
