//! Call rows: the runtime row of every call, and for synchronisations the CUPTI-shaped
//! device row with its `ac2g` and record→wait arrows.

use std::io::{self, Write};

use rocsync_common::{Api, Backend, Op};

use super::{
    collectives,
    packets::{CALL_PACKET_CAT, Queues},
    rows::Rows,
};
use crate::calls::{
    backend::Runtime,
    emit::{comms::Comms, json::JsonBuf},
    resolve::{Row, SyncKind},
};

/// Stream Sync rows get their own track, as Kineto does, so they never overlap the
/// stream's other rows.
pub(crate) const SYNC_TID_OFFSET: i64 = 1_000_000;
/// Track of device-wide rows (Event Sync, Context Sync). Not 1, as Kineto's CUDA side
/// writes it: ROCm stream indices start at 1.
pub(crate) const DEVICE_TID: i64 = 2_000_000;
/// Record→wait flow ids: disjoint from the `ac2g` ids (correlations), below 2^53.
const DEP_FLOW_BASE: u64 = 1 << 40;
const DEP_CAT: &str = "hip_sync_dep";

/// Writes one call: its runtime row and, for synchronisations, the device row and the
/// arrows (to the barrier packets of `queues`); an NCCL call's row learns `comms`. A
/// call still in flight ends at the latest time seen.
pub(super) fn row<W: Write>(
    rows: &mut Rows<W>,
    queues: &Queues,
    comms: &mut Comms,
    r: &Row,
) -> io::Result<()> {
    let c = &r.call;
    // Counted by the pipeline, never written: as a row in order or, released in
    // flight, on its return.
    if c.filtered {
        return Ok(());
    }
    if c.api.backend() == Backend::Nccl {
        return collectives::row(rows, comms, r);
    }
    rows.last_ns = rows.last_ns.max(c.exit_ns.unwrap_or(c.enter_ns));
    if !cpu_row(c.api) {
        return Ok(());
    }
    rows.threads.insert((c.pid, c.tid));
    let end = c.exit_ns.unwrap_or(rows.last_ns).max(c.enter_ns);
    let dur = i64::try_from(end - c.enter_ns).unwrap_or(i64::MAX);
    let ts = rows.ts(c.enter_ns);
    // Flow events bind to the slice enclosing them: put them strictly inside.
    let mid = ts.saturating_add(dur / 2);
    let (pid, tid) = (c.pid as i64, c.tid as i64);
    let j = rows.slice("cuda_runtime", c.api.symbol(), pid, tid, ts, dur);
    j.s("\"cid\":")
        .u(c.api as u64)
        .s(",\"correlation\":")
        .u(c.correlation);
    match c.ret {
        Some(ret) => j.s(",\"ret\":").i(ret),
        None => j.s(",\"in_flight\":true"),
    };
    if r.late {
        j.s(",\"late\":true");
    }
    runtime_fields(j, r);
    j.s("}}");
    if let Some(p) = r.producer {
        // The record side of the arrow, on the record's own slice.
        let at = (pid, p.tid as i64, rows.ts(p.mid_ns));
        rows.flow("s", DEP_FLOW_BASE | c.correlation, at, DEP_CAT);
    }
    if let Some(kind) = r.sync {
        sync_row(rows, r, kind, ts, dur, mid);
    }
    if let Some(b) = r.barrier
        && let Some((agent, track)) = queues.track_of(b.queue)
    {
        let to = (agent as i64, track, rows.ts(b.ns));
        rows.arrow((pid, tid, mid), to, CALL_PACKET_CAT);
    }
    rows.j.end()
}

/// The device-side row of a synchronisation, as CUPTI's activity would be written.
fn sync_row<W: Write>(rows: &mut Rows<W>, r: &Row, kind: SyncKind, ts: i64, dur: i64, mid: i64) {
    let c = &r.call;
    let dev = r.device as i64;
    let tid = sync_tid(kind, r);
    rows.flow(
        "s",
        c.correlation,
        (c.pid as i64, c.tid as i64, mid),
        "ac2g",
    );
    rows.tracks.insert((r.device, tid));
    let stream = match kind {
        SyncKind::StreamSynchronize | SyncKind::StreamWaitEvent => r.stream_index.unwrap_or(-1),
        _ => -1,
    };
    let name = kind.cupti_name();
    let (ts, dur) = whole_us(ts, dur);
    let j = rows.slice("cuda_sync", name, dev, tid, ts, dur);
    j.s("\"External id\":")
        .u(c.correlation)
        .s(",\"cuda_sync_kind\":\"")
        .s(name)
        .s("\"");
    if kind.waits_on_event() {
        let (ws, wc) = r
            .producer
            .map_or((-1, -1), |p| (p.stream_index, p.correlation as i64));
        j.s(",\"wait_on_stream\":")
            .i(ws)
            .s(",\"wait_on_cuda_event_record_corr_id\":")
            .i(wc)
            .s(",\"wait_on_cuda_event_id\":")
            .u(r.event_id.unwrap_or(0));
        unknown_reason(j, r);
    }
    j.s(",\"stream\":")
        .i(stream)
        .s(",\"correlation\":")
        .u(c.correlation)
        .s(",\"device\":")
        .i(dev);
    j.s("}}");
    rows.flow("f", c.correlation, (dev, tid, mid), "ac2g");
    if r.producer.is_some() {
        rows.flow("f", DEP_FLOW_BASE | c.correlation, (dev, tid, mid), DEP_CAT);
    }
}

/// The device row's span widened outward to whole microseconds. HTA rounds every row
/// inward (start up, end down, to µs): a sync call shorter than a microsecond would become
/// a row of negative length there, and its temporal breakdown asserts on such rows. The
/// runtime row keeps the call's exact times.
fn whole_us(ts: i64, dur: i64) -> (i64, i64) {
    let start = ts.div_euclid(1000) * 1000;
    let end = ts.saturating_add(dur);
    let end = end
        .div_euclid(1000)
        .saturating_add(i64::from(end.rem_euclid(1000) != 0))
        * 1000;
    (start, end.max(start + 1000) - start)
}

/// Kineto leaves device selection out of traces; so does rocsync.
fn cpu_row(api: Api) -> bool {
    !matches!(api.op(), Op::SetDevice | Op::GetDevice)
}

fn sync_tid(kind: SyncKind, r: &Row) -> i64 {
    match kind {
        SyncKind::StreamWaitEvent => r.stream_index.unwrap_or(DEVICE_TID),
        SyncKind::StreamSynchronize => r.stream_index.map_or(DEVICE_TID, |i| i + SYNC_TID_OFFSET),
        SyncKind::EventSynchronize | SyncKind::EventQuery | SyncKind::DeviceSynchronize => {
            DEVICE_TID
        }
    }
}

fn unknown_reason<W: Write>(j: &mut JsonBuf<W>, r: &Row) {
    if let Some(why) = r.unresolved {
        j.s(",\"wait_on_unknown_reason\":\"").s(why.name()).s("\"");
    }
}

/// The runtime's own fields (`hip_*` or `cuda_*`) on the runtime row: handles as `"0x…"`
/// strings — the producer's stream too, equal to the record row's stream handle, as the
/// Kineto roctracer change writes it — and the record's correlation as an integer.
fn runtime_fields<W: Write>(j: &mut JsonBuf<W>, r: &Row) {
    let c = &r.call;
    let backend = c.api.backend();
    let p = Runtime::of(backend).field_prefix;
    let cuda = matches!(backend, Backend::Cuda | Backend::CudaDriver);
    if let Some(kind) = r.sync {
        let name = if cuda {
            kind.cupti_name()
        } else {
            kind.hip_name()
        };
        j.s(",\"").s(p).s("_sync_kind\":\"").s(name).s("\"");
    }
    let event = c.event();
    if let Some(e) = event {
        j.s(",\"").s(p).s("_event\":").hex(e);
    }
    if let Some(s) = c.stream() {
        j.s(",\"").s(p).s("_stream\":").hex(s);
    }
    let Some(e) = event.filter(|_| r.sync.is_some_and(SyncKind::waits_on_event)) else {
        return;
    };
    j.s(",\"wait_on_stream\":");
    match r.producer {
        Some(pr) => j.hex(pr.stream),
        None => j.i(-1),
    };
    j.s(",\"wait_on_").s(p).s("_event_id\":");
    // CUDA names the event by its id, as CUPTI does; HIP by its handle.
    if cuda {
        j.u(r.event_id.unwrap_or(0));
    } else {
        j.hex(e);
    }
    j.s(",\"wait_on_")
        .s(p)
        .s("_event_record_corr_id\":")
        .i(r.producer.map_or(-1, |p| p.correlation as i64));
    unknown_reason(j, r);
}

#[cfg(test)]
mod tests {
    use super::whole_us;

    #[test]
    fn device_rows_span_whole_microseconds_around_the_call() {
        // Inside one microsecond: the whole microsecond.
        assert_eq!(whole_us(183_200, 700), (183_000, 1000));
        // Across a boundary: both microseconds it touches.
        assert_eq!(whole_us(183_900, 200), (183_000, 2000));
        // Already whole: unchanged.
        assert_eq!(whole_us(5000, 3000), (5000, 3000));
        // Zero length: still a microsecond, so HTA keeps a positive row.
        assert_eq!(whole_us(7000, 0), (7000, 1000));
    }
}
