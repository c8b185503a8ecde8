//! Output to a closed pipe (`rocsync report X --json | head -1`) ends a command quietly,
//! as it ends other Unix tools: no panic, no error message, status 141.

use std::process::Stdio;

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
        let mut child = rocsync()
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader is gone before anything is written.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
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
