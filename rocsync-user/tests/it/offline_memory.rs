//! Files users hand to the offline commands cannot make them allocate without bound: a
//! gzip of gigabytes of blanks costs what its text means (its blank runs are cut as it
//! is read), `report` streams a trace, holding its runtime rows only, and `annotate`
//! holds no more text than the bound of what `report` holds — measured by the command's
//! own peak resident set (`peak_rss`).

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
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
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

/// A gzip written as members, each piece compressed once however often it is repeated
/// (the decoder reads concatenated members as one text): gigabytes of rows in a few
/// megabytes, written in a moment.
struct Members(std::io::BufWriter<std::fs::File>);

impl Members {
    fn create(path: &Path) -> Self {
        Members(std::io::BufWriter::new(
            std::fs::File::create(path).unwrap(),
        ))
    }

    fn compressed(text: &str) -> Vec<u8> {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(text.as_bytes()).unwrap();
        gz.finish().unwrap()
    }

    fn text(&mut self, text: &str) {
        self.0.write_all(&Self::compressed(text)).unwrap();
    }

    fn raw(&mut self, member: &[u8]) {
        self.0.write_all(member).unwrap();
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
