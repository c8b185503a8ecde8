//! A profiler of our own for the simulated process: from the scenario's log (every hooked
//! call with the thread, arguments and CLOCK_MONOTONIC times the scenario took around
//! it), the trace torch.profiler/Kineto would have written of the same process, in
//! Kineto's CUDA (CUPTI) or ROCm (rocprofiler-sdk) format. It has everything of its own,
//! as a real profiler does: its clock (REALTIME from an offset of its own, a few ms off
//! rocsync's), its `baseTimeNanoseconds`, its correlation ids and its stream numbering.
//!
//! Where the format comes from (see `/work/shared/reference/kineto-trace-format.md`):
//! - CUDA: `CuptiActivity.h` (`RuntimeActivity`: cat `cuda_runtime`, args `cbid`,
//!   `correlation`; `CudaSyncActivity`: cat `cuda_sync`, CUPTI's names, pid = device,
//!   tid = stream (−1 written as 1; Stream Sync on stream + 1000000), args in its order);
//!   `output_json.cpp` (ts in µs with 3 decimals since `baseTimeNanoseconds`, `ac2g`
//!   flows); cbids as in real traces (the H200 trace in bench/gpu-validation: 370 for
//!   cudaEventRecordWithFlags); CUPTI stream ids: 7 for the legacy stream, 13.. for
//!   created ones (as on the H200); CUDA 13 leaves every event wait unresolved (−1), as
//!   there; `cuda_event` rows (#1164, CUDA ≥ 12.8) only when asked.
//! - ROCm: `RocprofActivity.h`/`_inl.h` (HIP runtime rows: cat `cuda_runtime`, name = the
//!   HIP API, args `cid`, `correlation`; no sync rows), `RocprofLogger.cpp` (hipSetDevice,
//!   hipGetDevice not written), top-level `rocprofiler-sdk_version`.
//!
//! The scenario's `Launch` (a simulated kernel, not a runtime API, and not in its log) is
//! written as the kernel launch it stands for, where `scenario cross` makes it: on the
//! recording stream just before each record, on the waiting stream just after each
//! stream wait — CUDA only: rocprofiler-sdk sees kernels only as HSA dispatches, which the
//! plain simulated runtime never makes. A scenario that launches and copies for real
//! (`scenario copies`) has those written instead: each `*LaunchKernel`/`*MemcpyAsync`
//! call's runtime row and its kernel/`gpu_memcpy` row on the call's stream (CUDA only).

use std::collections::BTreeMap;

use rocsync_tests::LoggedCall;
use serde_json::{Value, json};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Format {
    Cuda,
    Rocm,
}

pub(crate) struct Options {
    pub format: Format,
    /// Profiler clock − the capture's REALTIME, ns.
    pub clock_error_ns: i64,
    /// CUDA: write `cuda_event` rows for records.
    pub cuda_events: bool,
    /// CUDA: correlation of waits (by seq) CUPTI "resolved" itself, with the answer to
    /// write (stream, record correlation); any other is −1.
    pub cupti_resolved: BTreeMap<u64, (i64, i64)>,
}

/// The trace and what the test needs to check it in the profiler's terms.
pub(crate) struct Written {
    pub trace: Value,
    /// Scenario seq → the profiler's correlation of that call's runtime row.
    pub correlation: BTreeMap<u64, i64>,
    /// Stream handle → the profiler's stream id.
    pub streams: BTreeMap<u64, i64>,
}

const CONTEXT: i64 = 1;
/// Kineto's base: wall time floored to a 3-month boundary.
const BASE_STEP_NS: i64 = 90 * 86_400 * 1_000_000_000;

fn cuda_name(api: &str) -> String {
    api.replacen("hip", "cuda", 1).replace("_spt", "_ptsz")
}

fn cbid(name: &str) -> i64 {
    match name {
        "cudaStreamSynchronize" => 131,
        "cudaEventRecord" => 135,
        "cudaEventSynchronize" => 137,
        "cudaEventQuery" => 138,
        "cudaStreamWaitEvent" => 147,
        "cudaDeviceSynchronize" => 165,
        "cudaMemcpyAsync" => 41,
        "cudaLaunchKernel" => 211,
        "cudaEventRecordWithFlags" => 370,
        _ => 0,
    }
}

/// What the op of a scenario API is, as the fixture needs it.
fn op(api: &str) -> &str {
    let a = api.trim_start_matches("hip").trim_start_matches("cuda");
    a.trim_end_matches("_spt").trim_end_matches("_ptsz")
}

/// µs with 3 decimals since `base`, as Kineto prints them (`fmtTs`).
fn us(ns: i64, base: i64) -> Value {
    let rel = ns - base;
    let text = format!("{}.{:03}", rel / 1000, rel % 1000);
    serde_json::from_str(&text).unwrap()
}

pub(crate) fn write(log: &[LoggedCall], pid: u32, realtime_offset_ns: i64, o: &Options) -> Written {
    let mut log: Vec<&LoggedCall> = log.iter().collect();
    log.sort_by_key(|l| (l.before_ns, l.seq));
    let epoch = |mono: u64| mono as i64 + realtime_offset_ns + o.clock_error_ns;
    let first = epoch(log.first().map_or(0, |l| l.before_ns));
    let base = first / BASE_STEP_NS * BASE_STEP_NS;
    let cuda = o.format == Format::Cuda;
    // Real launches in the log: no simulated ones are made up around records and waits.
    let made_up = !log.iter().any(|l| op(&l.api) == "LaunchKernel");
    let (pid, dev) = (pid as i64, 0i64);
    let mut next_corr: i64 = if cuda { 4_000 } else { 101 };
    let mut streams: BTreeMap<u64, i64> = BTreeMap::new();
    let mut events: BTreeMap<u64, i64> = BTreeMap::new();
    let mut correlation = BTreeMap::new();
    let mut rows: Vec<Value> = Vec::new();
    let mut stream_id = |h: u64| -> i64 {
        let n = streams.len() as i64;
        *streams.entry(h).or_insert(if h == 0 {
            7
        } else if cuda {
            13 + n
        } else {
            1 + n
        })
    };
    let runtime = |rows: &mut Vec<Value>, name: &str, tid: i64, t0: i64, t1: i64, corr: i64| {
        let args = if cuda {
            json!({"cbid": cbid(name), "correlation": corr})
        } else {
            json!({"cid": 0, "correlation": corr})
        };
        rows.push(
            json!({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": pid, "tid": tid,
            "ts": us(t0, base), "dur": us(t1 - t0 + base, base), "args": args}),
        );
    };
    for l in &log {
        let name = if cuda {
            cuda_name(&l.api)
        } else {
            l.api.clone()
        };
        let kind = op(&l.api);
        // Not written: device selection (both backends), event destroy (CUPTI's blocklist),
        // stream creation (not needed here).
        let skip_cuda = matches!(kind, "EventDestroy");
        if matches!(
            kind,
            "SetDevice" | "GetDevice" | "StreamCreate" | "StreamDestroy"
        ) || (cuda && skip_cuda)
        {
            continue;
        }
        let (t0, t1, tid) = (epoch(l.before_ns), epoch(l.after_ns), l.tid as i64);
        let launch = |rows: &mut Vec<Value>, next: &mut i64, at: i64, stream: i64, us_: i64| {
            let c = *next;
            *next += 1;
            rows.push(
                json!({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                "pid": pid, "tid": tid, "ts": us(at, base), "dur": us(base + 2_000, base),
                "args": {"cbid": 211, "correlation": c}}),
            );
            rows.push(
                json!({"ph": "X", "cat": "kernel", "name": "sim_kernel", "pid": dev,
                "tid": stream, "ts": us(at + 5_000, base), "dur": us(base + us_ * 1000, base),
                "args": {"device": dev, "context": CONTEXT, "stream": stream, "correlation": c}}),
            );
        };
        if cuda && made_up && kind == "EventRecord" {
            let s = stream_id(l.args[1]);
            launch(&mut rows, &mut next_corr, t0 - 4_000, s, 200);
        }
        let corr = next_corr;
        next_corr += 1;
        correlation.insert(l.seq, corr);
        runtime(&mut rows, &name, tid, t0, t1, corr);
        if !cuda {
            continue;
        }
        let n_events = events.len() as i64;
        let mut event_id = |h: u64| *events.entry(h).or_insert(38 + n_events);
        let sync = |name: &str, tid: i64, stream: i64, wait: Option<(i64, i64, i64)>| {
            let mut args = serde_json::Map::new();
            args.insert("External id".into(), json!(corr));
            args.insert("cuda_sync_kind".into(), json!(name));
            if let Some((ws, wr, ev)) = wait {
                args.insert("wait_on_stream".into(), json!(ws));
                args.insert("wait_on_cuda_event_record_corr_id".into(), json!(wr));
                args.insert("wait_on_cuda_event_id".into(), json!(ev));
            }
            for (k, v) in [
                ("stream", stream),
                ("correlation", corr),
                ("device", dev),
                ("context", CONTEXT),
            ] {
                args.insert(k.into(), json!(v));
            }
            json!({"ph": "X", "cat": "cuda_sync", "name": name, "pid": dev, "tid": tid,
                "ts": us(t0 + 1_000, base), "dur": us(base + (t1 - t0 - 1_000).max(0), base),
                "args": args})
        };
        let answer = |seq: u64| o.cupti_resolved.get(&seq).copied().unwrap_or((-1, -1));
        match kind {
            "StreamWaitEvent" => {
                let s = stream_id(l.args[0]);
                let (ws, wr) = answer(l.seq);
                rows.push(sync(
                    "Stream Wait Event",
                    s,
                    s,
                    Some((ws, wr, event_id(l.args[1]))),
                ));
                if made_up {
                    launch(&mut rows, &mut next_corr, t1 + 1_000, s, 100);
                }
            }
            "LaunchKernel" | "MemcpyAsync" => {
                let s = stream_id(l.args[1]);
                let (cat, name) = match kind {
                    "LaunchKernel" => ("kernel", "sim_kernel"),
                    _ => ("gpu_memcpy", "Memcpy HtoH (Pageable -> Pageable)"),
                };
                rows.push(
                    json!({"ph": "X", "cat": cat, "name": name, "pid": dev, "tid": s,
                    "ts": us(t1 + 3_000, base), "dur": us(base + 10_000, base),
                    "args": {"device": dev, "context": CONTEXT, "stream": s, "correlation": corr}}),
                );
            }
            "EventSynchronize" | "EventQuery" => {
                let (ws, wr) = answer(l.seq);
                rows.push(sync(
                    "Event Sync",
                    1,
                    -1,
                    Some((ws, wr, event_id(l.args[0]))),
                ));
            }
            "StreamSynchronize" => {
                let s = stream_id(l.args[0]);
                rows.push(sync("Stream Sync", s + 1_000_000, s, None));
            }
            "DeviceSynchronize" => rows.push(sync("Context Sync", 1, -1, None)),
            "EventRecord" | "EventRecordWithFlags" if o.cuda_events => {
                let s = stream_id(l.args[1]);
                rows.push(
                    json!({"ph": "X", "cat": "cuda_event", "name": "cudaEvent", "pid": dev,
                    "tid": s, "ts": us(t1 + 2_000, base), "dur": 1,
                    "args": {"event_id": event_id(l.args[0]), "stream": s, "correlation": corr,
                             "device": dev, "context": CONTEXT}}),
                );
            }
            _ => {}
        }
    }
    let last = rows
        .iter()
        .filter_map(|r| r["ts"].as_f64())
        .fold(0.0, f64::max);
    // The step HTA's critical path is asked for, around everything.
    rows.insert(
        0,
        json!({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0",
        "pid": pid, "tid": log.first().map_or(0, |l| l.tid as i64), "ts": us(first - 10_000, base),
        "dur": last - (first - base) as f64 / 1000.0 + 1_000.0, "args": {"External id": 1}}),
    );
    let mut top = serde_json::Map::new();
    top.insert("schemaVersion".into(), json!(1));
    top.insert(
        "deviceProperties".into(),
        json!([{"id": 0, "name": "simulated"}]),
    );
    if cuda {
        top.insert("cuda_runtime_version".into(), json!(13000));
    } else {
        top.insert("rocprofiler-sdk_version".into(), json!("1.0.0"));
        top.insert("hip_runtime_version".into(), json!(70000000));
    }
    top.insert("displayTimeUnit".into(), json!("ms"));
    top.insert("baseTimeNanoseconds".into(), json!(base));
    top.insert("traceEvents".into(), Value::Array(rows));
    top.insert("distributedInfo".into(), json!({"rank": 0}));
    top.insert("traceName".into(), json!("fixture.json"));
    Written {
        trace: Value::Object(top),
        correlation,
        streams,
    }
}

/// As Kineto writes it: pretty enough for HTA's rank regex (`"rank": 0`).
pub(crate) fn to_text(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap()
}
