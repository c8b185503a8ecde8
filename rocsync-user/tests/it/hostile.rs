//! Hostile input never panics: arbitrary ring records through the decoder and the whole
//! pipeline, arbitrary lines through the raw reader, extreme values and any trailer
//! through convert.

use std::io::BufReader;

use crate::common::{
    self,
    pipeline::{finish, writer},
    stderr_of,
};
use proptest::prelude::*;
use rocsync::calls::{emit::raw::Reader, pipeline::Pipeline};
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
                    losses: 0,
                })
            }
        },
    )
}

/// The process and first thread of the well-formed calls (no hostile record's).
const GOOD_PID: u64 = 100;
const GOOD_TID: u64 = 100;

/// The entry and exit records of well-formed call `j`: hipStreamSynchronize(0x5000 + j)
/// returning 0 on thread `GOOD_TID + j`, correlation 64 + j.
fn well_formed(j: u32) -> (Vec<u8>, Vec<u8>) {
    let (pid, tid) = (GOOD_PID as u32, GOOD_TID as u32 + j);
    let enter_ns = 1_000_000 + u64::from(j) * 1000;
    let entry = EntryRecord {
        kind: RECORD_ENTRY,
        pid,
        tid,
        api: Api::HipStreamSynchronize as u16,
        correlation: 64 + u64::from(j),
        enter_ns,
        args: [0x5000 + u64::from(j), 0, 0],
        flags: 0,
        device: rocsync_common::NO_DEVICE as i8,
    };
    let exit = ExitRecord {
        kind: RECORD_EXIT,
        pid,
        tid,
        api: Api::HipStreamSynchronize as u32,
        exit_ns: enter_ns + 500,
        ret: 0,
        out: 0,
        flags: 0,
        losses: 0,
    };
    (bytes(&entry), bytes(&exit))
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
        places in prop::collection::vec(any::<(prop::sample::Index, prop::sample::Index)>(), 0..12),
    ) {
        // Among them, well-formed calls of threads no hostile record names (their pids
        // are below 4, their correlations below 64): each entry somewhere, its exit
        // somewhere after it. Built here, so the rows they must give are known without
        // the pipeline.
        let hostile: Vec<Vec<u8>> = records.iter().chain(&noise).cloned().collect();
        let mut at: Vec<(usize, u8, Vec<u8>)> = Vec::new();
        for (j, (a, b)) in places.iter().enumerate() {
            let (a, b) = (a.index(hostile.len() + 1), b.index(hostile.len() + 1));
            let (entry, exit) = well_formed(j as u32);
            at.push((a.min(b), 0, entry));
            at.push((a.max(b), 1, exit));
        }
        at.sort_by_key(|(i, order, _)| (*i, *order));
        let mut p = Pipeline::new(writer(), false);
        let mut feed = |r: &[u8]| {
            p.record(r);
            if r.len().is_multiple_of(7) {
                p.tick();
            }
        };
        let mut placed = at.iter().peekable();
        for (i, r) in hostile.iter().enumerate() {
            while let Some((_, _, w)) = placed.next_if(|(k, _, _)| *k == i) {
                feed(w);
            }
            feed(r);
        }
        for (_, _, w) in placed {
            feed(w);
        }
        let t = finish(p);
        // Each hostile row one of the calls entered (their correlations are below 64),
        // each call at most once, none ending before it began...
        let entries = records.iter().filter(|r| r[..4] == RECORD_ENTRY.to_ne_bytes()).count();
        let rows = common::call_rows(&t);
        let (good, bad): (Vec<_>, Vec<_>) = rows.iter().partition(|r| r.pid == GOOD_PID);
        prop_assert!(bad.len() <= entries, "{} rows of {} entries", bad.len(), entries);
        prop_assert!(bad.iter().all(|r| r.correlation < 64));
        let events = t["traceEvents"].as_array().unwrap();
        prop_assert!(events.iter().filter(|e| e["ph"] == "X").all(|e| e["dur"].as_f64().unwrap() >= 0.0));
        // ...and every well-formed call exactly its row, whatever came around it.
        let want: Vec<_> = (0..places.len() as u64)
            .map(|j| (GOOD_TID + j, 64 + j, "hipStreamSynchronize", Some(0), vec![("stream".to_string(), 0x5000 + j)]))
            .collect();
        let got: Vec<_> = good
            .iter()
            .map(|r| (r.tid, r.correlation, r.name.as_str(), r.ret, r.handles.clone()))
            .collect();
        prop_assert_eq!(got, want);
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
    ), good in 0..8u64) {
        // First, well-formed call lines of a process no hostile line names: whatever
        // follows them, each is a row, with the fields written here. (A header whose
        // clock offset makes no date of them is refused: `convert`'s own test.)
        let good_lines: Vec<String> = (0..good)
            .map(|j| format!(
                r#"{{"api":"hipStreamSynchronize","pid":2,"tid":{},"correlation":{},"enter_ns":{},"exit_ns":{},"ret":0,"args":{{"stream":"{:#x}"}}}}"#,
                10 + j, 100 + j, 1000 * (j + 1), 1000 * (j + 1) + 500, 0x5000 + j
            ))
            .collect();
        let text = format!(
            "{{\"rocsync_raw\":{{\"clock_offset_ns\":1700000000000000000}}}}\n{}\n",
            good_lines.iter().chain(&lines).cloned().collect::<Vec<_>>().join("\n")
        );
        let mut r = Reader::new(BufReader::new(text.as_bytes())).unwrap();
        let mut p = Pipeline::new(writer(), r.header.from_start);
        while let Ok(Some(item)) = r.next_item() {
            p.replay(item);
        }
        let t = finish(p);
        // At most a row per call line; the one well-formed call line has its fields.
        let calls = lines.iter().filter(|l| l.starts_with("{\"api\"")).count();
        let (good_rows, rows): (Vec<_>, Vec<_>) =
            common::call_rows(&t).into_iter().partition(|r| r.pid == 2);
        let want: Vec<_> = (0..good)
            .map(|j| (10 + j, 100 + j, Some(0), vec![("stream".to_string(), 0x5000 + j)]))
            .collect();
        let got: Vec<_> = good_rows
            .iter()
            .map(|r| (r.tid, r.correlation, r.ret, r.handles.clone()))
            .collect();
        prop_assert_eq!(got, want);
        prop_assert!(good_rows.iter().all(|r| r.name == "hipStreamSynchronize"));
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
        let said = stderr_of(&out);
        match out.status.code() {
            Some(0) => {
                // The one call line, whatever the trailer said: its row, as written.
                let t = common::read_json(&dir.path("c.json"));
                let rows: Vec<_> = common::call_rows(&t)
                    .into_iter()
                    .map(|r| (r.name, r.pid, r.tid, r.correlation, r.ret, r.handles))
                    .collect();
                let want = vec![(
                    "hipEventRecord".to_string(), 9, 9, 1, Some(0),
                    vec![("event".to_string(), 0x10), ("stream".to_string(), 0x20)],
                )];
                prop_assert_eq!(rows, want);
            }
            Some(1) => prop_assert!(said.contains("line 3: trailer"), "{}", said),
            _ => prop_assert!(false, "{:?}: {}", out.status, said),
        }
    }
}
