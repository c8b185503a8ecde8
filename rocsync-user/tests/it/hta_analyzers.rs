//! Every HolisticTraceAnalysis 0.5 analyzer on rocsync traces of the scenarios — one
//! process, and a launcher's two ranks — runs without an exception, except those that
//! cannot apply to a trace without kernels, which fail with exactly the reason
//! docs/analysis.md gives; and HTA counts as computation no sync row but those it counts
//! as computation in CUPTI's own traces too.
//!
//! Needs root (capture) and `ROCSYNC_HTA_PYTHON` (a Python with `holistictraceanalysis`);
//! skips with a reason otherwise.

use std::{collections::BTreeMap, ffi::OsString, path::Path, process::Command};

use crate::common::*;
use rocsync_tests::{hta_analyzers_script, launcher, scenario};

/// What HTA 0.5 raises on a trace without kernels, launches, operators or profiler steps
/// (docs/analysis.md says why each cannot apply). Every other analyzer must succeed.
const NOT_APPLICABLE: [(&str, &str); 4] = [
    // One frame per stream that ran kernel/memcpy/memset rows, concatenated: none.
    (
        "get_idle_time_breakdown",
        "ValueError: No objects to concatenate",
    ),
    // Needs ProfilerStep annotations (torch.profiler's), which no runtime tracer sees.
    (
        "get_potential_stragglers",
        "ValueError: invalid value for argument: profiler_steps=None; available profiler steps=[]",
    ),
    // Groups the launches found under aten:: operators: there are none.
    ("get_aten_op_kernels_and_delay", "KeyError: 'thread_id'"),
    // Its queue-length series comes from kernel launches joined to kernels: None here.
    (
        "critical_path_analysis",
        "TypeError: 'NoneType' object is not subscriptable",
    ),
];

/// Every public analysis of HTA 0.5's TraceAnalysis: a new one in the script is a new row
/// here, never an unchecked one.
const ANALYZERS: [&str; 20] = [
    "get_temporal_breakdown",
    "get_idle_time_breakdown",
    "get_gpu_kernel_breakdown",
    "get_gpu_kernels_with_user_annotations",
    "get_gpu_user_annotation_breakdown",
    "get_comm_comp_overlap",
    "get_profiler_steps",
    "get_potential_stragglers",
    "get_frequent_cuda_kernel_sequences",
    "get_aten_op_kernels_and_delay",
    "get_cuda_kernel_launch_stats",
    "generate_trace_with_counters",
    "get_queue_length_summary",
    "get_queue_length_time_series",
    "get_queue_length_summary_from_time_series",
    "get_time_spent_blocked_on_full_queue",
    "get_memory_bw_summary",
    "get_memory_bw_time_series",
    "get_cupti_counter_data_with_operators",
    "critical_path_analysis",
];

fn hta_python(test: &str) -> Option<OsString> {
    if !can_trace(test) {
        return None;
    }
    let python = std::env::var_os("ROCSYNC_HTA_PYTHON");
    if python.is_none() {
        rocsync_tests::skip(
            test,
            "ROCSYNC_HTA_PYTHON is not set (cargo xtask test sets it)",
        );
    }
    python
}

/// Runs every analyzer on the traces in `traces` and checks what each did.
fn check_analyzers(python: &OsString, traces: &Path, ranks: &[u64]) {
    let scratch = traces.with_file_name("hta-scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    let out = run_ok(
        Command::new(python)
            .arg(hta_analyzers_script())
            .arg(traces)
            .arg(&scratch),
    );
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("the HTA script prints JSON");
    assert_eq!(
        report["ranks"],
        serde_json::json!(ranks),
        "HTA read every rank"
    );
    let results: BTreeMap<String, String> =
        serde_json::from_value(report["results"].clone()).unwrap();
    let want: BTreeMap<String, String> = ANALYZERS
        .iter()
        .map(|a| {
            let why = NOT_APPLICABLE.iter().find(|(n, _)| n == a);
            (a.to_string(), why.map_or("ok", |(_, r)| r).to_string())
        })
        .collect();
    assert_eq!(results, want, "what each HTA analyzer did");

    // Only "Stream Wait Event" is computation to HTA 0.5, because its kernel type comes
    // from the name alone (`.*Sync` is "other") and CUPTI's rows carry the same name,
    // which its critical path needs. The other sync rows are never computation.
    let sync_names = [
        "Stream Wait Event",
        "Event Sync",
        "Stream Sync",
        "Context Sync",
    ];
    let hta_rule: Vec<String> =
        serde_json::from_value(report["sync_names_hta_calls_computation"].clone()).unwrap();
    assert_eq!(hta_rule, ["Stream Wait Event"], "HTA 0.5's own name rule");
    let compute: Vec<String> = serde_json::from_value(report["compute_names"].clone()).unwrap();
    assert!(!compute.is_empty(), "the traces hold device sync rows");
    for name in &compute {
        assert!(
            hta_rule.contains(name),
            "{name} counted as computation, unlike HTA's treatment of CUPTI's rows"
        );
    }
    let types: BTreeMap<String, Vec<String>> =
        serde_json::from_value(report["kernel_types"].clone()).unwrap();
    for (name, kinds) in &types {
        assert!(
            sync_names.contains(&name.as_str()),
            "{name}: not a sync row"
        );
        if !hta_rule.contains(name) {
            assert!(
                !kinds.iter().any(|k| k == "COMPUTATION"),
                "{name}: {kinds:?}"
            );
        }
    }
}

#[test]
fn every_hta_analyzer_runs_on_a_single_process_trace() {
    let test = "every_hta_analyzer_runs_on_a_single_process_trace";
    let Some(python) = hta_python(test) else {
        return;
    };
    let dir = TempDir::new();
    let traces = dir.path("traces");
    std::fs::create_dir(&traces).unwrap();
    run_ok(
        rocsync()
            .args(["run", "--no-status", "-o"])
            .arg(traces.join("rank0.json"))
            .arg("--")
            .arg(scenario())
            .arg("basic")
            .env("SCENARIO_LOG", dir.path("scenario.log")),
    );
    check_analyzers(&python, &traces, &[0]);
}

#[test]
fn every_hta_analyzer_runs_on_a_directory_of_ranks() {
    let test = "every_hta_analyzer_runs_on_a_directory_of_ranks";
    let Some(python) = hta_python(test) else {
        return;
    };
    let dir = TempDir::new();
    let traces = dir.path("traces");
    std::fs::create_dir(&traces).unwrap();
    // Two workers with RANK 0 and 1, as torchrun starts them: one trace file each.
    run_ok(
        rocsync()
            .args(["run", "--no-status", "-o"])
            .arg(traces.join("t.json"))
            .arg("--")
            .arg(launcher())
            .arg(dir.path(""))
            .arg(scenario())
            .args(["cross", "10", "--"])
            .arg(scenario())
            .args(["threads", "2", "5"]),
    );
    let files = std::fs::read_dir(&traces).unwrap().count();
    assert_eq!(files, 2, "one trace per rank");
    check_analyzers(&python, &traces, &[0, 1]);
}
