//! The call probes attach through multi-uprobe links where the kernel has them (no
//! perf-event layer per hit), as classic uprobes with `--classic-uprobes`; either way
//! every call is captured, and the trace says which.

use std::{io::Write as _, time::Duration};

use crate::common::*;
use rocsync_tests::{read_log, scenario_dlopen, sim_hip};

/// The bpf links among a process's descriptors, by `link_type` (fdinfo).
fn link_types(pid: u32) -> Vec<String> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return Vec::new();
    };
    fds.filter_map(|fd| std::fs::read_to_string(fd.ok()?.path()).ok())
        .filter_map(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("link_type:"))
                .map(|t| t.trim().to_string())
        })
        .collect()
}

/// Runs a process that loads the runtime once told to, counts rocsync's links while the
/// runtime is loaded and nothing called, lets it call, and checks that every call was
/// captured. Returns (uprobe_multi links, perf-event links, functions probed, what the
/// trace says of the links).
fn capture_counting_links(extra: &[&str]) -> (usize, usize, usize, String) {
    let dir = TempDir::new();
    let (trace, raw, log) = (dir.path("t.json"), dir.path("r.jsonl"), dir.path("s.log"));
    // The command inherits rocsync's stdin and stdout: the test's gate and its lines.
    let mut tracer = spawn_piped(
        rocsync()
            .args(["run", "--no-status", "-o"])
            .arg(&trace)
            .arg("--raw")
            .arg(&raw)
            .args(extra)
            .arg("--")
            .arg(scenario_dlopen())
            .args(["gated", "loaded", "basic"])
            .env("SCENARIO_HIP", sim_hip())
            .env("SCENARIO_LOG", &log),
    );
    let mut out = Lines::of(tracer.stdout.take().unwrap());
    let mut err = Lines::of(tracer.stderr.take().unwrap());
    out.wait_for("ready");
    let mut gate = tracer.stdin.take().unwrap();
    gate.write_all(b"go\n").unwrap();
    out.wait_for("loaded");
    err.wait_for("attached to");
    let functions: usize = err
        .1
        .iter()
        .find_map(|l| l.split("attached to").nth(1)?.rsplit(": ").next())
        .and_then(|n| n.trim_end_matches(" functions").parse().ok())
        .unwrap_or_else(|| panic!("no function count in {:#?}", err.1));
    let types = link_types(tracer.id());
    let count = |t: &str| types.iter().filter(|x| *x == t).count();
    // fdinfo names a return probe's link `uretprobe_multi`.
    let multi = count("uprobe_multi") + count("uretprobe_multi");
    assert_eq!(count("uprobe_multi"), count("uretprobe_multi"), "{types:?}");
    let perf = count("perf");
    gate.write_all(b"go\n").unwrap();
    let status = wait_within(&mut tracer, Duration::from_secs(30), "the capture to end");
    assert!(status.success(), "{:#?}", err.1);
    let logged = read_log(&log);
    assert!(!logged.is_empty());
    let (_, calls) = read_raw(&raw);
    assert_same_calls(&probed(&logged), calls);
    let said = read_json(&trace)["rocsync"]["parameters"]["call_probe_links"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    (multi, perf, functions, said)
}

/// How many of the functions probed by default the simulated runtime defines, by its
/// dynamic symbol table as `nm` reads it.
fn traced_in_sim_hip() -> usize {
    let out = run_ok(
        std::process::Command::new("nm")
            .args(["-D", "--defined-only", "--format=just-symbols"])
            .arg(sim_hip()),
    );
    let defined: std::collections::BTreeSet<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split('@').next().unwrap().to_string())
        .collect();
    let n = apis::traced_by_default_names()
        .filter(|f| defined.contains(*f))
        .count();
    assert!(n > 0, "the simulated runtime defines none of them");
    n
}

#[test]
fn call_probes_are_multi_uprobe_links_and_miss_nothing() {
    let name = "call_probes_are_multi_uprobe_links_and_miss_nothing";
    if !can_trace(name) {
        return;
    }
    if apis::expected_call_probe_links() != "uprobe_multi" {
        rocsync_tests::skip(name, "this kernel has no multi-uprobe links (Linux < 6.6)");
        return;
    }
    let (multi, perf, functions, said) = capture_counting_links(&[]);
    assert_eq!(functions, traced_in_sim_hip());
    assert_eq!(
        multi,
        2 * functions,
        "an entry and a return link per function"
    );
    // The loader's probe (and nothing of the calls) stays a perf-event uprobe.
    assert!(perf >= 1 && perf < 2 * functions, "{perf} perf-event links");
    assert_eq!(said, "uprobe_multi");
}

#[test]
fn classic_uprobes_attach_through_perf_events_and_miss_nothing() {
    if !can_trace("classic_uprobes_attach_through_perf_events_and_miss_nothing") {
        return;
    }
    let (multi, perf, functions, said) = capture_counting_links(&["--classic-uprobes"]);
    assert_eq!(functions, traced_in_sim_hip());
    assert_eq!(multi, 0);
    assert!(
        perf > 2 * functions,
        "{perf} perf-event links for {functions} functions"
    );
    assert_eq!(said, "perf_event");
}
