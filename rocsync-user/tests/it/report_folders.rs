//! `rocsync report DIR` on a folder a neighbour can write into (issue 60): a FIFO named
//! like a trace never blocks it, a `*.json` that is no rocsync trace is passed over and
//! said, and a symbolic link — to a trace only root may read, or to another node's
//! folder — is never followed: said, not read.

use std::{io::Read as _, os::unix::fs::PermissionsExt as _, process::Stdio, time::Duration};

use serde_json::Value;

use crate::common::{job_traces::*, *};

/// The report of `dir` as `--json`, which must end within a minute (a FIFO opened
/// blocking would never let it).
fn report_json(dir: &std::path::Path) -> Value {
    let mut child = rocsync()
        .args(["report", "--json"])
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = Vec::new();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        stdout.read_to_end(&mut out).unwrap();
        out
    });
    let status = wait_within(&mut child, Duration::from_secs(60), "report of the folder");
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "{status}: {err}");
    serde_json::from_slice(&reader.join().unwrap()).expect("one JSON document")
}

fn skipped(r: &Value) -> Vec<(String, String)> {
    r["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["file"].as_str().unwrap().into(),
                s["why"].as_str().unwrap().into(),
            )
        })
        .collect()
}

fn used(r: &Value) -> Vec<&str> {
    let t = r["traces"].as_array().unwrap();
    t.iter().map(|t| t["file"].as_str().unwrap()).collect()
}

#[test]
fn a_fifo_or_a_json_that_is_no_trace_is_passed_over_and_said() {
    let dir = TempDir::new();
    put(
        &dir.path(""),
        "rank0.json",
        &plain_trace(collectives(40, 0, 3)),
    );
    put(
        &dir.path(""),
        "rank1.json",
        &plain_trace(collectives(41, 1, 3)),
    );
    make_fifo(&dir.path("fifo.json"));
    std::fs::write(dir.path("notes.json"), r#"{"a": 1}"#).unwrap();
    std::fs::write(dir.path("garbage.json.gz"), "not gzip, not json").unwrap();
    let r = report_json(&dir.path(""));
    assert_eq!(used(&r), ["rank0.json", "rank1.json"]);
    let s = skipped(&r);
    let why = |name: &str| {
        s.iter()
            .find(|(f, _)| f == name)
            .map(|(_, w)| w.clone())
            .unwrap_or_default()
    };
    assert_eq!(
        why("fifo.json"),
        "not a regular file (a FIFO, device or socket)",
        "{s:?}"
    );
    assert!(
        why("notes.json").starts_with("not a rocsync trace: it has no traceEvents array"),
        "{s:?}"
    );
    assert!(
        why("garbage.json.gz").starts_with("not a rocsync trace:"),
        "{s:?}"
    );
    assert_eq!(r["communicators"][0]["verdict"]["kind"], "in_step");
    // The text says them too.
    let text = run_ok(rocsync().arg("report").arg(dir.path("")));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("2 traces used, 1 communicator, 3 skipped"),
        "{text}"
    );
    assert!(
        text.contains("  fifo.json: not a regular file (a FIFO, device or socket)"),
        "{text}"
    );
}

#[test]
fn a_link_planted_to_a_root_only_trace_is_never_followed() {
    let dir = TempDir::new();
    // Root's own trace, where only root may read it; another rank's pid in it.
    let secret = dir.path("root-only");
    put(
        &secret,
        "hang-666.json",
        &daemon_trace(
            collectives(666, 1, 9),
            "hang",
            hang(666, 1, 9, &[], &[("secret", "/root/x.py", 1)]),
        ),
    );
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o700)).unwrap();
    // The job's folder, where a neighbour planted links to it: a file and a node folder.
    let job = dir.path("job");
    put(
        &job,
        "node-a/rank0.json",
        &plain_trace(collectives(50, 0, 3)),
    );
    std::os::unix::fs::symlink(secret.join("hang-666.json"), job.join("node-a/rank1.json"))
        .unwrap();
    std::os::unix::fs::symlink(&secret, job.join("node-b")).unwrap();
    let r = report_json(&job);
    assert_eq!(used(&r), ["node-a/rank0.json"]);
    assert_eq!(
        skipped(&r),
        [
            (
                "node-a/rank1.json".into(),
                "a symbolic link, not followed".into()
            ),
            ("node-b".into(), "a symbolic link, not followed".into()),
        ]
    );
    assert!(
        !r.to_string().contains("secret"),
        "read through the link: {r}"
    );
    assert_eq!(r["communicators"][0]["ranks_count"], 1);
}

#[test]
fn a_folder_of_nothing_but_what_is_no_trace_is_an_error_that_says_each() {
    let dir = TempDir::new();
    make_fifo(&dir.path("a.json"));
    std::fs::write(dir.path("b.json"), "[]").unwrap();
    let out = rocsync().arg("report").arg(dir.path("")).output().unwrap();
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("holds no rocsync trace (*.json, *.json.gz)"),
        "{err}"
    );
    assert!(err.contains("a.json: not a regular file"), "{err}");
    assert!(err.contains("b.json: not a rocsync trace"), "{err}");
}
