//! What a command printed and whether it succeeded, read one way by every test.

use std::process::{Command, Output};

/// What `out` wrote on its standard error, as text.
pub(crate) fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// What a rocsync command wrote on its standard error: never a panic's message (a bad
/// input gets a clear error, never a panic).
#[track_caller]
pub(crate) fn tool_stderr(out: &Output) -> String {
    let text = stderr_of(out);
    assert!(!text.contains("panicked"), "{text}");
    text
}

/// Asserts `out` succeeded; its standard error is shown when it did not.
#[track_caller]
pub(crate) fn assert_ok(out: &Output) {
    assert!(out.status.success(), "{}\n{}", out.status, stderr_of(out));
}

/// `cmd` run to its end, asserted successful (the command and its standard error shown
/// when not).
#[track_caller]
pub(crate) fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        out.status,
        stderr_of(&out)
    );
    out
}

/// A hexadecimal number as the runtimes log them (`0x` or not).
pub(crate) fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap()
}
