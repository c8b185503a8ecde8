//! NCCL links the CUDA runtime statically: its event records and stream waits never reach
//! libcudart (on a 2-GPU DDP job, two per all-reduce were missing). rocsync probes that
//! copy too, through the library's local symbols. A collective library built that way is
//! traced end to end. Needs root.

use std::collections::BTreeMap;

use crate::common::*;
use rocsync_tests::nccl_user;

#[test]
fn a_runtime_carried_statically_by_a_collective_library_is_traced() {
    if !can_trace("a_runtime_carried_statically_by_a_collective_library_is_traced") {
        return;
    }
    let dir = TempDir::new();
    let (out, raw) = (dir.path("t.json"), dir.path("r.jsonl"));
    let rounds = 7;
    let run = run_ok(
        rocsync()
            .args(["run", "--no-status", "-o"])
            .arg(&out)
            .arg("--raw")
            .arg(&raw)
            .arg("--")
            .arg(nccl_user())
            .arg(rounds.to_string()),
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("libnccl.so.2") && stderr.contains("it carries (linked statically)"),
        "{stderr}"
    );
    let (_, mut calls) = read_raw(&raw);
    calls.sort_by_key(|c| c.correlation);
    let count = |api: &str| calls.iter().filter(|c| c.api.symbol() == api).count();
    // Per round two records and two waits; around them two streams made and destroyed.
    assert_eq!(count("cudaEventRecord"), 2 * rounds);
    assert_eq!(count("cudaStreamWaitEvent"), 2 * rounds);
    assert_eq!(
        (count("cudaStreamCreate"), count("cudaStreamDestroy")),
        (2, 2)
    );
    assert!(calls.iter().all(|c| c.ret == Some(0)));
    // Each wait resolves to the latest record of its event before it (derived here from
    // the captured calls, in correlation order).
    let mut last = BTreeMap::new();
    let mut want = BTreeMap::new();
    for c in &calls {
        match c.api.symbol() {
            "cudaEventRecord" => {
                last.insert(c.args[0], c.correlation);
            }
            "cudaStreamWaitEvent" => {
                want.insert(c.correlation, last[&c.args[1]] as i64);
            }
            _ => {}
        }
    }
    assert_eq!(trace_edges(&read_json(&out)), want);
}
