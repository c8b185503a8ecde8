//! `rocsync demo`, the README's first command for a user with only the wheel or the .deb:
//! rocsync traces a program of its own on the simulated HIP runtime in its binary (no GPU,
//! no runtime, no compiler), writes a real trace and reports it.

use crate::common::*;

#[test]
fn demo_traces_a_training_loop_on_the_runtime_in_rocsync_itself_and_reports_it() {
    if !can_trace("demo_traces_a_training_loop_on_the_runtime_in_rocsync_itself_and_reports_it") {
        return;
    }
    let dir = TempDir::new();
    let out = dir.path("demo.json");
    let run = run_ok(rocsync().args(["demo", "-o"]).arg(&out));
    let (report, said) = (String::from_utf8_lossy(&run.stdout), stderr_of(&run));
    // Probed in rocsync's own file, every call of the program captured, nothing lost.
    assert!(said.contains("captured"), "{said}");
    assert!(said.contains("lost: nothing"), "{said}");
    let trace = read_json(&out);
    let rows = trace["traceEvents"].as_array().unwrap();
    let count = |name: &str| {
        (rows.iter())
            .filter(|e| e["cat"] == "cuda_runtime" && e["name"] == name)
            .count()
    };
    // 40 batches recorded and waited on, 10 step ends blocked on, the last synchronizes.
    assert_eq!(count("hipStreamWaitEvent"), 40, "{said}");
    assert_eq!(count("hipEventSynchronize"), 10);
    assert_eq!(count("hipEventRecord"), 80);
    assert_eq!(count("hipDeviceSynchronize"), 1);
    // Every wait on an event resolved to its record (the 40 stream waits, the 10 step
    // ends' queries and synchronizes), with its arrows.
    assert_eq!(trace["rocsync"]["waits_resolved"], 60);
    assert_eq!(trace["rocsync"]["waits_unresolved"], 0);
    assert!(rows.iter().any(|e| e["cat"] == "hip_sync_dep"));
    // Its threads as the kernel named them.
    let names: Vec<&str> = (rows.iter())
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .filter_map(|e| e["args"]["name"].as_str())
        .collect();
    assert!(
        names.contains(&"demo-train") && names.contains(&"demo-loader"),
        "{names:?}"
    );
    // And the report of it, on standard output.
    assert!(report.contains("hipEventSynchronize"), "{report}");
    assert!(report.contains("demo-train"), "{report}");
}
