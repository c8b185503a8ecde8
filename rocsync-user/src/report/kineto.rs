//! A Kineto trace rocsync wrote, read back into the report's [`Capture`]: runtime rows
//! (`cuda_runtime`) for the calls and their `hip_*`/`cuda_*` fields, the device sync rows
//! (`cuda_sync`) for the device, and the `rocsync` object for the drop counters.

use std::{collections::BTreeMap, io::BufRead};

use anyhow::Result;
use serde::Deserialize;
use serde_json::Value;

use super::{
    capture::{Capture, Observed, Produced, waits_on_event},
    stream,
};

/// What the report reads of an event: a runtime or device sync row's fields, each as
/// the trace has it (a field of the wrong type is a row it cannot use, not an error).
#[derive(Default, Deserialize)]
#[serde(default)]
struct Event {
    ph: Value,
    cat: Value,
    name: Value,
    pid: Value,
    tid: Value,
    ts: Value,
    dur: Value,
    args: Args,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct Args {
    correlation: Value,
    in_flight: Value,
    hip_stream: Value,
    cuda_stream: Value,
    wait_on_stream: Value,
    wait_on_hip_event_record_corr_id: Value,
    wait_on_cuda_event_record_corr_id: Value,
    wait_on_unknown_reason: Value,
}

/// Most rows of each kind the report keeps (each costs about a kilobyte until the report
/// is made): a trace of more is reported on its first rows, the rest counted unused. A
/// trace is streamed, so its size alone costs nothing; this bounds what it holds.
const MAX_ROWS: usize = 1 << 21;

pub fn read(input: impl BufRead) -> Result<Capture> {
    read_within(input, MAX_ROWS)
}

fn read_within(input: impl BufRead, max_rows: usize) -> Result<Capture> {
    // Only runtime and device sync rows are kept: every other event passes by.
    let (mut runtime, mut syncs) = (Vec::new(), Vec::new());
    let mut past_bound = 0u64;
    let rocsync = stream::read(input, |e: Event| {
        if e.ph != "X" {
            return;
        }
        let rows = if e.cat == "cuda_runtime" {
            &mut runtime
        } else if e.cat == "cuda_sync" {
            &mut syncs
        } else {
            return;
        };
        if rows.len() < max_rows {
            rows.push(e);
        } else {
            past_bound += 1;
        }
    })?;
    let mut capture = Capture::default();
    if past_bound > 0 {
        let why = format!("rows past the report's bound of {max_rows} of a kind");
        capture.unusable.insert(why, past_bound);
    }
    // The device sync row of each call, by correlation: its name and device.
    let mut device_rows: BTreeMap<u64, (String, i32)> = BTreeMap::new();
    for e in &syncs {
        let (Some(corr), Some(name), Some(dev)) =
            (e.args.correlation.as_u64(), e.name.as_str(), e.pid.as_i64())
        else {
            capture.unusable("cuda_sync row without correlation, name or device");
            continue;
        };
        device_rows.insert(corr, (name.to_string(), dev as i32));
    }
    let runtime = &runtime;
    // Record rows by correlation: the producer's thread and time.
    let mut rows_by_corr: BTreeMap<u64, (u32, i64, i64)> = BTreeMap::new();
    for e in runtime {
        if let (Some(c), Some(tid), Some(ts), Some(dur)) = (
            e.args.correlation.as_u64(),
            e.tid.as_u64(),
            e.ts.as_f64(),
            e.dur.as_f64(),
        ) {
            rows_by_corr.insert(c, (tid as u32, ns(ts), ns(dur)));
        }
    }
    for e in runtime {
        let a = &e.args;
        let (Some(api), Some(corr), Some(pid), Some(tid), Some(ts), Some(dur)) = (
            e.name.as_str(),
            a.correlation.as_u64(),
            e.pid.as_u64(),
            e.tid.as_u64(),
            e.ts.as_f64(),
            e.dur.as_f64(),
        ) else {
            capture.unusable("cuda_runtime row without name, correlation, pid, tid, ts or dur");
            continue;
        };
        if a.in_flight == true {
            capture.unusable("call still in flight at the end (no duration)");
            continue;
        }
        // The runtime's `cuda*` and the driver's `cu*` alike.
        let cuda = api.starts_with("cu");
        let (stream, record) = match cuda {
            true => (&a.cuda_stream, &a.wait_on_cuda_event_record_corr_id),
            false => (&a.hip_stream, &a.wait_on_hip_event_record_corr_id),
        };
        let device_row = device_rows.get(&corr);
        let sync = device_row.map(|(n, _)| n.clone());
        let waits = sync.as_deref().is_some_and(waits_on_event);
        let record = record.as_i64();
        let producer = match (waits, record) {
            (true, Some(r)) if r >= 0 => {
                let r = r as u64;
                match (rows_by_corr.get(&r), hex(&a.wait_on_stream)) {
                    (Some(&(ptid, pts, pdur)), Some(stream)) => Some(Produced {
                        correlation: r,
                        stream,
                        tid: ptid,
                        record_ns: pts + pdur / 2,
                    }),
                    _ => {
                        capture.unusable("producer record row missing from the trace");
                        None
                    }
                }
            }
            _ => None,
        };
        // A wait the trace resolved but whose record row is missing is counted above as
        // unusable, not as unresolved.
        let resolved = record.is_some_and(|r| r >= 0);
        let unresolved = (waits && !resolved).then(|| {
            a.wait_on_unknown_reason
                .as_str()
                .unwrap_or("unknown")
                .to_string()
        });
        capture.calls.push(Observed {
            api: api.to_string(),
            pid: pid as u32,
            tid: tid as u32,
            correlation: corr,
            start_ns: ns(ts),
            blocked_ns: ns(dur),
            sync,
            device: device_row.map(|&(_, d)| d),
            stream: hex(stream),
            producer,
            unresolved,
        });
    }
    if let Some(drops) = rocsync["drops"].as_object() {
        for (k, v) in drops {
            match v.as_u64() {
                Some(n) => {
                    capture.losses.insert(k.clone(), n);
                }
                None => capture.unusable("drop counter that is not a count"),
            }
        }
    } else {
        capture.unusable("no drop counters in the rocsync object");
    }
    capture.rebase();
    Ok(capture)
}

/// Trace µs (3 decimals) to ns.
fn ns(us: f64) -> i64 {
    (us * 1000.0).round() as i64
}

/// A `"0x…"` handle.
fn hex(v: &Value) -> Option<u64> {
    u64::from_str_radix(v.as_str()?.strip_prefix("0x")?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(events: Value) -> Capture {
        let t = serde_json::json!({
            "traceEvents": events,
            "rocsync": {"drops": {"lost_ids": 2, "entry_records": 0}},
        });
        read(t.to_string().as_bytes()).unwrap()
    }

    fn runtime(name: &str, corr: u64, tid: u64, ts: f64, args: Value) -> Value {
        let mut a = serde_json::json!({"correlation": corr});
        a.as_object_mut()
            .unwrap()
            .extend(args.as_object().unwrap().clone());
        serde_json::json!({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 7,
            "tid": tid, "ts": ts, "dur": 2.0, "args": a})
    }

    fn sync(name: &str, corr: u64) -> Value {
        serde_json::json!({"ph": "X", "cat": "cuda_sync", "name": name, "pid": 1, "tid": 2,
            "ts": 0.0, "dur": 1.0, "args": {"correlation": corr}})
    }

    #[test]
    fn rows_past_the_bound_are_counted_not_kept() {
        let events: Vec<Value> = (0..5)
            .map(|i| {
                runtime(
                    "hipEventRecord",
                    i,
                    3,
                    i as f64 * 10.0,
                    serde_json::json!({}),
                )
            })
            .collect();
        let t = serde_json::json!({"traceEvents": events, "rocsync": {"drops": {}}});
        let capture = read_within(t.to_string().as_bytes(), 3).unwrap();
        assert_eq!(capture.calls.len(), 3);
        assert_eq!(
            capture.unusable["rows past the report's bound of 3 of a kind"],
            2
        );
    }

    #[test]
    fn a_wait_gets_its_producer_from_the_record_row() {
        let c = trace(serde_json::json!([
            runtime(
                "hipEventRecord",
                1,
                10,
                100.0,
                serde_json::json!({"hip_stream": "0xa"})
            ),
            runtime(
                "hipStreamWaitEvent",
                2,
                11,
                110.0,
                serde_json::json!({
                "hip_stream": "0xb", "wait_on_stream": "0xa",
                "wait_on_hip_event_record_corr_id": 1})
            ),
            sync("Stream Wait Event", 2),
        ]));
        assert!(c.unusable.is_empty(), "{:?}", c.unusable);
        let w = &c.calls[1];
        assert_eq!((w.device, w.stream), (Some(1), Some(0xb)));
        assert_eq!(w.start_ns, 10_000, "since the first call");
        let p = w.producer.unwrap();
        assert_eq!((p.correlation, p.stream, p.tid), (1, 0xa, 10));
        assert_eq!(p.record_ns, 1000, "the middle of the record call");
        assert_eq!(c.losses["lost_ids"], 2);
    }

    #[test]
    fn what_cannot_be_used_is_counted_not_dropped() {
        let c = trace(serde_json::json!([
            // No dur.
            {"ph": "X", "cat": "cuda_runtime", "name": "hipEventRecord", "pid": 7, "tid": 1,
             "ts": 1.0, "args": {"correlation": 1}},
            // Its producer's row is not in the trace.
            runtime("hipEventSynchronize", 2, 1, 5.0, serde_json::json!({
                "wait_on_stream": "0xa", "wait_on_hip_event_record_corr_id": 9})),
            sync("Event Sync", 2),
            // Unresolved, with the writer's reason.
            runtime("hipEventSynchronize", 3, 1, 9.0, serde_json::json!({
                "wait_on_hip_event_record_corr_id": -1,
                "wait_on_unknown_reason": "never_recorded"})),
            sync("Event Sync", 3),
            runtime("hipStreamSynchronize", 4, 1, 12.0, serde_json::json!({"in_flight": true})),
        ]));
        let want: BTreeMap<String, u64> = [
            ("call still in flight at the end (no duration)", 1),
            (
                "cuda_runtime row without name, correlation, pid, tid, ts or dur",
                1,
            ),
            ("producer record row missing from the trace", 1),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        assert_eq!(c.unusable, want);
        assert_eq!(c.calls.len(), 2);
        assert_eq!(c.calls[0].producer, None);
        assert_eq!(c.calls[0].unresolved, None, "resolved, its row missing");
        assert_eq!(c.calls[1].unresolved.as_deref(), Some("never_recorded"));
    }
}
