//! `rocsync convert` on hand-written raw captures: no kernel needed.

use crate::common::*;

const HEADER: &str = r#"{"rocsync_raw":{"version":"0.1.0","clock_offset_ns":1700000000000000000,"command":["app"],"drops":0}}"#;
const RECORD: &str = r#"{"api":"hipEventRecord","pid":9,"tid":9,"correlation":1,"enter_ns":1000,"exit_ns":2000,"ret":0,"args":{"event":"0x10","stream":"0x20"}}"#;
const WAIT: &str = r#"{"api":"hipStreamWaitEvent","pid":9,"tid":10,"correlation":2,"enter_ns":3000,"exit_ns":4000,"ret":0,"args":{"stream":"0x30","event":"0x10","flags":0}}"#;

#[test]
fn converts_a_raw_capture_into_a_resolved_trace() {
    let dir = TempDir::new();
    let raw = dir.path("c.jsonl");
    // Lines out of order: resolution sorts by correlation.
    std::fs::write(&raw, format!("{HEADER}\n{WAIT}\n{RECORD}\n")).unwrap();
    run_ok(rocsync().arg("convert").arg(&raw));
    let trace = read_json(&dir.path("c.json"));
    assert_eq!(
        trace_edges(&trace).into_iter().collect::<Vec<_>>(),
        vec![(2, 1)]
    );
    assert_eq!(trace["schemaVersion"], 1);
    assert!(trace["baseTimeNanoseconds"].as_i64().unwrap() <= 1_700_000_000_000_001_000);
}

#[test]
fn a_malformed_line_names_its_number_and_writes_nothing() {
    let dir = TempDir::new();
    let raw = dir.path("bad.jsonl");
    std::fs::write(&raw, format!("{HEADER}\n{RECORD}\n{{\"api\": 3}}\n")).unwrap();
    let out = rocsync().arg("convert").arg(&raw).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
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
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot open /nonexistent/c.jsonl"));
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
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("line 3") && stderr.contains("process 9 is not"),
        "{stderr}"
    );
    assert!(!dir.path("t.json").exists(), "nothing half-written");
}
