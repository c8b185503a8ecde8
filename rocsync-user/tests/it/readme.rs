//! The README's "Open the trace" snippet is run as a reader would run it: HTA on a
//! folder holding a rocsync trace, so the snippet cannot drift from what HTA accepts.
//! (The README's `rocsync` command lines are parsed by `cli::documented`'s unit test.)
//! Needs root (capture) and `ROCSYNC_HTA_PYTHON`.

use std::process::Command;

use crate::common::*;
use rocsync_tests::scenario;

/// The README's first ```python block.
fn readme_python() -> String {
    let readme = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    let text = std::fs::read_to_string(readme).unwrap();
    let (_, after) = text.split_once("```python\n").expect("a python block");
    let (block, _) = after.split_once("```").expect("its end");
    block.to_string()
}

#[test]
fn the_readme_hta_snippet_runs_on_a_trace_folder() {
    let name = "the_readme_hta_snippet_runs_on_a_trace_folder";
    if !can_trace(name) {
        return;
    }
    let Some(python) = std::env::var_os("ROCSYNC_HTA_PYTHON") else {
        rocsync_tests::skip(
            name,
            "ROCSYNC_HTA_PYTHON is not set (cargo xtask test sets it)",
        );
        return;
    };
    let dir = TempDir::new();
    let traces = dir.path("traces");
    std::fs::create_dir(&traces).unwrap();
    run_ok(
        rocsync()
            .args(["run", "-o"])
            .arg(traces.join("trace.json"))
            .arg("--")
            .arg(scenario())
            .args(["cross", "20"]),
    );
    let out = run_ok(
        Command::new(python)
            .arg("-c")
            .arg(readme_python())
            .current_dir(dir.path(".")),
    );
    // Both breakdowns print a table naming the trace's rank.
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(printed.lines().count() >= 4, "{printed}");
}
