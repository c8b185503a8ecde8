//! Probe placement on a library whose exports start with single-stepped instructions
//! (tests/c/prologues.S): the probe moves past `test`/`mov` to an emulated jump only
//! where that is provably safe, and the calls are captured with the same arguments and
//! return values. Needs root (eBPF).

use crate::common::*;

#[test]
fn probes_move_past_single_stepped_instructions_only_when_safe() {
    if !can_trace("probes_move_past_single_stepped_instructions_only_when_safe") {
        return;
    }
    let dir = TempDir::new();
    let (raw, trace) = (dir.path("r.jsonl"), dir.path("t.json"));
    let lib = rocsync_tests::prologues_hip();
    let out = run_ok(
        rocsync()
            .args(["run", "-v", "--raw"])
            .arg(&raw)
            .arg("-o")
            .arg(&trace)
            .arg("--")
            .arg(rocsync_tests::bench_calls())
            .arg(&lib)
            .args(["hipStreamSynchronize", "500"]),
    );
    let stderr = stderr_of(&out);
    let line = |f: &str| {
        stderr
            .lines()
            .find(|l| l.contains(&format!(" {f}: probe on")))
            .unwrap_or_else(|| panic!("no placement line for {f}:\n{stderr}"))
            .to_string()
    };
    let moved = line("hipStreamSynchronize");
    assert!(
        moved.contains("probe on `je` after test, mov (emulated)"),
        "{moved}"
    );
    for kept in [
        "hipEventSynchronize",
        "hipDeviceSynchronize",
        "hipEventQuery",
    ] {
        assert!(line(kept).contains("single-stepped"), "{}", line(kept));
    }
    // The moved probe reads the same arguments and return value as one at the entry.
    let (_, calls) = read_raw(&raw);
    assert!(calls.len() >= 500, "{} calls", calls.len());
    assert!(
        calls
            .iter()
            .all(|c| c.api == "hipStreamSynchronize" && c.args[0] == 0 && c.ok()),
        "{:?}",
        calls.iter().find(|c| !c.ok())
    );
    // The trace says which probes are single-stepped.
    let t = read_json(&trace);
    let slow: Vec<&str> = t["rocsync"]["single_stepped_probes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(slow.len(), 3, "{slow:?}");
    assert!(
        slow.iter().all(|s| !s.starts_with("hipStreamSynchronize")),
        "{slow:?}"
    );
}
