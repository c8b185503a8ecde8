//! Output to a closed pipe (`rocsync report X --json | head -1`) ends a command quietly,
//! as it ends other Unix tools: no panic, no error message, status 141.

use std::{
    os::fd::{FromRawFd as _, OwnedFd},
    process::Stdio,
};

use rocsync_common::Api;

use crate::common::{pipeline::call_in, *};

#[test]
fn output_to_a_closed_pipe_ends_quietly() {
    let dir = TempDir::new();
    let trace = dir.path("t.json");
    let calls = [
        call_in(1, 1, 1, Api::HipEventRecord, [0x10, 0x20, 0], 0),
        call_in(1, 1, 2, Api::HipStreamWaitEvent, [0x30, 0x10, 0], 0),
        call_in(1, 1, 3, Api::HipStreamSynchronize, [0x30, 0, 0], 0),
    ];
    let t = crate::common::pipeline::trace(&calls);
    std::fs::write(&trace, serde_json::to_vec(&t).unwrap()).unwrap();
    let t = trace.to_str().unwrap();
    for args in [
        vec!["report", t, "--json"],
        vec!["report", t],
        vec!["doctor", "--json"],
    ] {
        // The reader is gone before the command starts: its first write finds no one.
        let out = rocsync()
            .args(&args)
            .stdout(Stdio::from(readerless_pipe()))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = stderr_of(&out);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(!err.contains("error"), "{args:?}: {err}");
        // As a shell says of a command SIGPIPE ended.
        assert_eq!(
            out.status.code(),
            Some(128 + libc::SIGPIPE),
            "{args:?}: {err}"
        );
    }
}

/// The write end of a pipe whose read end is closed.
fn readerless_pipe() -> OwnedFd {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two descriptors it was given room for.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both were just opened here and are owned by nothing else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    write
}
