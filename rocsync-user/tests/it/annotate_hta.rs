//! HTA's critical path on a CUDA-format profiler trace of `scenario cross` before and
//! after `rocsync annotate`: before, CUPTI (as on CUDA 13) resolved no event wait and HTA
//! follows no stream wait; after, it has a kernel→kernel SYNC_DEPENDENCY edge for each
//! stream wait whose producer it can see (its record row named `cudaEventRecord`, a
//! kernel on the recording stream before it: every one in this scenario).
//!
//! Needs root (capture) and `ROCSYNC_HTA_PYTHON`; skips with a reason otherwise.

use std::{collections::BTreeMap, process::Command};

use serde_json::Value;

use crate::{
    annotate::{annotate, capture_cross, resolved_waits},
    common::{kineto::*, run_ok},
};
use rocsync_tests::critical_path_script;

fn critical_path(python: &std::ffi::OsStr, trace: &std::path::Path) -> Value {
    let out = run_ok(Command::new(python).arg(critical_path_script()).arg(trace));
    serde_json::from_slice(&out.stdout).expect("the script prints JSON")
}

#[test]
fn hta_follows_the_annotated_stream_waits() {
    let test = "hta_follows_the_annotated_stream_waits";
    let Some(python) = std::env::var_os("ROCSYNC_HTA_PYTHON") else {
        rocsync_tests::skip(
            test,
            "ROCSYNC_HTA_PYTHON is not set (cargo xtask test sets it)",
        );
        return;
    };
    let Some(run) = capture_cross(test) else {
        return;
    };
    let o = Options {
        format: Format::Cuda,
        clock_error_ns: 7_000_000,
        cuda_events: true,
        cupti_resolved: BTreeMap::new(),
    };
    let (_, summary, _) = annotate(&run, "hta", &o);
    let waits = resolved_waits(&run.log);
    let stream_waits = run
        .log
        .iter()
        .filter(|l| l.api == "hipStreamWaitEvent" && waits.contains_key(&l.seq))
        .count();
    assert!(stream_waits >= 24);
    assert_eq!(summary["waits"]["filled"], waits.len(), "{summary:#}");
    let before = critical_path(&python, &run.dir.path("hta.json"));
    let after = critical_path(&python, &run.dir.path("hta.annotated.json"));
    let kernel_to_kernel = |v: &Value| v["sync"]["kernel->kernel"].as_u64().unwrap_or(0);
    assert_eq!(kernel_to_kernel(&before), 0, "{before}");
    assert_eq!(kernel_to_kernel(&after), stream_waits as u64, "{after}");
}
