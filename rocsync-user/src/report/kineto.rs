//! A Kineto trace rocsync wrote, read back into the report's [`Capture`]: runtime rows
//! (`cuda_runtime`) for the calls and their `hip_*`/`cuda_*` fields, the device sync rows
//! (`cuda_sync`) for the device, and the `rocsync` object for the drop counters. Each row
//! is made compact as it streams by (its names shared, its handles parsed), within the
//! report's bound in bytes ([`Held`]).

use std::{collections::BTreeMap, io::BufRead, mem::size_of, rc::Rc};

use anyhow::Result;
use serde::Deserialize;

use super::{
    capture::{Capture, Observed, Produced, waits_on_event},
    fields::{Counters, Object, Scalar},
    held::{Held, Refused},
    stream,
};

/// What the report reads of an event: a runtime or device sync row's fields, each as
/// the trace has it (a field of the wrong type is a row it cannot use, not an error).
#[derive(Default, Deserialize)]
#[serde(default)]
struct Event {
    ph: Scalar,
    cat: Scalar,
    name: Scalar,
    pid: Scalar,
    tid: Scalar,
    ts: Scalar,
    dur: Scalar,
    args: Object<Args>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct Args {
    correlation: Scalar,
    in_flight: Scalar,
    hip_stream: Scalar,
    cuda_stream: Scalar,
    wait_on_stream: Scalar,
    wait_on_hip_event_record_corr_id: Scalar,
    wait_on_cuda_event_record_corr_id: Scalar,
    wait_on_unknown_reason: Scalar,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct Rocsync {
    drops: Object<Counters>,
}

/// A runtime row as the report keeps it until the calls are made: its fields parsed,
/// its names shared.
struct Runtime {
    api: Option<Rc<str>>,
    pid: Option<u64>,
    tid: Option<u64>,
    correlation: Option<u64>,
    ts: Option<f64>,
    dur: Option<f64>,
    in_flight: bool,
    /// The call's stream, and the record a wait resolved to: the `cuda_*` fields for the
    /// runtime's `cuda*` and the driver's `cu*` calls, the `hip_*` fields otherwise.
    stream: Option<u64>,
    record: Option<i64>,
    wait_on_stream: Option<u64>,
    reason: Option<Rc<str>>,
}

/// What a runtime row costs until the report is made: the row, its call, and its entry
/// among the producers by correlation.
const RUNTIME_COST: usize = size_of::<Runtime>() + size_of::<Observed>() + 64;
/// A device sync row's entry by correlation.
const SYNC_COST: usize = size_of::<(u64, (Rc<str>, i32))>() + 32;

pub fn read(input: impl BufRead) -> Result<Capture> {
    read_within(input, crate::input::MAX_HELD)
}

fn read_within(input: impl BufRead, max_held: u64) -> Result<Capture> {
    let mut held = Held::new(max_held);
    let mut capture = Capture::default();
    // Only runtime and device sync rows are kept: every other event passes by.
    let mut runtime = Vec::new();
    // The device sync row of each call, by correlation: its name and device.
    let mut device_rows: BTreeMap<u64, (Rc<str>, i32)> = BTreeMap::new();
    // Rows past what the report holds, by kind and reason.
    let mut past: BTreeMap<(&str, Refused), u64> = BTreeMap::new();
    let trace: stream::Trace<Rocsync> = stream::read(input, |e: Event| {
        if e.ph != "X" {
            return;
        }
        let (kind, kept) = if e.cat == "cuda_runtime" {
            let kept = runtime_row(&e, &mut held).map(|r| runtime.push(r));
            ("cuda_runtime rows", kept)
        } else if e.cat == "cuda_sync" {
            let a = e.args.0.unwrap_or_default();
            let (Some(corr), Some(name), Some(dev)) =
                (a.correlation.as_u64(), e.name.as_str(), e.pid.as_i64())
            else {
                capture.unusable("cuda_sync row without correlation, name or device");
                return;
            };
            // Its name first: a row refused takes nothing of the budget.
            let kept = held.name(name).and_then(|name| {
                held.take(SYNC_COST)?;
                device_rows.insert(corr, (name, dev as i32));
                Ok(())
            });
            ("cuda_sync rows", kept)
        } else {
            return;
        };
        if let Err(why) = kept {
            *past.entry((kind, why)).or_default() += 1;
        }
    })?;
    capture.cut(stream::cut_reason(), trace.cut.strings);
    for ((kind, why), n) in past {
        capture.cut(held.why(why, kind), n);
    }
    // Record rows by correlation: the producer's thread and time.
    let mut rows_by_corr: BTreeMap<u64, (u32, i64, i64)> = BTreeMap::new();
    for r in &runtime {
        if let (Some(c), Some(tid), Some(ts), Some(dur)) = (r.correlation, r.tid, r.ts, r.dur) {
            rows_by_corr.insert(c, (tid as u32, ns(ts), ns(dur)));
        }
    }
    let unknown: Rc<str> = "unknown".into();
    for r in runtime {
        let (Some(api), Some(corr), Some(pid), Some(tid), Some(ts), Some(dur)) =
            (r.api, r.correlation, r.pid, r.tid, r.ts, r.dur)
        else {
            capture.unusable("cuda_runtime row without name, correlation, pid, tid, ts or dur");
            continue;
        };
        if r.in_flight {
            capture.unusable("call still in flight at the end (no duration)");
            continue;
        }
        let device_row = device_rows.get(&corr);
        let sync = device_row.map(|(n, _)| n.clone());
        let waits = sync.as_deref().is_some_and(waits_on_event);
        let producer = match (waits, r.record) {
            (true, Some(rec)) if rec >= 0 => {
                let rec = rec as u64;
                match (rows_by_corr.get(&rec), r.wait_on_stream) {
                    (Some(&(ptid, pts, pdur)), Some(stream)) => Some(Produced {
                        correlation: rec,
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
        let resolved = r.record.is_some_and(|rec| rec >= 0);
        let unresolved = (waits && !resolved).then(|| r.reason.unwrap_or(unknown.clone()));
        capture.calls.push(Observed {
            api,
            pid: pid as u32,
            tid: tid as u32,
            correlation: corr,
            start_ns: ns(ts),
            blocked_ns: ns(dur),
            sync,
            device: device_row.map(|&(_, d)| d),
            stream: r.stream,
            producer,
            unresolved,
        });
    }
    match trace.rocsync.drops.0 {
        Some(drops) => {
            for (k, v) in drops.kept {
                match v.as_u64() {
                    Some(n) => {
                        capture.losses.insert(k, n);
                    }
                    None => capture.unusable("drop counter that is not a count"),
                }
            }
            let why = format!("drop counters past the report's {}", Counters::MAX);
            capture.cut(why, drops.past);
        }
        None => capture.unusable("no drop counters in the rocsync object"),
    }
    capture.rebase();
    Ok(capture)
}

/// A runtime row made compact, its names held: what it costs is taken from `held`.
fn runtime_row(e: &Event, held: &mut Held) -> Result<Runtime, Refused> {
    let a = e.args.0.as_ref();
    let field = |f: fn(&Args) -> &Scalar| a.map_or(&Scalar::Absent, f);
    let name = e.name.as_str();
    // The runtime's `cuda*` and the driver's `cu*` alike.
    let cuda = name.is_some_and(|n| n.starts_with("cu"));
    let (stream, record) = match cuda {
        true => (
            field(|a| &a.cuda_stream),
            field(|a| &a.wait_on_cuda_event_record_corr_id),
        ),
        false => (
            field(|a| &a.hip_stream),
            field(|a| &a.wait_on_hip_event_record_corr_id),
        ),
    };
    let reason = field(|a| &a.wait_on_unknown_reason).as_str();
    // Its names first: a row refused takes nothing of the budget.
    let api = name.map(|n| held.name(n)).transpose()?;
    let reason = reason.map(|r| held.name(r)).transpose()?;
    held.take(RUNTIME_COST)?;
    Ok(Runtime {
        api,
        pid: e.pid.as_u64(),
        tid: e.tid.as_u64(),
        correlation: field(|a| &a.correlation).as_u64(),
        ts: e.ts.as_f64(),
        dur: e.dur.as_f64(),
        in_flight: *field(|a| &a.in_flight) == Scalar::Bool(true),
        stream: hex(stream),
        record: record.as_i64(),
        wait_on_stream: hex(field(|a| &a.wait_on_stream)),
        reason,
    })
}

/// Trace µs (3 decimals) to ns.
fn ns(us: f64) -> i64 {
    (us * 1000.0).round() as i64
}

/// A `"0x…"` handle.
fn hex(v: &Scalar) -> Option<u64> {
    u64::from_str_radix(v.as_str()?.strip_prefix("0x")?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

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
    fn rows_past_the_bound_in_bytes_are_counted_not_kept() {
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
        // Three rows and their one name.
        let max = 3 * RUNTIME_COST + "hipEventRecord".len() + 64;
        let capture = read_within(t.to_string().as_bytes(), max as u64).unwrap();
        assert_eq!(capture.calls.len(), 3);
        let why = format!("cuda_runtime rows past the report's bound of {max} bytes held");
        assert_eq!(capture.cut, BTreeMap::from([(why, 2)]));
        assert!(capture.unusable.is_empty(), "{:?}", capture.unusable);
    }

    /// Names and handles of 20 KB are read as their first KiB: the calls are reported,
    /// their names held once, and the cut said.
    #[test]
    fn long_strings_are_cut_and_names_held_once() {
        let long = "x".repeat(20_000);
        let events: Vec<Value> = (0..3)
            .map(|i| {
                let args = serde_json::json!({"hip_stream": format!("0x{long}")});
                runtime(&format!("hipStreamSynchronize{long}"), i, 3, 0.0, args)
            })
            .collect();
        let c = trace(Value::Array(events));
        assert_eq!(c.calls.len(), 3);
        assert_eq!(c.calls[0].api.len(), crate::input::MAX_STRING);
        assert!(Rc::ptr_eq(&c.calls[0].api, &c.calls[2].api), "held once");
        assert_eq!(c.calls[0].stream, None, "no handle is 20 KB");
        assert_eq!(c.cut[&stream::cut_reason()], 6);
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
