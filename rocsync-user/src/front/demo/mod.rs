//! `rocsync demo`: a first trace with nothing but rocsync — no GPU, no runtime, no compiler
//! (what a user who installed the wheel or the .deb has). rocsync runs itself as the
//! traced program, on a simulated HIP runtime built into its own binary ([`runtime`]),
//! which `run --hip-lib` probes in that file as in `libamdhip64`; then reports the trace.

mod program;
mod runtime;

use std::{path::Path, process::Command};

use anyhow::{Context as _, Result};

/// The hidden argument that makes `rocsync demo` the traced program.
pub(crate) const PROGRAM: &str = "--program";

/// Traces the demo program into `output`, then reports it; the exit code of the first
/// step that failed (each said its error), else 0. `program`: be the traced program.
pub fn demo(output: &Path, program: bool) -> Result<i32> {
    if program {
        return Ok(program::run());
    }
    let exe = std::env::current_exe().context("finding rocsync's own file")?;
    let traced = Command::new(&exe)
        // The program forks nothing; followed, the probes in rocsync's own file would
        // reach this rocsync and its `run` too (each said in a note).
        .args(["run", "--force", "--no-follow", "--hip-lib"])
        .arg(&exe)
        .arg("--output")
        .arg(output)
        .arg("--")
        .arg(&exe)
        .args(["demo", PROGRAM])
        .status()
        .context("running rocsync run")?;
    if !traced.success() {
        return Ok(traced.code().unwrap_or(1));
    }
    let reported = Command::new(&exe)
        .arg("report")
        .arg(output)
        .status()
        .context("running rocsync report")?;
    Ok(reported.code().unwrap_or(1))
}
