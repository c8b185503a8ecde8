//! `rocsync report DIR` over a job's traces as every node uploads them (`NODE/FILE`): the
//! verdict first — a rank behind with its frame, all ranks launched #N and none
//! completed, mismatched collectives, not enough traces (which ranks are absent) — with
//! which ranks are blocked in the furthest collective (their common frame), which are
//! not in it and where each of them is (its stack), and `--json` in fields with NCCL
//! RAS's names where they mean the same.

use std::path::Path;

use serde_json::Value;

use crate::common::{job_traces::*, *};

const STEP: (&str, &str, u64) = ("step", "/job/train.py", 142);
const MAIN: (&str, &str, u64) = ("<module>", "/job/train.py", 200);
const SLEEPING: (&str, &str, u64) = ("load_batch", "/job/data.py", 88);

fn report(dir: &Path) -> (String, Value) {
    let text = run_ok(rocsync().arg("report").arg(dir));
    let json = run_ok(rocsync().arg("report").arg("--json").arg(dir));
    let json = serde_json::from_slice(&json.stdout).expect("one JSON document");
    (String::from_utf8(text.stdout).unwrap(), json)
}

#[test]
fn the_rank_behind_is_named_with_its_frame_and_the_blocked_rank_with_its_own() {
    let dir = TempDir::new();
    let job = dir.path("job-0x9d1c");
    // Rank 0 (node-a) blocked after entering #21; rank 1 (node-b) stopped before it, in
    // its own function; each node's daemon traced its own rank.
    let (r0, r1) = (4121, 5122);
    let hang0 = hang(r0, 0, 21, &[], &[STEP, MAIN]);
    put(
        &job,
        "node-a/hang-hipStreamSynchronize-4121-1.json",
        &daemon_trace(collectives(r0, 0, 21), "hang", hang0),
    );
    let behind1 = behind(r1, 1, 20, r0, &[SLEEPING, MAIN]);
    put(
        &job,
        "node-b/behind-5122-1.json",
        &daemon_trace(collectives(r1, 1, 20), "behind", behind1),
    );
    let (text, json) = report(&job);

    // The answer comes first.
    let first: Vec<&str> = text.lines().take(2).collect();
    assert_eq!(
        first[0], "job: 2 traces used, 1 communicator, 0 skipped",
        "{text}"
    );
    assert_eq!(
        first[1],
        format!(
            "verdict: comm {COMM}: a rank behind: rank 1 (pid 5122 on node-b) at #20, in \
             load_batch (data.py:88); the others are in ncclAllReduce #21"
        ),
        "{text}"
    );
    assert!(
        text.contains("blocked in it: rank 0 (pid 4121 on node-a), in step (train.py:142)"),
        "{text}"
    );
    // Where the rank behind is: its stack, innermost first.
    let stack = "  stack of rank 1 (pid 5122), thread 5122 (python3):\n      \
                 load_batch (data.py:88)\n      <module> (train.py:200)\n      \
                 clock_nanosleep (libc.so.6+0x1234)\n";
    assert!(text.contains(stack), "{text}");

    // The same in fields.
    let c = &json["communicators"][0];
    assert_eq!(c["hash"], COMM);
    assert_eq!(
        (c["size"].as_u64(), c["ranks_count"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(c["missing_ranks"], serde_json::json!([]));
    let v = &c["verdict"];
    assert_eq!(
        (v["kind"].as_str(), v["seq"].as_u64()),
        (Some("rank_behind"), Some(21)),
        "{v}"
    );
    let b = &v["behind"][0];
    assert_eq!(
        (b["rank"].as_u64(), b["pid"].as_u64(), b["at"].as_u64()),
        (Some(1), Some(5122), Some(20))
    );
    assert_eq!(
        (b["host"].as_str(), b["where"].as_str()),
        (Some("node-b"), Some("load_batch (data.py:88)"))
    );
    let f = &c["collective"];
    assert_eq!(
        (f["seq"].as_u64(), f["op"].as_str()),
        (Some(21), Some("ncclAllReduce"))
    );
    assert_eq!(f["blocked_ranks"][0]["rank"], 0);
    assert_eq!(f["common_frame"], "step (train.py:142)");
    let rank1 = c["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rank"] == 1)
        .unwrap();
    assert_eq!(rank1["collective_counts"]["AllReduce"], 20);
    assert_eq!(rank1["stack"]["frames"][0], "load_batch (data.py:88)");
    assert_eq!(rank1["how"], "behind");
    // Which traces it used, by name and node.
    let used: Vec<(&str, &str)> = json["traces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["file"].as_str().unwrap(), t["trigger"].as_str().unwrap()))
        .collect();
    assert_eq!(
        used,
        [
            ("node-a/hang-hipStreamSynchronize-4121-1.json", "hang"),
            ("node-b/behind-5122-1.json", "behind")
        ]
    );
}

#[test]
fn every_rank_blocked_in_one_collective_is_none_completed_with_their_common_frame() {
    let dir = TempDir::new();
    let other = ("backward", "/job/train.py", 120);
    for (pid, rank, top) in [(10, 0, STEP), (11, 1, other)] {
        // Each rank blocked in its own function, both called from the same line.
        let word = hang(pid, rank, 7, &[], &[top, MAIN]);
        let t = daemon_trace(collectives(pid, rank, 7), "hang", word);
        put(&dir.path(""), &format!("n{rank}/hang-{pid}.json"), &t);
    }
    let (text, json) = report(&dir.path(""));
    let c = &json["communicators"][0];
    assert_eq!(c["verdict"]["kind"], "none_completed", "{c}");
    assert_eq!(c["verdict"]["seq"], 7);
    assert_eq!(c["collective"]["common_frame"], "<module> (train.py:200)");
    assert!(
        text.contains("all ranks launched ncclAllReduce #7 and none completed"),
        "{text}"
    );
}

#[test]
fn different_operations_at_one_number_are_mismatched_collectives() {
    let dir = TempDir::new();
    let mut rows1 = collectives(21, 1, 4);
    rows1.push(collective_row(21, 1, 5, "ncclBroadcast"));
    put(&dir.path(""), "a.json", &plain_trace(collectives(20, 0, 5)));
    put(&dir.path(""), "b.json", &plain_trace(rows1));
    let (text, json) = report(&dir.path(""));
    let v = &json["communicators"][0]["verdict"];
    assert_eq!(
        (v["kind"].as_str(), v["seq"].as_u64()),
        (Some("mismatched_collectives"), Some(5))
    );
    let ops: Vec<&str> = v["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["op"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["ncclAllReduce", "ncclBroadcast"]);
    assert!(
        text.contains("mismatched collectives at #5: rank 0 (pid 20) in ncclAllReduce, rank 1 (pid 21) in ncclBroadcast"),
        "{text}"
    );
}

/// Rank 1 of 2 has no trace, then a trace without a collective: the report names the
/// absent rank and the trace, and gives no verdict on a rank behind.
#[test]
fn a_missing_rank_is_named_and_no_verdict_given() {
    let dir = TempDir::new();
    let word = hang(30, 0, 3, &[], &[STEP]);
    put(
        &dir.path(""),
        "node-a/hang-30.json",
        &daemon_trace(collectives(30, 0, 3), "hang", word),
    );
    let (text, json) = report(&dir.path(""));
    let c = &json["communicators"][0];
    assert_eq!(
        (
            c["missing_ranks_count"].as_u64(),
            c["missing_ranks"][0]["rank"].as_u64()
        ),
        (Some(1), Some(1))
    );
    assert_eq!(c["verdict"]["kind"], "not_enough_traces");
    assert_eq!(c["verdict"]["missing_ranks"], serde_json::json!([1]));
    assert!(
        text.contains("not enough traces: rank 1 absent (no trace holds them)"),
        "{text}"
    );

    // Its trace is there, but holds no collective (set up before the capture, none since).
    put(&dir.path(""), "node-b/rank1.json", &plain_trace(Vec::new()));
    let (text, json) = report(&dir.path(""));
    let v = &json["communicators"][0]["verdict"];
    assert_eq!(
        v["traces_without_collectives"],
        serde_json::json!(["node-b/rank1.json"]),
        "{v}"
    );
    assert!(
        text.contains("1 trace holds no collective (node-b/rank1.json)"),
        "{text}"
    );
    // Fields, not sentences: no value of the verdict is prose.
    for (k, val) in v.as_object().unwrap() {
        assert!(!val.as_str().is_some_and(|s| s.contains(' ')), "{k}: {val}");
    }
}
