//! The end of a trace: process and thread metadata, then the closing keys.

use std::{
    collections::{BTreeMap, BTreeSet},
    io::{self, Write},
};

use super::{
    calls::{DEVICE_TID, SYNC_TID_OFFSET},
    packets::{QUEUE_TID_BASE, UNKNOWN_AGENT_PID},
    rows::Rows,
};
use crate::calls::emit::{comms::Comms, json::JsonBuf};

/// What the trace says about the capture besides its rows.
pub struct TraceInfo<'a> {
    /// Process names by pid (for `process_name` rows).
    pub process_names: &'a BTreeMap<u32, String>,
    /// The `rocsync` object: version, command line, parameters, counts and drops.
    pub rocsync: serde_json::Value,
    /// The `distributedInfo` object (HTA reads the rank from it).
    pub distributed: serde_json::Value,
    pub trace_name: &'a str,
}

/// GPU processes sort after CPU ones (Kineto's kExceedMaxPid).
const GPU_SORT_BASE: i64 = 5_000_000;

fn meta<'a, W: Write>(
    rows: &'a mut Rows<W>,
    name: &str,
    pid: i64,
    tid: i64,
    key: &str,
) -> &'a mut JsonBuf<W> {
    let j = rows.begin();
    j.s("{\"ph\":\"M\",\"name\":\"")
        .s(name)
        .s("\",\"pid\":")
        .i(pid)
        .s(",\"tid\":")
        .i(tid)
        .s(",\"args\":{\"")
        .s(key)
        .s("\":")
}

/// Writes the process and thread metadata (threads named by `thread_names`, else
/// `thread TID`), the communicators of `comms` and the closing keys.
pub(super) fn finish<W: Write>(
    mut rows: Rows<W>,
    mut thread_names: BTreeMap<(u32, u32), String>,
    comms: &Comms,
    info: &TraceInfo<'_>,
) -> io::Result<W> {
    let pids: BTreeSet<u32> = rows.threads.iter().map(|t| t.0).collect();
    for pid in pids {
        let name = info
            .process_names
            .get(&pid)
            .map(String::as_str)
            .unwrap_or("process");
        let p = pid as i64;
        meta(&mut rows, "process_name", p, 0, "name")
            .string(name)
            .s("}}");
        meta(&mut rows, "process_labels", p, 0, "labels").s("\"CPU\"}}");
        meta(&mut rows, "process_sort_index", p, 0, "sort_index")
            .i(p)
            .s("}}");
    }
    for (pid, tid) in std::mem::take(&mut rows.threads) {
        let (p, t) = (pid as i64, tid as i64);
        let name = thread_names.remove(&(pid, tid));
        let j = meta(&mut rows, "thread_name", p, t, "name");
        match name {
            Some(name) => j.string(&name).s("}}"),
            None => j.s("\"thread ").i(t).s("\"}}"),
        };
        meta(&mut rows, "thread_sort_index", p, t, "sort_index")
            .i(t)
            .s("}}");
    }
    let devices: BTreeSet<i32> = rows.tracks.iter().map(|t| t.0).collect();
    for d in devices {
        let label = if d == UNKNOWN_AGENT_PID {
            "GPU (agent unknown)".to_string()
        } else {
            format!("GPU {d}")
        };
        let d = d as i64;
        meta(&mut rows, "process_name", d, 0, "name")
            .string(&label)
            .s("}}");
        meta(&mut rows, "process_labels", d, 0, "labels")
            .string(&label)
            .s("}}");
        meta(&mut rows, "process_sort_index", d, 0, "sort_index")
            .i(GPU_SORT_BASE + d)
            .s("}}");
    }
    for (d, tid) in std::mem::take(&mut rows.tracks) {
        let d = d as i64;
        let j = meta(&mut rows, "thread_name", d, tid, "name");
        let sort = if tid >= QUEUE_TID_BASE {
            j.s("\"HSA queue ").i(tid - QUEUE_TID_BASE).s("\"}}");
            tid
        } else if tid == DEVICE_TID {
            j.s("\"Device ").i(d).s("\"}}");
            -1
        } else if tid > SYNC_TID_OFFSET {
            j.s("\"stream ").i(tid - SYNC_TID_OFFSET).s(" (sync)\"}}");
            tid - SYNC_TID_OFFSET
        } else {
            j.s("\"stream ").i(tid).s(" \"}}");
            tid
        };
        meta(&mut rows, "thread_sort_index", d, tid, "sort_index")
            .i(sort)
            .s("}}");
    }
    // The communicators its collectives ran in: the job's identity, the same on
    // every rank (`pg_count` as Kineto names their number).
    let mut distributed = info.distributed.clone();
    let comms = comms.listed();
    if let (Some(o), false) = (distributed.as_object_mut(), comms.is_empty()) {
        o.insert("pg_count".into(), comms.len().into());
        o.insert("communicators".into(), comms.into());
    }
    // HTA finds the rank with a regex that needs the space after the colon.
    rows.j
        .s("\n  ],\n  \"distributedInfo\": ")
        .s(&distributed.to_string().replace("\":", "\": "))
        .s(",\n  \"rocsync\": ")
        .s(&info.rocsync.to_string())
        .s(",\n  \"traceName\": ")
        .string(info.trace_name)
        .s("\n}\n");
    rows.j.flush()?;
    Ok(rows.j.out)
}
