//! The raw format written and read back: round trips and hostile lines.

use std::io::Write as _;

use super::read::*;
use crate::emit::{
    Sink,
    raw::{Header, RawWriter, Trailer},
};
use crate::ingest::{Packet, Queue};

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
