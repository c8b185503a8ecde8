//! The streaming pipeline (pair → order → resolve → write) on record sequences a live
//! capture produces: nested calls, late and lost records, filtered producers, per-thread
//! streams, event queries, and the raw capture replayed into the same trace. No kernel.

use crate::common::pipeline::{PID, Rows, TestSink, both, entry, exit, finish, writer};
use rocsync::calls::{
    emit::{
        Tee,
        raw::{RawWriter, Reader},
    },
    pipeline::Pipeline,
    resolve::{Row, Unresolved},
};
use rocsync_common::{Api, ENTRY_FILTERED, EntryRecord};

const E: u64 = 0x5000;
const S_A: u64 = 0xa000;
const S_B: u64 = 0xb000;

fn rows(p: Pipeline<Rows>) -> Vec<Row> {
    let (Rows(mut rows), _) = p.finish().unwrap();
    rows.sort_by_key(|r| r.call.correlation);
    rows
}

fn row(rows: &[Row], corr: u64) -> Row {
    *rows
        .iter()
        .find(|r| r.call.correlation == corr)
        .unwrap_or_else(|| panic!("no row {corr}"))
}

#[test]
fn nested_hooked_calls_are_two_calls_with_their_own_names_and_times() {
    let mut p = Pipeline::new(Rows::default(), true);
    p.entry(&entry(1, 9, Api::HipStreamSynchronizeSpt, [0, 0, 0]));
    p.entry(&entry(2, 9, Api::HipStreamSynchronize, [0, 0, 0]));
    p.exit(&exit(9, Api::HipStreamSynchronize, 2_500, 0));
    p.exit(&exit(9, Api::HipStreamSynchronizeSpt, 3_000, 0));
    let (Rows(rows), stats) = p.finish().unwrap();
    let outer = row(&rows, 1);
    let inner = row(&rows, 2);
    assert_eq!(outer.call.api, Api::HipStreamSynchronizeSpt);
    assert_eq!(inner.call.api, Api::HipStreamSynchronize);
    assert!(outer.call.enter_ns < inner.call.enter_ns);
    assert!(inner.call.exit_ns.unwrap() < outer.call.exit_ns.unwrap());
    assert_eq!(stats.calls(), 2);
    assert_eq!((stats.unpaired_entries, stats.unpaired_exits), (0, 0));
}

#[test]
fn unpaired_records_are_counted_never_dropped_silently() {
    let mut p = Pipeline::new(Rows::default(), true);
    // A record whose exit was lost, inside a synchronize that returned.
    p.entry(&entry(1, 9, Api::HipDeviceSynchronize, [0; 3]));
    p.entry(&entry(2, 9, Api::HipEventRecord, [E, S_A, 0]));
    p.exit(&exit(9, Api::HipDeviceSynchronize, 3_000, 0));
    p.entry(&entry(3, 9, Api::HipEventSynchronize, [E, 0, 0]));
    p.exit(&exit(9, Api::HipEventSynchronize, 3_600, 0));
    // An exit whose entry was lost (the thread entered calls before).
    p.exit(&exit(9, Api::HipDeviceSynchronize, 4_000, 0));
    let (Rows(rows), stats) = p.finish().unwrap();
    assert_eq!((stats.unpaired_entries, stats.unpaired_exits), (1, 1));
    assert_eq!(stats.calls_begun_before, 0);
    // The record is written with no return; whether it set the event is unknown.
    let r = row(&rows, 2);
    assert_eq!((r.call.exit_ns, r.call.ret), (None, None));
    assert_eq!(row(&rows, 3).unresolved, Some(Unresolved::ProducerLost));
}

/// Where records begin mid-call (a daemon trace switched on during a call, a flight
/// recorder's span that begins after an entry), an exit with no entry of its thread
/// before it is a call begun before: not a lost entry, counted apart; a raw capture's
/// trailer carries the count to its replay. Elsewhere (`run`, `attach`) it is unpaired,
/// as is one after an undecodable entry, and nothing is counted once stopping.
#[test]
fn an_exit_before_any_entry_of_its_thread_is_a_call_begun_before() {
    let records = |p: &mut Pipeline<Rows>| {
        p.exit(&exit(9, Api::HipStreamSynchronize, 100, 0));
        p.exit(&exit(8, Api::HipEventRecord, 120, 0));
        p.entry(&EntryRecord {
            api: u16::MAX,
            ..entry(7, 6, Api::HipEventRecord, [0; 3])
        });
        p.exit(&exit(6, Api::HipEventRecord, 130, 0));
        both(p, 1, 9, Api::HipEventRecord, [E, S_A, 0]);
        p.stopping();
        p.exit(&exit(5, Api::HipEventRecord, 140, 0));
    };
    let mut p = Pipeline::new(Rows::default(), true);
    records(&mut p);
    let (_, stats) = p.finish().unwrap();
    assert_eq!(stats.unpaired_exits, 3);
    assert_eq!(stats.calls_begun_before, 0);
    let mut p = Pipeline::new(Rows::default(), false);
    p.begins_mid_call();
    records(&mut p);
    let (_, stats) = p.finish().unwrap();
    assert_eq!((stats.unpaired_entries, stats.unpaired_exits), (0, 1));
    assert_eq!(stats.calls_begun_before, 2);
    assert_eq!(stats.calls(), 1);

    let trailer = rocsync::calls::emit::raw::Trailer {
        calls_begun_before: stats.calls_begun_before,
        ..Default::default()
    };
    let header = rocsync::calls::emit::raw::Header {
        clock_offset_ns: 0,
        start_ns: 0,
        command: vec!["app".into()],
        from_start: true,
    };
    let bytes = RawWriter::new(Vec::new(), &header)
        .unwrap()
        .finish(&trailer)
        .unwrap();
    let mut replay = Pipeline::new(Rows::default(), true);
    let mut r = Reader::new(&bytes[..]).unwrap();
    while let Some(item) = r.next_item().unwrap() {
        replay.replay(item);
    }
    let (_, again) = replay.finish().unwrap();
    assert_eq!((again.calls_begun_before, again.unpaired_exits), (2, 0));
}

#[test]
fn a_lost_record_hides_older_ones_and_a_late_one_never_replaces_a_newer() {
    let mut p = Pipeline::new(Rows::default(), true);
    both(&mut p, 1, 9, Api::HipEventRecord, [E, S_A, 0]);
    // Id 2 (a record of E on another thread) is missing: two ticks declare it lost.
    both(&mut p, 3, 9, Api::HipStreamWaitEvent, [S_B, E, 0]);
    p.tick();
    p.tick();
    both(&mut p, 4, 9, Api::HipEventRecord, [E, S_B, 0]);
    // Now the lost record arrives, after the newer record 4.
    both(&mut p, 2, 8, Api::HipEventRecord, [E, S_A, 0]);
    both(&mut p, 5, 9, Api::HipEventSynchronize, [E, 0, 0]);
    let (Rows(rows), stats) = p.finish().unwrap();
    let wait = rows.iter().find(|r| r.call.correlation == 3).unwrap();
    assert_eq!(wait.producer, None, "never the older record 1");
    assert_eq!(wait.unresolved, Some(Unresolved::ProducerLost));
    let sync = rows.iter().find(|r| r.call.correlation == 5).unwrap();
    assert_eq!(sync.producer.map(|p| p.correlation), Some(4));
    let late = rows.iter().find(|r| r.call.correlation == 2).unwrap();
    assert!(late.late);
    assert_eq!((stats.lost_ids, stats.late), (1, 1));
}

#[test]
fn a_record_filtered_by_agents_is_a_tombstone() {
    let mut p = Pipeline::new(Rows::default(), true);
    both(&mut p, 1, 9, Api::HipEventRecord, [E, S_A, 0]);
    let mut filtered = entry(2, 9, Api::HipEventRecord, [E, S_B, 0]);
    filtered.flags = ENTRY_FILTERED;
    p.entry(&filtered);
    p.exit(&exit(9, Api::HipEventRecord, 2_500, 0));
    both(&mut p, 3, 9, Api::HipStreamWaitEvent, [S_A, E, 0]);
    let (Rows(rows), stats) = p.finish().unwrap();
    let w = rows.iter().find(|r| r.call.correlation == 3).unwrap();
    assert_eq!(w.producer, None);
    assert_eq!(w.unresolved, Some(Unresolved::ProducerFiltered));
    assert_eq!(stats.filtered.get("hipEventRecord"), Some(&1));
    assert_eq!(stats.calls(), 2, "the filtered call is not written");
}

/// A packet of a queue whose record never came (made before the capture, not found at a
/// doorbell) has no track: counted, not silently left out; one of a known queue is
/// written and counted by kind.
#[test]
fn a_packet_of_an_unknown_queue_is_counted() {
    let mut p: Pipeline<TestSink> = Pipeline::new(writer(), true);
    let queue = rocsync::calls::ingest::Queue {
        pid: PID,
        tid: 9,
        created: true,
        discovered: false,
        queue: 0x7000,
        agent: 0x100,
        base: 0x8000,
        doorbell: 0x9000,
        id: 1,
        size: 64,
        ordinal: 0,
        ns: 1_000,
    };
    p.queue(&queue);
    let mut bytes = [0u8; 64];
    bytes[0] = 3; // HSA_PACKET_TYPE_BARRIER_AND
    let packet = |queue| rocsync::calls::ingest::Packet {
        pid: PID,
        tid: 9,
        ordinal: 0,
        queue,
        agent: 0x100,
        index: 0,
        ns: 2_000,
        bytes,
    };
    p.packet(&packet(0x7000));
    p.packet(&packet(0x6000));
    let t = finish(p);
    assert_eq!(t["rocsync"]["packets"]["barrier_and"], 1);
    let rows: Vec<_> = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "hsa_packet")
        .collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["args"]["queue"], "0x7000");
    assert_eq!(t["rocsync"]["drops"]["packets_unknown_queue"], 1);
}

/// Another agent's synchronize, blocked when a tick passes it over (released in flight),
/// stays out of the trace when it returns and when it never does; both are counted
/// filtered. (It used to be written on its return: a stray of another device's thread in
/// a trace restricted to agents, seen now and then in the daemon's two-trace test.)
#[test]
fn a_filtered_call_released_in_flight_is_never_written() {
    let mut p: Pipeline<TestSink> = Pipeline::new(writer(), true);
    both(&mut p, 1, 9, Api::HipEventRecord, [E, S_A, 0]);
    let filtered = |corr, tid| EntryRecord {
        flags: ENTRY_FILTERED,
        ..entry(corr, tid, Api::HipStreamSynchronize, [S_B, 0, 0])
    };
    p.entry(&filtered(2, 8));
    p.tick();
    both(&mut p, 3, 9, Api::HipStreamWaitEvent, [S_A, E, 0]);
    p.exit(&exit(8, Api::HipStreamSynchronize, 3_900, 0));
    p.entry(&filtered(4, 7));
    p.tick();
    let (sink, stats) = p.finish().unwrap();
    let (live, _, _) = sink.into_parts();
    let trace: serde_json::Value = serde_json::from_str(&finish_writer(live, &stats)).unwrap();
    let written: Vec<(String, u64)> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "cuda_runtime")
        .map(|e| {
            let corr = e["args"]["correlation"].as_u64().unwrap();
            (e["name"].as_str().unwrap().to_string(), corr)
        })
        .collect();
    assert_eq!(
        written,
        [
            ("hipEventRecord".to_string(), 1),
            ("hipStreamWaitEvent".to_string(), 3)
        ]
    );
    assert_eq!(stats.filtered.get("hipStreamSynchronize"), Some(&2));
}

#[test]
fn per_thread_default_streams_are_one_per_thread() {
    let mut p = Pipeline::new(Rows::default(), true);
    both(&mut p, 1, 10, Api::HipStreamSynchronizeSpt, [0, 0, 0]);
    both(&mut p, 2, 11, Api::HipStreamSynchronizeSpt, [0, 0, 0]);
    both(&mut p, 3, 10, Api::HipStreamSynchronize, [2, 0, 0]);
    both(&mut p, 4, 10, Api::HipStreamSynchronize, [0, 0, 0]);
    let rows = rows(p);
    let idx = |c| row(&rows, c).stream_index.unwrap();
    assert_ne!(idx(1), idx(2), "two threads' per-thread streams");
    assert_eq!(idx(1), idx(3), "hipStreamPerThread is the _spt stream 0");
    assert_ne!(idx(4), idx(1), "the legacy null stream is another stream");
}

#[test]
fn a_stream_handle_reused_after_destroy_is_a_new_stream() {
    let mut p = Pipeline::new(Rows::default(), true);
    let out = |p: &mut Pipeline<Rows>, corr, api, args| {
        p.entry(&entry(corr, 9, api, args));
        let mut x = exit(9, api, 1_000 * corr + 500, 0);
        if api == Api::HipStreamCreate {
            x.out = S_A;
            x.flags = rocsync_common::EXIT_OUT_READ;
        }
        p.exit(&x);
    };
    out(&mut p, 1, Api::HipStreamCreate, [0x7ff0, 0, 0]);
    out(&mut p, 2, Api::HipStreamSynchronize, [S_A, 0, 0]);
    out(&mut p, 3, Api::HipStreamDestroy, [S_A, 0, 0]);
    out(&mut p, 4, Api::HipStreamCreate, [0x7ff0, 0, 0]);
    out(&mut p, 5, Api::HipStreamSynchronize, [S_A, 0, 0]);
    let rows = rows(p);
    assert_eq!(
        row(&rows, 1).call.args[0],
        S_A,
        "the created handle, read at return"
    );
    assert_ne!(row(&rows, 2).stream_index, row(&rows, 5).stream_index);
}

#[test]
fn event_query_resolves_like_event_synchronize() {
    let mut p = Pipeline::new(writer(), true);
    both(&mut p, 1, 9, Api::HipEventQuery, [E, 0, 0]);
    both(&mut p, 2, 9, Api::HipEventRecord, [E, S_A, 0]);
    p.entry(&entry(3, 9, Api::HipEventQuery, [E, 0, 0]));
    // hipErrorNotReady: still a wait on the event, with its code.
    p.exit(&exit(9, Api::HipEventQuery, 3_500, 600));
    let t = finish(p);
    let ev = t["traceEvents"].as_array().unwrap();
    let find = |cat: &str, corr: u64| {
        ev.iter()
            .find(|e| e["cat"] == cat && e["args"]["correlation"] == corr)
            .unwrap_or_else(|| panic!("{cat} {corr}"))
            .clone()
    };
    let before = find("cuda_runtime", 1);
    assert_eq!(before["args"]["hip_sync_kind"], "event_query");
    assert_eq!(before["args"]["wait_on_hip_event_record_corr_id"], -1);
    assert_eq!(before["args"]["wait_on_unknown_reason"], "never_recorded");
    let after = find("cuda_runtime", 3);
    assert_eq!(after["args"]["wait_on_hip_event_record_corr_id"], 2);
    assert_eq!(after["args"]["ret"], 600);
    let device = find("cuda_sync", 3);
    assert_eq!(device["name"], "Event Sync");
    assert_eq!(device["args"]["wait_on_cuda_event_record_corr_id"], 2);
}

/// A live-like sequence through the pipeline with a raw capture beside the trace; the
/// raw capture replayed (as `convert` does) must give the same trace.
#[test]
fn the_raw_capture_replays_into_the_same_trace() {
    let raw = tempfile::NamedTempFile::new().unwrap();
    let header = rocsync::calls::emit::raw::Header {
        clock_offset_ns: 1_700_000_000_000_000_000,
        start_ns: 0,
        command: vec!["app".into()],
        from_start: true,
    };
    let raw_writer = RawWriter::new(std::fs::File::create(raw.path()).unwrap(), &header).unwrap();
    let (live_writer, _, _) = writer().into_parts();
    let mut p = Pipeline::new(Tee::new(live_writer, Some(raw_writer)), true);
    both(&mut p, 1, 9, Api::HipEventRecord, [E, S_A, 0]);
    // A blocked synchronize, released in flight, returning after later calls.
    p.entry(&entry(2, 8, Api::HipDeviceSynchronize, [0; 3]));
    both(&mut p, 3, 9, Api::HipStreamWaitEvent, [S_B, E, 0]);
    p.tick();
    p.tick();
    both(&mut p, 5, 9, Api::HipEventSynchronize, [E, 0, 0]);
    p.exit(&exit(8, Api::HipDeviceSynchronize, 9_000, 0));
    p.tick();
    p.tick();
    p.entry(&entry(6, 9, Api::HipStreamSynchronize, [S_A, 0, 0]));
    let (sink, live_stats) = p.finish().unwrap();
    let (live, raw_out, _) = sink.into_parts();
    raw_out.unwrap().finish(&Default::default()).unwrap();
    let live = finish_writer(live, &live_stats);

    let file = std::io::BufReader::new(std::fs::File::open(raw.path()).unwrap());
    let mut reader = Reader::new(file).unwrap();
    let mut q: Pipeline<TestSink> = Pipeline::new(writer(), reader.header.from_start);
    while let Some(item) = reader.next_item().unwrap() {
        q.replay(item);
    }
    let (sink, stats) = q.finish().unwrap();
    let (replayed, _, _) = sink.into_parts();
    assert_eq!(stats.lost_ids, 1);
    assert_eq!(stats.per_api, live_stats.per_api);
    assert_eq!(finish_writer(replayed, &stats), live);
}

fn finish_writer(
    w: rocsync::calls::emit::kineto::KinetoWriter<Vec<u8>>,
    s: &rocsync::calls::stats::CaptureStats,
) -> String {
    let names = Default::default();
    let info = rocsync::calls::emit::kineto::TraceInfo {
        process_names: &names,
        rocsync: s.to_json(),
        distributed: serde_json::json!({}),
        trace_name: "t",
    };
    String::from_utf8(w.finish(&info).unwrap()).unwrap()
}
