//! NCCL links the CUDA runtime statically: its event records and stream waits never reach
//! libcudart (on a 2-GPU DDP job, two per all-reduce were missing). rocsync probes that
//! copy too, through the library's local symbols. A collective library built that way is
//! traced end to end, against the library's own log of its calls. Needs root.

use std::collections::BTreeMap;

use crate::common::*;
use rocsync_tests::{nccl_user, read_log};

#[test]
fn a_runtime_carried_statically_by_a_collective_library_is_traced() {
    if !can_trace("a_runtime_carried_statically_by_a_collective_library_is_traced") {
        return;
    }
    let dir = TempDir::new();
    let (out, raw, log) = (dir.path("t.json"), dir.path("r.jsonl"), dir.path("s.log"));
    let rounds = 7;
    let run = run_ok(
        rocsync_run_raw(&out, &raw, &nccl_user())
            .arg(rounds.to_string())
            .env("SCENARIO_LOG", &log)
            // An MPI launcher's names, and no torchrun ones to take first.
            .env_remove("RANK")
            .env_remove("WORLD_SIZE")
            .env_remove("LOCAL_RANK")
            .env("OMPI_COMM_WORLD_RANK", "3")
            .env("OMPI_COMM_WORLD_SIZE", "4")
            .env("SLURM_LOCALID", "1"),
    );
    let stderr = stderr_of(&run);
    assert!(
        stderr.contains("libnccl.so.2") && stderr.contains("it carries (linked statically)"),
        "{stderr}"
    );
    let logged = read_log(&log);
    // Per round two records and two waits; around them two streams made and destroyed,
    // a synchronize and two event destroys.
    assert_eq!(logged.len(), 4 * rounds + 7, "{logged:#?}");
    assert!(logged.iter().all(|l| l.ret == 0));
    let (_, calls) = read_raw(&raw);
    assert_same_calls(&logged, calls);
    // Each wait resolves to the record the library's log says it waited on.
    let trace = read_json(&out);
    let corr = assert_rows_match_log(&trace, None, &logged);
    let want: BTreeMap<u64, i64> = expected_edges(&logged)
        .into_iter()
        .map(|(w, r)| (corr[&w], r.map_or(-1, |r| corr[&r] as i64)))
        .collect();
    assert_eq!(want.len(), 2 * rounds);
    assert_eq!(trace_edges(&trace), want);
    // Who the process said it was, by the environment it was given and the collective
    // library it mapped.
    assert_eq!(
        trace["distributedInfo"],
        serde_json::json!({
            "rank": 3, "rank_from": "OMPI_COMM_WORLD_RANK",
            "world_size": 4, "world_size_from": "OMPI_COMM_WORLD_SIZE",
            "local_rank": 1, "local_rank_from": "SLURM_LOCALID",
            "backend": "nccl",
        })
    );
}
