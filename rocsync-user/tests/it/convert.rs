//! `rocsync convert` on hand-written raw captures: no kernel needed.

use crate::common::*;

const HEADER: &str = r#"{"rocsync_raw":{"version":"0.1.0","clock_offset_ns":1700000000000000000,"command":["app"],"drops":0}}"#;
const RECORD: &str = r#"{"api":"hipEventRecord","pid":9,"tid":9,"correlation":1,"enter_ns":1000,"exit_ns":2000,"ret":0,"args":{"event":"0x10","stream":"0x20"}}"#;
const WAIT: &str = r#"{"api":"hipStreamWaitEvent","pid":9,"tid":10,"correlation":2,"enter_ns":3000,"exit_ns":4000,"ret":0,"args":{"stream":"0x30","event":"0x10","flags":0}}"#;
const TRAILER: &str = r#"{"rocsync_raw_end":{}}"#;

#[test]
fn converts_a_raw_capture_into_a_resolved_trace() {
    let dir = TempDir::new();
    let raw = dir.path("c.jsonl");
    // Lines out of order: resolution sorts by correlation.
    std::fs::write(&raw, format!("{HEADER}\n{WAIT}\n{RECORD}\n{TRAILER}\n")).unwrap();
    run_ok(rocsync().arg("convert").arg(&raw));
    let trace = read_json(&dir.path("c.json"));
    assert_eq!(
        trace_edges(&trace).into_iter().collect::<Vec<_>>(),
        vec![(2, 1)]
    );
    assert_eq!(trace["schemaVersion"], 1);
    assert!(trace["baseTimeNanoseconds"].as_i64().unwrap() <= 1_700_000_000_000_001_000);
}

/// `--raw FILE.gz` writes the raw capture compressed; convert reads it back (by its gzip
/// magic) into the trace the capture wrote, next to it as `FILE.json` by default.
#[test]
fn a_compressed_raw_capture_converts_into_the_live_trace() {
    if !can_trace("a_compressed_raw_capture_converts_into_the_live_trace") {
        return;
    }
    let dir = TempDir::new();
    let (live, raw) = (dir.path("live.json"), dir.path("r.jsonl.gz"));
    run_ok(
        rocsync_run_raw(&live, &raw, &rocsync_tests::scenario())
            .args(["cross", "10"])
            .env("SCENARIO_LOG", dir.path("s.log")),
    );
    let magic = std::fs::read(&raw).unwrap();
    assert_eq!(&magic[..2], &[0x1f, 0x8b], "written compressed");
    run_ok(rocsync().arg("convert").arg(&raw));
    let (live, converted) = (read_json(&live), read_json(&dir.path("r.json")));
    assert!(!trace_edges(&live).is_empty());
    assert_eq!(trace_edges(&converted), trace_edges(&live));
    let rows = |t: &serde_json::Value| {
        t["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["cat"] == "cuda_runtime")
            .count()
    };
    assert_eq!(rows(&converted), rows(&live));
    assert_eq!(converted["rocsync"]["drops"], live["rocsync"]["drops"]);
}

/// A Kineto trace (rocsync's own `-o`, plain or compressed) given to convert is named
/// for what it is, not reported as JSON at "line 2 column 0".
#[test]
fn a_kineto_trace_is_said_to_be_one() {
    let dir = TempDir::new();
    let raw = dir.path("c.jsonl");
    std::fs::write(&raw, format!("{HEADER}\n{RECORD}\n{TRAILER}\n")).unwrap();
    for trace in ["t.json", "t.json.gz"] {
        run_ok(
            rocsync()
                .arg("convert")
                .arg(&raw)
                .arg("-o")
                .arg(dir.path(trace)),
        );
        let out = rocsync()
            .arg("convert")
            .arg(dir.path(trace))
            .arg("-o")
            .arg(dir.path("again.json"))
            .output()
            .unwrap();
        let stderr = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("is a Kineto trace, not a raw capture") && !stderr.contains("column"),
            "{trace}: {stderr}"
        );
        assert!(!dir.path("again.json").exists());
    }
}

#[test]
fn a_malformed_line_names_its_number_and_writes_nothing() {
    let dir = TempDir::new();
    let raw = dir.path("bad.jsonl");
    std::fs::write(&raw, format!("{HEADER}\n{RECORD}\n{{\"api\": 3}}\n")).unwrap();
    let out = rocsync().arg("convert").arg(&raw).output().unwrap();
    assert!(!out.status.success());
    let stderr = stderr_of(&out);
    assert!(stderr.contains("line 3"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(dir.0.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        left,
        vec![std::ffi::OsString::from("bad.jsonl")],
        "nothing half-written"
    );
}

#[test]
fn a_missing_raw_file_is_a_clear_error() {
    let out = rocsync()
        .args(["convert", "/nonexistent/c.jsonl"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(stderr_of(&out).contains("cannot open /nonexistent/c.jsonl"));
}

/// Found by mutating raw captures: a trailer whose `distributedInfo` was not an object
/// made the trace writer panic.
#[test]
fn a_hostile_trailer_is_a_clear_error_not_a_panic() {
    let dir = TempDir::new();
    let raw = dir.path("t.jsonl");
    let trailer = r#"{"rocsync_raw_end":{"processes":{"9":{"name":"app","distributedInfo":"x"}}}}"#;
    std::fs::write(&raw, format!("{HEADER}\n{RECORD}\n{trailer}\n")).unwrap();
    let out = rocsync().arg("convert").arg(&raw).output().unwrap();
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("line 3") && stderr.contains("process 9 is not"),
        "{stderr}"
    );
    assert!(!dir.path("t.json").exists(), "nothing half-written");
}

/// A raw capture cut short (rocsync killed, its disk full) has no trailer: what it holds
/// is converted, and the trace, the summary and the exit status say it was truncated.
#[test]
fn a_raw_capture_without_its_trailer_is_reported_truncated() {
    let dir = TempDir::new();
    for (name, text, line) in [
        ("whole.jsonl", format!("{HEADER}\n{RECORD}\n{WAIT}\n"), None),
        (
            "cut.jsonl",
            format!("{HEADER}\n{RECORD}\n{WAIT}\n{{\"api\":\"hip"),
            Some(4),
        ),
    ] {
        let raw = dir.path(name);
        std::fs::write(&raw, text).unwrap();
        let out = rocsync().arg("convert").arg(&raw).output().unwrap();
        let stderr = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(
            stderr.contains("truncated: the raw capture ends"),
            "{stderr}"
        );
        // What is still converted, said.
        assert!(
            stderr.contains("is truncated") && stderr.contains("holds the 2 calls before the cut"),
            "{stderr}"
        );
        assert!(!stderr.contains("lost: nothing\n"), "{stderr}");
        let trace = read_json(&raw.with_extension("json"));
        assert_eq!(
            trace["rocsync"]["calls"], 2,
            "{name}: every complete line is kept"
        );
        let said = trace["rocsync"]["truncated"]
            .as_str()
            .expect("said in the trace");
        if let Some(n) = line {
            assert!(said.contains(&format!("inside line {n}")), "{said}");
        }
    }
    // With its trailer: whole, as before.
    let raw = dir.path("done.jsonl");
    std::fs::write(&raw, format!("{HEADER}\n{RECORD}\n{TRAILER}\n")).unwrap();
    run_ok(rocsync().arg("convert").arg(&raw));
    assert!(
        read_json(&dir.path("done.json"))["rocsync"]
            .get("truncated")
            .is_none()
    );
}

/// A FIFO as the input used to hang in `open` (no writer ever comes).
#[test]
fn a_fifo_as_input_is_refused_without_blocking() {
    let dir = TempDir::new();
    let fifo = dir.path("in.jsonl");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let mut child = rocsync()
        .arg("convert")
        .arg(&fifo)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_within(&mut child, std::time::Duration::from_secs(60), "convert");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("not a regular file"), "{stderr}");
}

/// Writes a raw capture of `calls` quick calls from correlation id `first`, with its
/// trailer.
fn big_raw(path: &std::path::Path, first: u64, calls: u64) {
    use std::io::Write as _;
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(w, "{HEADER}").unwrap();
    for c in first..first + calls {
        writeln!(
            w,
            r#"{{"api":"hipDeviceSynchronize","pid":9,"tid":9,"correlation":{c},"enter_ns":{},"exit_ns":{},"ret":0,"args":{{}}}}"#,
            c * 10,
            c * 10 + 5
        )
        .unwrap();
    }
    writeln!(w, "{TRAILER}").unwrap();
}

/// Peak RSS (KiB) of `rocsync convert raw -o out`, as `peak_rss` measures it (not from
/// here: a child of the test process would count the test's own memory, 31–87 MB in
/// the full suite), and its stderr.
fn convert_peak_kib(raw: &std::path::Path, out: &std::path::Path) -> (i64, String) {
    let run = run_ok(
        std::process::Command::new(rocsync_tests::peak_rss())
            .arg(env!("CARGO_BIN_EXE_rocsync"))
            .arg("convert")
            .arg(raw)
            .arg("-o")
            .arg(out),
    );
    let stderr = stderr_of(&run);
    let stdout = String::from_utf8_lossy(&run.stdout);
    let peak = stdout.lines().last().and_then(|l| l.parse().ok());
    (
        peak.unwrap_or_else(|| panic!("no peak in {stdout:?}")),
        stderr,
    )
}

/// Correlation id 1 missing: every call used to wait for it (864 MB for 3 M calls). The
/// id is declared lost once a bound of calls waits, so memory stays that of live state.
#[test]
fn a_missing_first_id_is_lost_not_waited_for() {
    const CALLS: u64 = 1_000_000;
    let dir = TempDir::new();
    let (from1, from2) = (dir.path("from1.jsonl"), dir.path("from2.jsonl"));
    big_raw(&from1, 1, CALLS);
    big_raw(&from2, 2, CALLS);
    let (whole, _) = convert_peak_kib(&from1, &dir.path("from1.json.gz"));
    let (missing, stderr) = convert_peak_kib(&from2, &dir.path("from2.json.gz"));
    eprintln!("convert: peak RSS {missing} KiB without id 1, {whole} KiB with it");
    assert!(
        missing < 2 * whole,
        "peak RSS {missing} KiB without id 1, {whole} KiB with it"
    );
    assert!(stderr.contains("lost: lost_ids 1"), "{stderr}");
    let trace: serde_json::Value = serde_json::from_reader(flate2::read::GzDecoder::new(
        std::fs::File::open(dir.path("from2.json.gz")).unwrap(),
    ))
    .unwrap();
    assert_eq!(trace["rocsync"]["drops"]["lost_ids"], 1);
    assert_eq!(trace["rocsync"]["calls"], CALLS);
}
