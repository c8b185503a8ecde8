//! Launch and copy probes (`--probe launches`): `scenario copies` records on a copy
//! stream that, in the profiler's trace, appears only on the copies' `gpu_memcpy` rows
//! (as PyTorch's copy stream on the H200). The probes must read each call's stream where
//! the ABI puts it (`r8`, `[rsp+16]`), and annotate must learn that stream from them;
//! without them its waits stay `producer_stream_unknown`.

use std::{collections::BTreeMap, path::Path};

use crate::annotate::{Run, annotate, resolved_waits};
use crate::common::{kineto::*, *};
use rocsync_tests::{scenario, scenario_cuda};

const ITERS: usize = 12;

/// Captures `scenario copies` (`exe`: the HIP or the CUDA build), with the launch probes
/// or without.
fn capture_copies(test: &str, exe: &Path, launches: bool) -> Option<Run> {
    if !can_trace(test) {
        return None;
    }
    let dir = TempDir::new();
    let raw = dir.path("calls.jsonl");
    let log = dir.path("scenario.log");
    let mut cmd = rocsync();
    cmd.args(["run", "-o"])
        .arg(dir.path("rocsync.json"))
        .arg("--raw")
        .arg(&raw);
    if launches {
        cmd.args(["--probe", "launches"]);
    }
    run_ok(
        cmd.arg("--")
            .arg(exe)
            .args(["copies", &ITERS.to_string()])
            .env("SCENARIO_LOG", &log),
    );
    Some(Run::read(dir, raw, &log))
}

fn is_launch(api: &str) -> bool {
    api.ends_with("LaunchKernel") || api.ends_with("MemcpyAsync")
}

fn cupti() -> Options {
    Options {
        format: Format::Cuda,
        clock_error_ns: 2_480_000,
        cuda_events: false,
        cupti_resolved: BTreeMap::new(),
    }
}

#[test]
fn launch_probes_record_the_stream_argument_the_call_was_given() {
    for exe in [scenario(), scenario_cuda()] {
        let Some(run) = capture_copies("launch_probes_record_the_stream_argument", &exe, true)
        else {
            return;
        };
        let (_, calls) = read_raw(&run.raw);
        let got: Vec<_> = calls
            .iter()
            .filter(|c| is_launch(&c.api))
            .map(|c| (c.api.clone(), c.args[0], c.args[1], c.ret))
            .collect();
        let want: Vec<_> = run
            .log
            .iter()
            .filter(|l| is_launch(&l.api))
            .map(|l| (l.api.clone(), l.args[0], l.args[1], Some(l.ret)))
            .collect();
        assert_eq!(want.len(), 3 * ITERS, "{}", exe.display());
        // In call order (one thread): the function or destination and the stream, each
        // call's own — the launch's from [rsp+16], not the shared-memory size at [rsp+8].
        assert_eq!(got, want, "{}", exe.display());
        let streams: std::collections::BTreeSet<u64> = got.iter().map(|g| g.2).collect();
        assert_eq!(streams.len(), 2, "the copy and the compute stream");
    }
}

#[test]
fn annotate_learns_a_copy_stream_from_the_launch_probes_only() {
    let test = "annotate_learns_a_copy_stream_from_the_launch_probes_only";
    let Some(plain) = capture_copies(test, &scenario(), false) else {
        return;
    };
    // A default capture has no launch: its probes are opt-in.
    let (_, calls) = read_raw(&plain.raw);
    assert!(calls.iter().all(|c| !is_launch(&c.api)));
    let waits = resolved_waits(&plain.log);
    assert_eq!(waits.len(), ITERS);
    let (_, summary, _) = annotate(&plain, "plain", &cupti());
    assert_eq!(summary["waits"]["filled"], 0, "{summary:#}");
    assert_eq!(
        summary["waits"]["left"]["producer_stream_unknown"], ITERS,
        "{summary:#}"
    );
    // The profiler's launch and copy rows are not calls it missed.
    assert_eq!(summary["calls"]["rows_unmatched"], 0, "{summary:#}");

    let Some(run) = capture_copies(test, &scenario(), true) else {
        return;
    };
    let waits = resolved_waits(&run.log);
    let (w, summary, trace) = annotate(&run, "launches", &cupti());
    let seqs: BTreeMap<i64, u64> = w.correlation.iter().map(|(s, c)| (*c, *s)).collect();
    let mut filled = 0;
    for row in trace["traceEvents"].as_array().unwrap() {
        if row["cat"] != "cuda_sync" || row["name"] != "Stream Wait Event" {
            continue;
        }
        let a = &row["args"];
        let seq = seqs[&a["correlation"].as_i64().unwrap()];
        let (record, stream) = waits[&seq];
        assert_eq!(a["wait_on_stream"], w.streams[&stream], "wait seq {seq}");
        assert_eq!(
            a["wait_on_cuda_event_record_corr_id"], w.correlation[&record],
            "wait seq {seq}"
        );
        filled += 1;
    }
    assert_eq!(filled, ITERS);
    assert_eq!(summary["waits"]["filled"], ITERS, "{summary:#}");
    assert_eq!(
        summary["waits"]["left"],
        serde_json::json!({}),
        "{summary:#}"
    );
    assert_eq!(summary["calls"]["rows_unmatched"], 0, "{summary:#}");
    assert_eq!(summary["calls"]["calls_unmatched"], 0, "{summary:#}");
}
