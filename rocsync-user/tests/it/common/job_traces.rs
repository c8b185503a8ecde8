//! A job's traces written as rocsync writes them, for `report DIR`: a rank's collective
//! rows (`cpu_op`, as `emit/kineto/collectives.rs` writes them), and the daemon's word in
//! `rocsync.parameters` — a hang, a stall, a rank behind or stuck — with `where` and
//! `stacks` as the agreed schema has them (`/work/briefs/stacks-schema.md`), in the
//! folders an upload makes (`NODE/FILE`).

use std::path::Path;

use serde_json::{Value, json};

/// The job's communicator in these traces.
pub(crate) const COMM: &str = "0x9d1c44a0b2f3e1d7";

/// One collective row of `pid` (rank `rank` of 2): `Seq` `seq`, on stream 0x2.
pub(crate) fn collective_row(pid: u32, rank: u64, seq: u64, api: &str) -> Value {
    json!({"ph": "X", "cat": "cpu_op", "name": api, "pid": pid, "tid": pid,
        "ts": 1000.0 + seq as f64 * 10.0, "dur": 5.0,
        "args": {"correlation": seq, "Collective name": "allreduce", "dtype": "Float",
            "In msg nelems": 1024 + seq, "Out msg nelems": 1024 + seq, "Seq": seq,
            "op": 0, "stream": "0x2", "comm": "0x5600", "Comms Id": COMM,
            "Rank": rank, "Group size": 2, "ret": 0}})
}

/// Rows of collectives `1..=last` of `pid`.
pub(crate) fn collectives(pid: u32, rank: u64, last: u64) -> Vec<Value> {
    (1..=last)
        .map(|s| collective_row(pid, rank, s, "ncclAllReduce"))
        .collect()
}

/// The stacks of `pid`'s blocked thread: `python` frames (function, file, line),
/// innermost first, over a native frame of libc.
pub(crate) fn stacks(pid: u32, python: &[(&str, &str, u64)]) -> Value {
    let py: Vec<Value> = python
        .iter()
        .map(|(f, file, line)| json!({"function": f, "file": file, "line": line}))
        .collect();
    json!({"pid": pid, "read_at_unix_us": 1_733_550_000_000_000u64, "took_ms": 9.8,
        "python_version": "3.11.7", "error": null,
        "threads": [
            {"tid": pid, "name": "python3", "blocked": true, "python_stack": py,
             "python_error": null,
             "native_stack": [{"address": "0x7f3a00001234", "symbol": "clock_nanosleep",
                 "object": "/usr/lib/x86_64-linux-gnu/libc.so.6", "offset": "0x1234",
                 "symbolized": true}],
             "native_error": null},
            {"tid": pid + 1, "name": "pt_autograd_0", "blocked": false, "python_stack": null,
             "python_error": "unreadable: no thread state", "native_stack": [],
             "native_error": null}],
        "cut": {"threads": 0, "frames": 0, "strings": 0}})
}

/// `step (train.py:142)` for a frame of `/job/train.py`.
pub(crate) fn place(frame: (&str, &str, u64)) -> String {
    let file = frame.1.rsplit('/').next().unwrap();
    format!("{} ({file}:{})", frame.0, frame.2)
}

/// The hang of `pid` (rank `rank`) blocked in its synchronize after `seq`, the daemon's
/// chain ending at the collective; `behind`: (pid, rank, seq) of the ranks it saw behind.
pub(crate) fn hang(
    pid: u32,
    rank: u64,
    seq: u64,
    behind: &[(u32, u64, u64)],
    frames: &[(&str, &str, u64)],
) -> Value {
    let collective = json!({"api": "ncclAllReduce", "seq": seq, "comm": COMM,
        "comm_handle": "0x5600", "rank": rank, "nranks": 2});
    let behind: Vec<Value> = behind
        .iter()
        .map(|(p, r, s)| json!({"pid": p, "rank": r, "seq": s, "comm": COMM}))
        .collect();
    json!({"api": "hipStreamSynchronize", "pid": pid, "tid": pid,
        "entry_unix_us": 1_733_549_994_000_000u64, "blocked_ms_when_found": 6000.0,
        "waits_on": [{"stream": "0x2", "collective": collective.clone(),
            "at_unix_us": 1_733_549_993_000_000u64}],
        "ended": "bound", "collective": collective, "behind": behind,
        "where": place(frames[0]), "stacks": stacks(pid, frames)})
}

/// The trace of `pid` (rank `rank`) behind at `seq` while `waiter` waits in `seq + 1`.
pub(crate) fn behind(
    pid: u32,
    rank: u64,
    seq: u64,
    waiter: u32,
    frames: &[(&str, &str, u64)],
) -> Value {
    json!({"pid": pid, "rank": rank, "seq": seq, "comm": COMM,
        "waited_by": {"pid": waiter, "api": "hipStreamSynchronize",
            "collective": {"api": "ncclAllReduce", "seq": seq + 1, "comm": COMM}},
        "ended": "bound", "where": place(frames[0]), "stacks": stacks(pid, frames)})
}

/// A daemon trace of `rows`, its word `kind` (`hang`, `behind`, …) being `word`.
pub(crate) fn daemon_trace(rows: Vec<Value>, kind: &str, word: Value) -> Value {
    let mut parameters = json!({"mode": "daemon trace", "id": 3, "pids": [],
        "stall": null, "hang": null, "behind": null});
    parameters[kind] = word;
    json!({"schemaVersion": 1, "traceEvents": rows,
        "distributedInfo": {"backend": "nccl"},
        "rocsync": {"version": "0.1.0", "drops": {"entry_records": 0},
            "parameters": parameters}})
}

/// A trace of `rows` of `run` or `attach`, no word of the daemon.
pub(crate) fn plain_trace(rows: Vec<Value>) -> Value {
    json!({"schemaVersion": 1, "traceEvents": rows, "distributedInfo": {"backend": "nccl"},
        "rocsync": {"version": "0.1.0", "drops": {"entry_records": 0},
            "parameters": {"mode": "attach"}}})
}

/// Writes `trace` at `dir/rel` (its folders made).
pub(crate) fn put(dir: &Path, rel: &str, trace: &Value) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_vec_pretty(trace).unwrap()).unwrap();
}
