//! ROCm: Kineto's rocprofiler-sdk backend writes each HIP call as a runtime row
//! (`cat: cuda_runtime`, name = the HIP API, args `cid` and `correlation`) and no sync
//! row at all (`RocprofActivity.h`, `RocprofLogger.cpp`: no CUDA_SYNC anywhere). Annotate
//! adds, for each sync call it matched, the row CUPTI would have written
//! (`CudaSyncActivity`: cat `cuda_sync`, CUPTI's names and argument order), tied to the
//! trace's own rows: `correlation` and `External id` of the HIP runtime row, the host
//! API window as ts/dur, streams in the trace's numbering, and
//! `wait_on_cuda_event_record_corr_id` = the correlation of the record's runtime row.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::{
    cuda,
    process::Process,
    profile::RuntimeRow,
    streams::Stream,
    summary::{Reason, Summary},
};
use crate::calls::{
    emit::kineto::{DEVICE_TID, SYNC_TID_OFFSET},
    resolve::{Row, SyncKind},
};

/// The rows to append to `traceEvents`.
pub(super) fn add(p: &mut Process, s: &mut Summary) -> Vec<String> {
    // Kineto numbers a device's streams 1.. by first appearance of a launch or copy.
    let mut profiler_max: HashMap<i64, i64> = HashMap::new();
    for d in &p.profile.device {
        if d.stream >= 0 {
            let m = profiler_max.entry(d.device).or_default();
            *m = (*m).max(d.stream);
        }
    }
    let mut rows_out = Vec::new();
    let mut tracks: BTreeSet<(i64, i64)> = BTreeSet::new();
    let mut known: HashSet<(i64, i64)> = HashSet::new();
    let mut ordered: Vec<&RuntimeRow> = p
        .profile
        .runtime
        .iter()
        .filter(|r| r.pid == p.pid && r.op.is_some_and(|o| o.waits()))
        .collect();
    ordered.sort_by_key(|r| r.start_ns);
    for r in ordered {
        let Some(row) = p
            .matches
            .to_rocsync
            .get(&r.correlation)
            .and_then(|rc| p.rows.get(rc))
            .copied()
        else {
            s.waits.leave(Reason::NoCall);
            continue;
        };
        let Some(kind) = row.sync else { continue };
        let own = match kind {
            SyncKind::StreamWaitEvent | SyncKind::StreamSynchronize => {
                let Some(index) = row.stream_index else {
                    continue;
                };
                match stream_id(p, (row.device, index), &profiler_max, s) {
                    Some(id) => id,
                    None => {
                        s.waits.leave(Reason::StreamUnknown);
                        continue;
                    }
                }
            }
            _ => -1,
        };
        let producer = kind
            .waits_on_event()
            .then(|| producer(p, row, &profiler_max, s));
        let (ws, wr) = match producer {
            Some(Ok(w)) => w,
            Some(Err(why)) => {
                *s.waits
                    .added_without_producer
                    .entry(why.name().into())
                    .or_default() += 1;
                (-1, -1)
            }
            None => (-1, -1),
        };
        let dev = row.device as i64;
        let tid = match kind {
            SyncKind::StreamWaitEvent => own,
            SyncKind::StreamSynchronize => own + SYNC_TID_OFFSET,
            _ => DEVICE_TID,
        };
        if known.insert((dev, tid)) {
            tracks.insert((dev, tid));
        }
        rows_out.push(sync_row(r, row, kind, dev, tid, own, (ws, wr)));
        rows_out.push(format!(
            r#"{{"ph": "f", "id": {c}, "pid": {dev}, "tid": {tid}, "ts": {ts}, "cat": "ac2g", "name": "ac2g", "bp": "e"}}"#,
            c = r.correlation,
            ts = r.ts_text
        ));
        *s.waits.added.entry(kind.cupti_name().into()).or_default() += 1;
    }
    for (dev, tid) in tracks {
        let name = match tid {
            DEVICE_TID => format!("Device {dev}"),
            t if t >= SYNC_TID_OFFSET => format!("stream {} (sync)", t - SYNC_TID_OFFSET),
            t => format!("stream {t} "),
        };
        rows_out.push(format!(
            r#"{{"ph": "M", "name": "thread_name", "pid": {dev}, "tid": {tid}, "args": {{"name": "{name}"}}}}"#
        ));
    }
    rows_out
}

/// The profiler's id of a rocsync stream: learned, or numbered after the profiler's own
/// when the profiler showed no stream on that device (so no number can be one of its).
fn stream_id(p: &mut Process, st: Stream, max: &HashMap<i64, i64>, s: &mut Summary) -> Option<i64> {
    if let Some(id) = p.streams.get(st) {
        return Some(id.1);
    }
    if max.contains_key(&(st.0 as i64)) {
        return None;
    }
    s.streams.numbered_new += 1;
    Some(p.streams.number_new(st, max).1)
}

fn producer(
    p: &mut Process,
    row: &Row,
    max: &HashMap<i64, i64>,
    s: &mut Summary,
) -> Result<(i64, i64), Reason> {
    let pr = match (row.producer, row.unresolved) {
        (Some(pr), _) => pr,
        (None, Some(u)) => return Err(Reason::Unresolved(u.name())),
        (None, None) => return Err(Reason::Unresolved("no_event")),
    };
    match cuda::in_profile(p, &pr) {
        Err(Reason::ProducerStreamUnknown) => {
            let record = *p
                .matches
                .to_profiler
                .get(&pr.correlation)
                .ok_or(Reason::ProducerNotInProfile)?;
            let id = stream_id(p, (pr.device, pr.stream_index), max, s)
                .ok_or(Reason::ProducerStreamUnknown)?;
            Ok((id, record))
        }
        other => other,
    }
}

/// One `cuda_sync` row, keys in `CudaSyncActivity`'s order.
fn sync_row(
    r: &RuntimeRow,
    row: &Row,
    kind: SyncKind,
    dev: i64,
    tid: i64,
    stream: i64,
    (ws, wr): (i64, i64),
) -> String {
    let name = kind.cupti_name();
    let mut args = format!(
        r#""External id": {}, "cuda_sync_kind": "{name}""#,
        r.external_id.unwrap_or(r.correlation)
    );
    if kind.waits_on_event() {
        args.push_str(&format!(
            r#", "wait_on_stream": {ws}, "wait_on_cuda_event_record_corr_id": {wr}, "wait_on_cuda_event_id": {}"#,
            row.event_id.unwrap_or(0)
        ));
    }
    args.push_str(&format!(
        r#", "stream": {stream}, "correlation": {}, "device": {dev}, "rocsync_correlation": {}"#,
        r.correlation, row.call.correlation
    ));
    format!(
        r#"{{"ph": "X", "cat": "cuda_sync", "name": "{name}", "pid": {dev}, "tid": {tid}, "ts": {}, "dur": {}, "args": {{{args}}}}}"#,
        r.ts_text, r.dur_text
    )
}
