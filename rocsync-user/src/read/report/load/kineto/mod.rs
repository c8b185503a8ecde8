//! A Kineto trace rocsync wrote, read back into the report's [`Capture`]: runtime rows
//! (`cuda_runtime`) for the calls and their `hip_*`/`cuda_*` fields, the device sync rows
//! (`cuda_sync`) for the device and the streams' numbers, NCCL/RCCL rows, HSA packets and
//! thread names ([`others`]), and the `rocsync` object for the drop counters and the
//! daemon's word. Every other event is counted by kind. Each row is made compact as it
//! streams by (its names shared, its handles parsed), within the report's bound in bytes
//! ([`Held`]).

mod event;
mod others;

use event::{Args, Event, hex, ns};

use std::{collections::BTreeMap, io::BufRead, mem::size_of, rc::Rc};

use anyhow::Result;
use serde::Deserialize;

use super::{
    fields::{Counters, Object, Scalar},
    held::{Held, Refused},
    stream,
};
use crate::read::report::{
    capture::{Capture, Observed, Produced, waits_on_event},
    word::Parameters,
};

#[derive(Default, Deserialize)]
#[serde(default)]
struct Rocsync {
    drops: Object<Counters>,
    /// `run`/`attach` ended early at their size bound.
    truncated: Scalar,
    parameters: Object<Parameters>,
}

/// A device sync row as kept by its call's correlation: its name, device, the number of
/// its stream and of the recording stream (`-1`: none).
struct DeviceRow {
    name: Rc<str>,
    device: i32,
    stream: Option<i64>,
    producer: Option<i64>,
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
const SYNC_COST: usize = size_of::<(u64, DeviceRow)>() + 32;

pub(in crate::read::report) fn read(input: impl BufRead) -> Result<Capture> {
    read_within(input, crate::read::input::MAX_HELD)
}

fn read_within(input: impl BufRead, max_held: u64) -> Result<Capture> {
    let mut held = Held::new(max_held);
    let mut capture = Capture::default();
    // The runtime rows, made compact; the calls are made once every row is read.
    let mut runtime = Vec::new();
    // The device sync row of each call, by correlation.
    let mut device_rows: BTreeMap<u64, DeviceRow> = BTreeMap::new();
    let mut names = others::Names::new();
    // Rows past what the report holds, by kind and reason.
    let mut past: BTreeMap<(&str, Refused), u64> = BTreeMap::new();
    let trace: stream::Trace<Rocsync> = stream::read(input, |e: Event| {
        let (kind, kept) = if e.ph == "X" && e.cat == "cuda_runtime" {
            let kept = runtime_row(&e, &mut held).map(|r| runtime.push(r));
            ("cuda_runtime rows", kept)
        } else if e.ph == "X" && e.cat == "cuda_sync" {
            let a = e.args.0.unwrap_or_default();
            let (Some(corr), Some(name), Some(dev)) =
                (a.correlation.as_u64(), e.name.as_str(), e.pid.as_i64())
            else {
                capture.unusable("cuda_sync row without correlation, name or device");
                return;
            };
            let index = |v: &Scalar| v.as_i64().filter(|&i| i >= 0);
            // Its name first: a row refused takes nothing of the budget.
            let kept = held.name(name).and_then(|name| {
                held.take(SYNC_COST)?;
                let row = DeviceRow {
                    name,
                    device: dev as i32,
                    stream: index(&a.stream),
                    producer: index(&a.wait_on_stream),
                };
                device_rows.insert(corr, row);
                Ok(())
            });
            ("cuda_sync rows", kept)
        } else {
            match others::take(&e, &mut held, &mut capture, &mut names) {
                Ok(()) => return,
                Err((kind, why)) => (kind, Err(why)),
            }
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
        let sync = device_row.map(|d| d.name.clone());
        let waits = sync.as_deref().is_some_and(waits_on_event);
        let producer = match (waits, r.record) {
            (true, Some(rec)) if rec >= 0 => {
                let rec = rec as u64;
                match (rows_by_corr.get(&rec), r.wait_on_stream) {
                    (Some(&(ptid, pts, pdur)), Some(stream)) => Some(Produced {
                        correlation: rec,
                        stream,
                        stream_index: device_row.and_then(|d| d.producer),
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
            device: device_row.map(|d| d.device),
            stream: r.stream,
            stream_index: device_row.and_then(|d| d.stream),
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
    if let Some(t) = trace.rocsync.truncated.as_str() {
        capture
            .lost_besides
            .insert(format!("trace ended early ({t})"), 1);
    }
    if let Some(p) = trace.rocsync.parameters.0 {
        capture.lost_besides.extend(p.losses());
        if let Some((word, cut)) = p.word() {
            capture.word = Some(word);
            capture.cut(
                "stack frames, threads or steps past the report's bounds".into(),
                cut,
            );
        }
    }
    // The names of the threads that made calls.
    for c in &capture.calls {
        if let Some(n) = names.get(&(u64::from(c.pid), u64::from(c.tid))) {
            capture.thread_names.insert((c.pid, c.tid), n.clone());
        }
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

#[cfg(test)]
mod tests;
