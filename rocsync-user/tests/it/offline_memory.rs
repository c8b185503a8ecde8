//! Files users hand to the offline commands cannot make them allocate without bound: a
//! gzip of gigabytes of blanks costs what its text means (its blank runs are cut as it
//! is read), `report` streams a trace, holding its runtime rows only, each by what it
//! costs (its strings cut, its names held once), and `annotate` holds no more text than
//! that bound — measured by the command's own peak resident set (`peak_rss`).

use std::{io::Write as _, path::Path};

use crate::common::*;

/// Peak RSS (KiB) of `rocsync ARGS` and its stderr; it must fail or succeed as `ok`.
fn peak_kib(args: &[&Path], ok: bool) -> (i64, String) {
    let (peak, _, stderr) = peak_and_output(args, ok);
    (peak, stderr)
}

/// Peak RSS (KiB) of `rocsync ARGS`, its stdout and its stderr.
fn peak_and_output(args: &[&Path], ok: bool) -> (i64, String, String) {
    let out = std::process::Command::new(rocsync_tests::peak_rss())
        .arg(env!("CARGO_BIN_EXE_rocsync"))
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = stderr_of(&out);
    assert_eq!(out.status.success(), ok, "{args:?}: {stderr}");
    // peak_rss prints the peak as the last line, after the command's own output.
    let (stdout, last) = text
        .trim_end()
        .rsplit_once('\n')
        .unwrap_or(("", text.as_str()));
    let peak = last.trim().parse().ok();
    (
        peak.unwrap_or_else(|| panic!("no peak in {text:?}")),
        stdout.to_string(),
        stderr,
    )
}

/// A gzip of `blanks` bytes of spaces between `head` and `tail`.
fn blank_bomb(path: &Path, head: &str, blanks: usize, tail: &str) {
    let file = std::fs::File::create(path).unwrap();
    let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
    gz.write_all(head.as_bytes()).unwrap();
    let chunk = vec![b' '; 1 << 20];
    for _ in 0..blanks / chunk.len() {
        gz.write_all(&chunk).unwrap();
    }
    gz.write_all(tail.as_bytes()).unwrap();
    gz.finish().unwrap();
}

const MIB: i64 = 1024;

/// Peak RSS (KiB) of `rocsync annotate TRACE` with a capture of no call, which must
/// fail, and its stderr.
fn annotate_failing(dir: &TempDir, trace: &Path) -> (i64, String) {
    let (raw, out) = (empty_capture(dir), dir.path("annotated.json"));
    let args = [
        Path::new("annotate"),
        trace,
        Path::new("--capture"),
        &raw,
        Path::new("-o"),
        &out,
    ];
    peak_kib(&args, false)
}

/// A raw capture of no call, for annotate.
fn empty_capture(dir: &TempDir) -> std::path::PathBuf {
    let raw = dir.path("capture.jsonl");
    std::fs::write(
        &raw,
        concat!(
            r#"{"rocsync_raw":{"version":"0.1.0","clock_offset_ns":1700000000000000000,"command":["app"],"drops":0}}"#,
            "\n",
            r#"{"rocsync_raw_end":{}}"#,
            "\n"
        ),
    )
    .unwrap();
    raw
}

#[test]
fn a_gzip_of_blanks_costs_what_its_text_means() {
    let dir = TempDir::new();
    // 512 MiB of blanks inside a valid trace: read whole, it took 512 MiB and more.
    let bomb = dir.path("bomb.json.gz");
    let trace = r#"{"traceEvents": ["#;
    let rest = r#"], "rocsync": {"drops": {}}}"#;
    blank_bomb(&bomb, trace, 512 << 20, rest);
    assert!(std::fs::metadata(&bomb).unwrap().len() < 8 << 20);
    let (peak, _) = peak_kib(&[Path::new("report"), &bomb], true);
    assert!(peak < 64 * MIB, "report held {peak} KiB");
    // annotate: the profiler trace it edits is held whole, its blanks cut.
    let (peak, stderr) = annotate_failing(&dir, &bomb);
    // It read the trace through, its blanks cut, and found it rocsync's own.
    assert!(stderr.contains("is rocsync's own trace"), "{stderr}");
    assert!(peak < 64 * MIB, "annotate held {peak} KiB: {stderr}");
}

/// annotate holds a profiler trace whole, each event costing more than its text: a gzip
/// of millions of empty events (3 bytes each) is refused at the events' bound, early,
/// not read through at 11 times its size.
#[test]
fn annotate_refuses_a_trace_of_more_events_than_it_holds() {
    let dir = TempDir::new();
    let bomb = dir.path("events.json.gz");
    let file = std::fs::File::create(&bomb).unwrap();
    let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
    gz.write_all(br#"{"traceEvents": ["#).unwrap();
    let chunk = "{},".repeat(1 << 20);
    for _ in 0..32 {
        gz.write_all(chunk.as_bytes()).unwrap();
    }
    gz.write_all(b"{}]}").unwrap();
    gz.finish().unwrap();
    let (peak, stderr) = annotate_failing(&dir, &bomb);
    assert!(
        stderr.contains("more than 2097152 trace events"),
        "{stderr}"
    );
    // Its 96 MiB of text and the events' bound's spans: 32 Mi events read through took
    // over 1 GiB.
    assert!(peak < 384 * MIB, "annotate held {peak} KiB: {stderr}");
}

/// One event that is most of the trace (an array of 64 Mi zeros: 128 MiB of text, 17
/// times that read as a JSON value) is copied, not read as a row, and said.
#[test]
fn annotate_copies_an_event_too_large_to_be_a_row_without_reading_it() {
    let dir = TempDir::new();
    let bomb = dir.path("one.json.gz");
    let file = std::fs::File::create(&bomb).unwrap();
    let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
    gz.write_all(br#"{"traceEvents": [["#).unwrap();
    let chunk = "0,".repeat(1 << 20);
    for _ in 0..64 {
        gz.write_all(chunk.as_bytes()).unwrap();
    }
    gz.write_all(b"0]]}").unwrap();
    gz.finish().unwrap();
    let (peak, stderr) = annotate_failing(&dir, &bomb);
    assert!(
        stderr.contains("were copied as they are, not read"),
        "{stderr}"
    );
    assert!(peak < 512 * MIB, "annotate held {peak} KiB: {stderr}");
}

#[test]
fn report_streams_a_large_trace_holding_its_runtime_rows_only() {
    let dir = TempDir::new();
    let trace = dir.path("big.json");
    let mut w = std::io::BufWriter::new(std::fs::File::create(&trace).unwrap());
    write!(w, r#"{{"schemaVersion": 1, "traceEvents": ["#).unwrap();
    // 256 MiB of kernel rows and flows, which the report does not use, then one call.
    let pad = "x".repeat(400);
    let rows = (256 << 20) / (pad.len() + 150);
    for i in 0..rows {
        write!(
            w,
            r#"{{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 1, "ts": {i}, "dur": 1, "args": {{"note": "{pad}"}}}},"#
        )
        .unwrap();
    }
    write!(
        w,
        r#"{{"ph": "X", "cat": "cuda_runtime", "name": "hipDeviceSynchronize", "pid": 7, "tid": 7, "ts": 1.0, "dur": 2.0, "args": {{"correlation": 1}}}}"#
    )
    .unwrap();
    write!(w, r#"], "rocsync": {{"drops": {{"lost_ids": 0}}}}}}"#).unwrap();
    w.flush().unwrap();
    drop(w);
    let size_kib = std::fs::metadata(&trace).unwrap().len() as i64 / 1024;
    let (peak, _) = peak_kib(&[Path::new("report"), Path::new("--json"), &trace], true);
    // Held whole as a JSON value, it took several times its size.
    assert!(
        peak < size_kib / 4,
        "report held {peak} KiB of a {size_kib} KiB trace"
    );
}

/// 20 KB: a name or a handle no runtime writes, but a neighbour may.
const FAT: usize = 20_000;
const FAT_ROWS: u64 = 100_000;

/// 100 000 runtime rows, each with a name and a stream handle of 20 KB (4 GB of text, a
/// 28 MB gzip), the names distinct. Each row kept its strings (5.96 GB; 7.9 GB with a
/// second handle); now each string is read as its first KiB, names are held once and at
/// most 4 096 of them, and the report says what it cut.
#[test]
fn report_holds_fat_rows_by_what_they_cost_and_says_what_it_cut() {
    let dir = TempDir::new();
    let trace = dir.path("fat.json.gz");
    let (name, handle) = (
        Members::compressed(&"x".repeat(FAT)),
        Members::compressed(&"a".repeat(FAT)),
    );
    let mut gz = Members::create(&trace);
    // One well-formed call first: reported whatever follows.
    gz.text(concat!(
        r#"{"schemaVersion": 1, "traceEvents": [{"ph": "X", "cat": "cuda_runtime", "#,
        r#""name": "cudaDeviceSynchronize", "pid": 7, "tid": 7, "ts": 0.5, "dur": 1, "#,
        r#""args": {"correlation": 1000000}}"#
    ));
    // Two pieces of text a row, its name last so that the next row's text ends it.
    for i in 0..FAT_ROWS {
        let end = if i == 0 { "" } else { r#""}"# };
        gz.text(&format!(
            r#"{end}, {{"ph": "X", "cat": "cuda_runtime", "pid": 7, "tid": 7, "ts": {i}, "dur": 1, "args": {{"correlation": {i}, "cuda_stream": "0x"#
        ));
        gz.raw(&handle);
        gz.text(&format!(r#""}}, "name": "cudaStreamSynchronize{i}"#));
        gz.raw(&name);
    }
    gz.text(r#""}], "rocsync": {"drops": {"lost_ids": 0}}}"#);
    gz.0.flush().unwrap();
    drop(gz);
    let size = std::fs::metadata(&trace).unwrap().len();
    assert!(size < 64 << 20, "{size}");
    let args = [Path::new("report"), Path::new("--json"), &trace];
    let (peak, stdout, _) = peak_and_output(&args, true);
    assert!(peak < 256 * MIB, "report held {peak} KiB");
    let r: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let cut = &r["cut"];
    assert_eq!(
        cut["strings over 1 KiB, read as their first 1 KiB"],
        2 * FAT_ROWS,
        "{cut}"
    );
    // Every row is a call reported or one said to be past the bound on names.
    let past = cut["cuda_runtime rows past the report's bound of 4096 distinct names"]
        .as_u64()
        .unwrap_or_else(|| panic!("{cut}"));
    assert_eq!(r["calls"].as_u64().unwrap() + past, FAT_ROWS + 1, "{cut}");
    assert_eq!(r["calls"], 4096);
    assert_eq!(r["per_api"][0]["api"], "cudaDeviceSynchronize");
    assert_eq!(r["unusable"], serde_json::json!({}));
}

/// `report DIR` on two ranks' traces of 50 000 collectives each, every `dtype` 20 KB:
/// each row kept its dtype whole (2 GB); now it is read as its first KiB and held once
/// for every row of it, and the notes say so.
#[test]
fn report_dir_holds_fat_collectives_by_what_they_cost_and_says_what_it_cut() {
    let dir = TempDir::new();
    let traces = dir.path("job");
    std::fs::create_dir(&traces).unwrap();
    let rows = FAT_ROWS / 2;
    let dtype = Members::compressed(&"f".repeat(FAT));
    for rank in 0..2 {
        let mut gz = Members::create(&traces.join(format!("rank{rank}.json.gz")));
        gz.text(r#"{"schemaVersion": 1, "traceEvents": ["#);
        for i in 1..=rows {
            let sep = if i == 1 { "" } else { ", " };
            gz.text(&format!(
                r#"{sep}{{"ph": "X", "cat": "cpu_op", "name": "ncclAllReduce", "pid": {}, "tid": 1, "ts": {i}, "dur": 1, "args": {{"correlation": {i}, "Seq": {i}, "comm": "0x10", "Comms Id": "0xabc", "Rank": {rank}, "Group size": 2, "In msg nelems": 4, "dtype": ""#,
                100 + rank
            ));
            gz.raw(&dtype);
            gz.text(r#""}}"#);
        }
        gz.text(r#"], "rocsync": {"drops": {}}}"#);
        gz.0.flush().unwrap();
    }
    let args = [Path::new("report"), Path::new("--json"), &traces];
    let (peak, stdout, _) = peak_and_output(&args, true);
    assert!(peak < 256 * MIB, "report DIR held {peak} KiB");
    let job: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let ranks = &job["communicators"][0]["ranks"];
    assert_eq!(ranks[0]["collectives"], rows, "{job}");
    assert_eq!(ranks[1]["collectives"], rows, "{job}");
    for rank in 0..2 {
        let note =
            format!("rank{rank}.json.gz: {rows} strings over 1 KiB, read as their first 1 KiB");
        assert!(
            job["notes"].as_array().unwrap().contains(&note.into()),
            "{}",
            job["notes"]
        );
    }
}

/// annotate holds the profiler trace's text whole, to the bound of what `report` holds
/// (it was 2 GiB): a 2 MB gzip of one 2 GiB string was held whole; now that string is
/// refused at 16 MiB, and 2 GiB of strings of 1 MiB at the bound, each with what to do.
#[test]
fn annotate_refuses_a_trace_past_the_bound_of_what_report_holds() {
    let dir = TempDir::new();
    let chunk = Members::compressed(&"s".repeat(1 << 20));
    for (name, between) in [("string", ""), ("strings", r#"", ""#)] {
        let bomb = dir.path(&format!("{name}.json.gz"));
        let mut gz = Members::create(&bomb);
        gz.text(r#"{"traceEvents": [], "x": [""#);
        for i in 0..2048 {
            gz.raw(&chunk);
            if i < 2047 {
                gz.text(between);
            }
        }
        gz.text(r#""]}"#);
        gz.0.flush().unwrap();
        drop(gz);
        let size = std::fs::metadata(&bomb).unwrap().len();
        assert!(size < 4 << 20, "{size}");
        let (peak, stderr) = annotate_failing(&dir, &bomb);
        let (said, held) = match name {
            "string" => ("it has a string over 16 MiB", 64 * MIB),
            _ => ("is larger than 512 MiB of JSON text", 640 * MIB),
        };
        assert!(
            stderr.contains(said) && stderr.contains("rocsync: error:"),
            "{stderr}"
        );
        assert!(peak < held, "annotate held {peak} KiB: {stderr}");
    }
}
