//! Hostile input never panics: arbitrary ring records through the decoder and the whole
//! pipeline, arbitrary lines through the raw reader, extreme values and any trailer
//! through convert.

use std::io::BufReader;

use crate::common::{
    self,
    pipeline::{finish, writer},
};
use proptest::prelude::*;
use rocsync::{emit::raw::Reader, pipeline::Pipeline};
use rocsync_common::{Api, Decoded, EntryRecord, ExitRecord, RECORD_ENTRY, RECORD_EXIT, decode};

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
        // Never a panic; a record only of a kind the probes write.
        if decode(&b).is_ok() {
            let kind = u32::from_ne_bytes(b[..4].try_into().unwrap());
            prop_assert!((1..=7).contains(&kind), "kind {kind} decoded");
        }
    }

    #[test]
    fn the_decoder_reads_back_what_the_probes_write(r in record()) {
        let back = match decode(&r) {
            Ok(Decoded::Entry(e)) => bytes(&e),
            Ok(Decoded::Exit(x)) => bytes(&x),
            other => return Err(TestCaseError::fail(format!("{other:?}"))),
        };
        prop_assert_eq!(back, r.clone());
        // A record cut short is refused, never read past its end.
        for n in [0, 3, r.len() / 2, r.len() - 1] {
            prop_assert!(decode(&r[..n]).is_err(), "{n} of {} bytes", r.len());
        }
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
        // Each row one of the calls entered (their correlations are below 64), each call
        // at most once, none ending before it began.
        let entries = records.iter().filter(|r| r[..4] == RECORD_ENTRY.to_ne_bytes()).count();
        let rows = common::call_rows(&t);
        prop_assert!(rows.len() <= entries, "{} rows of {} entries", rows.len(), entries);
        prop_assert!(rows.iter().all(|r| r.correlation < 64));
        let events = t["traceEvents"].as_array().unwrap();
        prop_assert!(events.iter().filter(|e| e["ph"] == "X").all(|e| e["dur"].as_f64().unwrap() >= 0.0));
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
        // At most a row per call line; the one well-formed call line has its fields.
        let calls = lines.iter().filter(|l| l.starts_with("{\"api\"")).count();
        let rows = common::call_rows(&t);
        prop_assert!(rows.len() <= calls, "{} rows of {} call lines", rows.len(), calls);
        for r in &rows {
            prop_assert_eq!((r.name.as_str(), r.pid, r.ret), ("hipEventRecord", 1, Some(i64::MIN)));
            prop_assert_eq!(r.handles.clone(), vec![("event".into(), u64::MAX), ("stream".into(), 0)]);
        }
    }
}

/// Any JSON value, a few levels deep, with the keys the trailer's readers look for.
fn json() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,6}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("rank|name|world_size|[a-z]{1,3}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The whole of `rocsync convert` (the files written per process included) on a
    /// capture whose trailer says anything of its processes: a trace, or an error naming
    /// the line, never a panic (a `distributedInfo` that was not an object was one).
    #[test]
    fn convert_takes_any_trailer(
        pid in prop_oneof![Just("9".to_string()), "[0-9a-z-]{0,12}"],
        name in json(),
        distributed in json(),
        count in json(),
    ) {
        let dir = common::TempDir::new();
        let raw = dir.path("c.jsonl");
        let trailer = serde_json::json!({ "rocsync_raw_end": {
            "packets_truncated": count,
            "processes": { pid: { "name": name, "distributedInfo": distributed } },
        }});
        std::fs::write(
            &raw,
            format!(
                "{{\"rocsync_raw\":{{\"clock_offset_ns\":1}}}}\n{}\n{trailer}\n",
                r#"{"api":"hipEventRecord","pid":9,"tid":9,"correlation":1,"enter_ns":1,"exit_ns":2,"ret":0,"args":{"event":"0x10","stream":"0x20"}}"#
            ),
        )
        .unwrap();
        let out = common::rocsync().arg("convert").arg(&raw).output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        match out.status.code() {
            Some(0) => {
                let t = common::read_json(&dir.path("c.json"));
                prop_assert!(t["traceEvents"].is_array());
            }
            Some(1) => prop_assert!(said.contains("line 3: trailer"), "{}", said),
            _ => prop_assert!(false, "{:?}: {}", out.status, said),
        }
    }
}
