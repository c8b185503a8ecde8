//! The raw format written and read back: round trips and hostile lines.

use std::io::Write as _;

use super::read::*;
use crate::calls::emit::{
    Sink,
    raw::{Header, RawWriter, Trailer},
};
use crate::calls::{
    ingest::{Call, Packet, Queue},
    resolve::Row,
};
use rocsync_common::Api;

fn header() -> Header {
    Header {
        clock_offset_ns: 1_700_000_000_000_000_000,
        start_ns: 5,
        command: vec!["x".into()],
        from_start: true,
    }
}

#[test]
fn queues_packets_and_losses_round_trip() {
    let mut w = RawWriter::new(Vec::new(), &header()).unwrap();
    let q = Queue {
        pid: 1,
        tid: 2,
        created: true,
        discovered: false,
        queue: 0x7000,
        agent: 0x10,
        base: 0x9000,
        doorbell: 0x44,
        id: 3,
        size: 64,
        ordinal: 1,
        ns: 77,
    };
    let mut bytes = [0u8; 64];
    bytes[0] = 3;
    bytes[63] = 0xfe;
    let p = Packet {
        pid: 1,
        tid: 2,
        ordinal: 1,
        queue: 0x7000,
        agent: 0x10,
        index: 9,
        ns: 78,
        bytes,
    };
    w.queue(&q).unwrap();
    w.packet(&p).unwrap();
    w.lost(4, 3).unwrap();
    let out = w.finish(&Trailer::default()).unwrap();
    let mut r = Reader::new(&out[..]).unwrap();
    assert_eq!(r.header, header());
    assert_eq!(r.next_item().unwrap(), Some(Item::Queue(q)));
    assert_eq!(r.next_item().unwrap(), Some(Item::Packet(p)));
    assert_eq!(r.next_item().unwrap(), Some(Item::Lost(4, 3)));
    assert!(matches!(r.next_item().unwrap(), Some(Item::Trailer(_))));
    assert_eq!(r.next_item().unwrap(), None);
}

/// Calls begun before the capture are carried by the trailer (written only when some:
/// a capture without them is written as before).
#[test]
fn calls_begun_before_round_trip() {
    let t = Trailer {
        calls_begun_before: 5,
        ..Trailer::default()
    };
    let out = RawWriter::new(Vec::new(), &header())
        .unwrap()
        .finish(&t)
        .unwrap();
    let mut r = Reader::new(&out[..]).unwrap();
    match r.next_item().unwrap() {
        Some(Item::Trailer(back)) => assert_eq!(back.calls_begun_before, 5),
        other => panic!("{other:?}"),
    }
    let none = RawWriter::new(Vec::new(), &header()).unwrap();
    let text = String::from_utf8(none.finish(&Trailer::default()).unwrap()).unwrap();
    assert!(!text.contains("calls_begun_before"), "{text}");
}

#[test]
fn hostile_lines_are_errors_naming_their_line() {
    let mut text = Vec::new();
    RawWriter::new(&mut text, &header()).unwrap();
    writeln!(text, "{{\"api\":\"hipDeviceSynchronize\",\"pid\":1,\"tid\":1,\"correlation\":1,\"enter_ns\":9,\"exit_ns\":2,\"ret\":0,\"args\":{{}}}}").unwrap();
    let err = format!(
        "{:#}",
        Reader::new(&text[..]).unwrap().next_item().unwrap_err()
    );
    assert!(err.contains("line 2") && err.contains("before"), "{err}");

    let mut long = Vec::new();
    RawWriter::new(&mut long, &header()).unwrap();
    long.extend(std::iter::repeat_n(b'x', MAX_LINE + 10));
    let err = format!(
        "{:#}",
        Reader::new(&long[..]).unwrap().next_item().unwrap_err()
    );
    assert!(
        err.contains("line 2") && err.contains("longer than"),
        "{err}"
    );

    let mut wide = Vec::new();
    RawWriter::new(&mut wide, &header()).unwrap();
    writeln!(wide, "{{\"api\":\"hipDeviceSynchronize\",\"pid\":4294967296,\"tid\":1,\"correlation\":1,\"enter_ns\":1,\"exit_ns\":2,\"ret\":0,\"args\":{{}}}}").unwrap();
    let err = format!(
        "{:#}",
        Reader::new(&wide[..]).unwrap().next_item().unwrap_err()
    );
    assert!(err.contains("\"pid\" is past 32 bits"), "{err}");

    let bad = b"{\"rocsync_raw\":{\"clock_offset_ns\":1}}\n{\"packet\":{\"bytes\":\"zz\"}}\n";
    let err = format!(
        "{:#}",
        Reader::new(&bad[..]).unwrap().next_item().unwrap_err()
    );
    assert!(err.contains("line 2"), "{err}");
}

#[test]
fn a_hostile_trailer_is_an_error_naming_what() {
    let read = |trailer: &str| {
        let mut text = Vec::new();
        RawWriter::new(&mut text, &header()).unwrap();
        writeln!(text, "{{\"rocsync_raw_end\":{trailer}}}").unwrap();
        Reader::new(&text[..])
            .unwrap()
            .next_item()
            .map_err(|e| format!("{e:#}"))
    };
    for (trailer, says) in [
        (
            r#"{"packets_truncated":"x"}"#,
            "\"packets_truncated\" is not a count",
        ),
        (
            r#"{"entry_records":-1}"#,
            "\"entry_records\" is not a count",
        ),
        (r#"{"processes":[]}"#, "\"processes\" is not an object"),
        (r#"{"processes":{"abc":{}}}"#, "\"abc\" is not a pid"),
        (
            r#"{"processes":{"7":{"distributedInfo":"x"}}}"#,
            "process 7 is not",
        ),
        (r#"{"processes":{"7":{"name":3}}}"#, "process 7 is not"),
        (r#"{"processes":{"7":"x"}}"#, "process 7 is not"),
    ] {
        let err = read(trailer).expect_err(trailer);
        assert!(
            err.contains("line 2") && err.contains(says),
            "{trailer}: {err}"
        );
    }
    // What captures write: counts, and processes whose launcher said nothing (null).
    let Ok(Some(Item::Trailer(t))) = read(
        r#"{"packets_truncated":3,"processes":{"7":{"name":"app","distributedInfo":null},"8":{"name":"b","distributedInfo":{"rank":1}}}}"#,
    ) else {
        panic!("a well-formed trailer is read");
    };
    assert_eq!(t.kernel.packets_truncated, 3);
    assert_eq!(t.processes["8"]["distributedInfo"]["rank"], 1);
}

/// What the writer of afcfe7c wrote for `old_sample`: the raw format before it became serde
/// types, kept so that old captures stay readable and the bytes written never change.
const OLD_CAPTURE: &str = include_str!("afcfe7c.jsonl");

fn call(api: Api, correlation: u64, args: [u64; 3], exit: Option<(u64, i64)>) -> Call {
    Call {
        api,
        pid: 7748,
        tid: 7749,
        correlation,
        enter_ns: 1_317_467_489_529 + correlation,
        exit_ns: exit.map(|e| e.0),
        ret: exit.map(|e| e.1),
        args,
        filtered: false,
    }
}

fn row(call: Call, late: bool) -> Row {
    Row {
        late,
        ..Row::of(call)
    }
}

/// Every kind of line, every flag combination and argument kind, edge values.
fn old_sample() -> Vec<u8> {
    let h = Header {
        clock_offset_ns: -1_700_000_000_123_456_789,
        start_ns: u64::MAX,
        command: vec![
            "./app".into(),
            "--name=\"a b\"\\".into(),
            "ünï\tcode".into(),
        ],
        from_start: false,
    };
    let mut w = RawWriter::new(Vec::new(), &h).unwrap();
    let wait = call(
        Api::HipStreamWaitEvent,
        1,
        [0x5678, u64::MAX, 1 << 32 | 5],
        Some((2_000_000_000_000, 101)),
    );
    w.row(&row(wait, false)).unwrap();
    let set = call(
        Api::HipSetDevice,
        2,
        [u32::MAX as u64, 0, 0],
        Some((1_317_467_489_600, -1)),
    );
    w.row(&row(set, false)).unwrap();
    let prio = call(
        Api::HipStreamCreateWithPriority,
        3,
        [0, 0, (-5i64) as u64],
        Some((1_317_467_489_700, 0)),
    );
    w.row(&row(prio, false)).unwrap();
    let sync = call(Api::HipDeviceSynchronize, 4, [0; 3], None);
    w.deferred(&row(sync, false)).unwrap();
    let filtered = Call {
        filtered: true,
        ..call(Api::HipEventRecordSpt, 5, [0x10, 0x2, 0], None)
    };
    w.deferred(&row(filtered, false)).unwrap();
    w.row(&row(
        Call {
            exit_ns: Some(1_317_467_489_800),
            ret: Some(0),
            ..filtered
        },
        true,
    ))
    .unwrap();
    let late = call(
        Api::CudaEventQuery,
        6,
        [0xdead_beef_0000, 0, 0],
        Some((1_317_467_489_900, 600)),
    );
    w.row(&row(late, true)).unwrap();
    w.deferred(&row(late, true)).unwrap();
    w.completed(&row(
        Call {
            exit_ns: Some(1_317_467_599_000),
            ret: Some(0),
            ..sync
        },
        false,
    ))
    .unwrap();
    w.completed(&row(sync, false)).unwrap();
    w.lost(12, 1).unwrap();
    w.lost(u64::MAX - 2, 3).unwrap();
    let q = Queue {
        pid: 7748,
        tid: 7748,
        created: true,
        discovered: false,
        queue: 0x7f00_1234_5000,
        agent: 0x5b1d_0a80,
        base: 0x7f00_1234_6000,
        doorbell: 0x7f00_dead_0000,
        id: 0,
        size: 64,
        ordinal: 0,
        ns: 1_317_467_000_000,
    };
    w.queue(&q).unwrap();
    w.queue(&Queue {
        created: false,
        discovered: true,
        ordinal: u32::MAX,
        id: u64::MAX,
        ..q
    })
    .unwrap();
    let mut bytes = [0u8; 64];
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(37);
    }
    w.packet(&Packet {
        pid: 7748,
        tid: 7750,
        ordinal: 1,
        queue: q.queue,
        agent: q.agent,
        index: 5,
        ns: 1_317_467_000_100,
        bytes,
    })
    .unwrap();
    let kernel = crate::calls::stats::KernelDrops {
        entries: 1,
        exits: 2,
        library_loads: 3,
        queues: 4,
        packets: 5,
        packets_truncated: 6,
        out_params: 7,
        packets_unread: 8,
        get_device_unrecorded: 9,
        comm_state: 0,
        thread_names: 0,
    };
    let processes = serde_json::json!({
        "7748": {"name": "app \"x\"", "distributedInfo": {"rank": 1, "world_size": 2, "backend": "nccl"}},
        "31": {"name": "ü", "distributedInfo": null},
    });
    let t = Trailer {
        kernel,
        unpaired_entries: 10,
        unpaired_exits: 11,
        calls_begun_before: 0,
        undecodable: 12,
        processes,
    };
    w.finish(&t).unwrap()
}

#[test]
fn the_writer_writes_what_afcfe7c_wrote() {
    let new = String::from_utf8(old_sample()).unwrap();
    assert_eq!(new, with_this_version(OLD_CAPTURE));
}

/// The old capture with this build's version in its header (the reader ignores it).
fn with_this_version(old: &str) -> String {
    let (header, rest) = old.split_once('\n').unwrap();
    let v: serde_json::Value = serde_json::from_str(header).unwrap();
    let old_version = format!("\"version\":{}", v["rocsync_raw"]["version"]);
    let this = format!("\"version\":\"{}\"", env!("CARGO_PKG_VERSION"));
    assert!(header.contains(&old_version), "{header}");
    format!("{}\n{rest}", header.replace(&old_version, &this))
}

#[test]
fn an_afcfe7c_capture_reads_back_and_rewrites_byte_identical() {
    let mut r = Reader::new(OLD_CAPTURE.as_bytes()).unwrap();
    let mut w = RawWriter::new(Vec::new(), &r.header).unwrap();
    let mut trailer = None;
    while let Some(item) = r.next_item().unwrap() {
        match item {
            Item::Call {
                call,
                deferred: true,
                late,
            } => w.deferred(&row(call, late)).unwrap(),
            Item::Call { call, late, .. } => w.row(&row(call, late)).unwrap(),
            Item::Completion(correlation, exit) => {
                let mut c = call(Api::HipDeviceSynchronize, correlation, [0; 3], None);
                exit.apply(&mut c);
                w.completed(&row(c, false)).unwrap();
            }
            Item::Lost(first, count) => w.lost(first, count).unwrap(),
            Item::Queue(q) => w.queue(&q).unwrap(),
            Item::Packet(p) => w.packet(&p).unwrap(),
            Item::Trailer(t) => trailer = Some(t),
        }
    }
    let out = w.finish(&trailer.expect("a trailer")).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        with_this_version(OLD_CAPTURE)
    );
}
