//! Hostile input never panics: arbitrary ring records through the decoder and the whole
//! pipeline, arbitrary lines through the raw reader, extreme values through convert.

mod common;

use std::io::BufReader;

use common::pipeline::{finish, writer};
use proptest::prelude::*;
use rocsync::{emit::raw::Reader, pipeline::Pipeline};
use rocsync_common::{Api, EntryRecord, ExitRecord, RECORD_ENTRY, RECORD_EXIT, decode};

fn bytes<T>(v: &T) -> Vec<u8> {
    // SAFETY: reading the bytes of a plain record.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), size_of::<T>()) }.to_vec()
}

/// Records with valid kinds and API ids but any other field: what a confused or hostile
/// kernel side could produce.
fn record() -> impl Strategy<Value = Vec<u8>> {
    let api = (1..=Api::ALL.len() as u32, any::<bool>());
    (api, any::<[u64; 6]>(), any::<(u32, u32, i64, u32)>()).prop_map(
        |((api, entry), w, (pid, tid, ret, flags))| {
            let (pid, tid) = (pid % 4, tid % 4);
            if entry {
                bytes(&EntryRecord {
                    kind: RECORD_ENTRY,
                    pid,
                    tid,
                    api: api as u16,
                    correlation: w[0] % 64,
                    enter_ns: w[1],
                    args: [w[2], w[3], w[4]],
                    flags: flags as u8,
                    device: ret as i8,
                })
            } else {
                bytes(&ExitRecord {
                    kind: RECORD_EXIT,
                    pid,
                    tid,
                    api,
                    exit_ns: w[5],
                    ret,
                    out: w[2],
                    flags,
                    pad: 0,
                })
            }
        },
    )
}

proptest! {
    #[test]
    fn the_decoder_takes_any_bytes(b in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode(&b);
    }

    #[test]
    fn the_pipeline_takes_any_records_and_writes_valid_json(
        records in prop::collection::vec(record(), 0..200),
        noise in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..80), 0..5),
    ) {
        let mut p = Pipeline::new(writer(), false);
        for r in records.iter().chain(&noise) {
            p.record(r);
            if r.len() % 7 == 0 {
                p.tick();
            }
        }
        let t = finish(p);
        prop_assert!(t["traceEvents"].is_array());
    }

    #[test]
    fn the_raw_reader_takes_any_lines(lines in prop::collection::vec(
        prop_oneof![
            any::<String>(),
            Just(r#"{"api":"hipEventRecord","pid":1,"tid":1,"correlation":18446744073709551615,"enter_ns":18446744073709551615,"exit_ns":18446744073709551615,"ret":-9223372036854775808,"args":{"event":"0xffffffffffffffff","stream":"0x0"}}"#.to_string()),
            Just(r#"{"lost":18446744073709551615,"count":18446744073709551615}"#.to_string()),
            Just(r#"{"completion":{"correlation":5,"exit_ns":0,"ret":0}}"#.to_string()),
            Just(r#"{"packet":{"pid":1,"tid":1,"ordinal":0,"queue":"0x1","agent":"0x2","index":0,"ns":0,"bytes":"00"}}"#.to_string()),
        ],
        0..20,
    )) {
        let text = format!(
            "{{\"rocsync_raw\":{{\"clock_offset_ns\":9223372036854775807}}}}\n{}\n",
            lines.join("\n")
        );
        let mut r = Reader::new(BufReader::new(text.as_bytes())).unwrap();
        let mut p = Pipeline::new(writer(), r.header.from_start);
        while let Ok(Some(item)) = r.next_item() {
            p.replay(item);
        }
        let t = finish(p);
        prop_assert!(t["traceEvents"].is_array());
    }
}
