//! `rocsync report TRACE` on what is not a runtime call (issue 64): a trace of HSA
//! packets alone is reported with its packets per queue and agent, by type (once "0
//! calls" and blank figures); the time a process was blocked after its collectives is
//! said per communicator — in the text and in `--json` alike, each figure counted here
//! from the rows the test wrote.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::{
    common::{job_traces, *},
    report_story::{report, runtime, sync},
};

/// A queue of the trace: its agent (`None`: created before the capture), its handle,
/// and how many packets of each type it published.
type Queue = (Option<u64>, &'static str, &'static [(&'static str, u64)]);

const QUEUES: [Queue; 3] = [
    (
        Some(0),
        "0x7f3a0000a000",
        &[("kernel_dispatch", 5), ("barrier_value", 2)],
    ),
    (
        Some(1),
        "0x7f3a0000b000",
        &[("kernel_dispatch", 3), ("barrier_and", 1)],
    ),
    (None, "0x7f3a0000c000", &[("kernel_dispatch", 2)]),
];

/// The rows of `QUEUES` as `emit/kineto/packets.rs` writes them (pid: the agent, or
/// 4000000 for an unknown one; a track per queue), one doorbell each.
fn packet_rows() -> Vec<Value> {
    let mut rows = Vec::new();
    for (n, (agent, queue, kinds)) in QUEUES.iter().enumerate() {
        let pid = agent.unwrap_or(4_000_000);
        let mut index = 0;
        for (kind, count) in kinds.iter() {
            for _ in 0..*count {
                rows.push(
                    json!({"ph": "X", "cat": "hsa_packet", "name": kind, "pid": pid,
                    "tid": 3_000_000 + n as u64, "ts": 10.0 + index as f64 * 0.001,
                    "dur": 0, "args": {"agent": agent, "queue": queue,
                        "write_index": index, "packet_type": kind}}),
                );
                index += 1;
            }
        }
    }
    rows
}

/// An arrow of `cat` (its start and its end) numbered `id`.
fn arrow(cat: &str, id: u64) -> [Value; 2] {
    [
        json!({"ph": "s", "cat": cat, "name": cat, "id": id, "pid": 0, "tid": 3_000_000,
            "ts": 10.0}),
        json!({"ph": "f", "bp": "e", "cat": cat, "name": cat, "id": id, "pid": 0,
            "tid": 3_000_000, "ts": 10.002}),
    ]
}

/// A line's words, one space apart: the columns without their padding.
fn words(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn a_trace_of_packets_alone_is_reported_with_its_packets_per_queue_and_type() {
    let dir = TempDir::new();
    let path = dir.path("packets.json");
    let mut rows = packet_rows();
    let (deps, barriers) = (2, 1);
    for id in 0..deps {
        rows.extend(arrow("hsa_dep", 1 << 40 | id));
    }
    for id in 0..barriers {
        rows.extend(arrow("hip_barrier", 1 << 41 | id));
    }
    std::fs::write(&path, job_traces::plain_trace(rows).to_string()).unwrap();
    let (text, json) = report(&path);
    let total: u64 = (QUEUES.iter().flat_map(|q| q.2)).map(|k| k.1).sum();
    let mut by_type: BTreeMap<&str, u64> = BTreeMap::new();
    for &(kind, n) in QUEUES.iter().flat_map(|q| q.2) {
        *by_type.entry(kind).or_default() += n;
    }
    // The first line counts them; no call, yet not an empty report.
    let first = text.lines().next().unwrap();
    assert_eq!(
        first,
        format!(
            "0 runtime calls (0 APIs), {total} HSA packets on {} queues",
            QUEUES.len()
        ),
        "{text}"
    );
    let p = &json["packets"];
    assert_eq!(p["packets"].as_u64(), Some(total), "{p}");
    assert_eq!(p["by_type"], json!(by_type), "{p}");
    assert_eq!(
        (
            p["barrier_dependencies"].as_u64(),
            p["call_barriers"].as_u64()
        ),
        (Some(deps), Some(barriers))
    );
    let queues = p["queues"].as_array().unwrap();
    assert_eq!(queues.len(), QUEUES.len(), "{p}");
    let section = text.split("\nHSA packets per queue\n").nth(1).expect(&text);
    let lines: Vec<&str> = section.lines().take_while(|l| !l.is_empty()).collect();
    for (agent, queue, kinds) in QUEUES {
        let q = queues.iter().find(|q| q["queue"] == queue).expect(queue);
        let n: u64 = kinds.iter().map(|k| k.1).sum();
        let types: BTreeMap<&str, u64> = kinds.iter().copied().collect();
        assert_eq!(
            (q["agent"].as_u64(), q["packets"].as_u64(), &q["by_type"]),
            (agent, Some(n), &json!(types)),
            "{q}"
        );
        // `AGENT QUEUE PACKETS  TYPE N, TYPE N` (the types in order), `?` for an agent
        // unknown.
        let agent = agent.map_or("?".into(), |a| a.to_string());
        let types: Vec<String> = types.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let want = format!("{agent} {queue} {n} {}", types.join(", "));
        assert!(
            lines.iter().any(|l| words(l) == want),
            "no line {want:?}:\n{text}"
        );
    }
    assert!(
        lines.iter().any(|l| words(l)
            == format!(
                "barrier dependencies on a packet: {deps}; waits linked to their barrier packet: {barriers}"
            )),
        "{text}"
    );
    // Every row and arrow was used: none said "not used".
    assert_eq!(
        (&json["not_used"], &json["unusable"]),
        (&json!({}), &json!({})),
        "{json}"
    );
    assert!(
        text.contains("Not used by this report\n  (nothing)"),
        "{text}"
    );
}

/// A wait of the trace after the collectives: (API, CUPTI kind, correlation, start µs,
/// duration µs, its stream's handle) and whether it waited for one of them.
struct Wait {
    api: &'static str,
    kind: &'static str,
    corr: u64,
    ts: f64,
    dur: f64,
    stream: &'static str,
    after_a_collective: bool,
}

#[test]
fn the_time_blocked_after_collectives_is_said_per_communicator() {
    let dir = TempDir::new();
    let path = dir.path("waits.json");
    // Collectives #1 to #6 of pid 7 on stream 0x2, 10 µs apart from 1010 µs on.
    let last = 6;
    let mut rows = job_traces::collectives(7, 0, last);
    let wait = |api, kind, corr, ts, dur, stream, after_a_collective| Wait {
        api,
        kind,
        corr,
        ts,
        dur,
        stream,
        after_a_collective,
    };
    let waits = [
        // Synchronizes of its stream after #1 and after #3.
        wait(
            "hipStreamSynchronize",
            "Stream Sync",
            101,
            1012.0,
            3000.0,
            "0x2",
            true,
        ),
        wait(
            "hipStreamSynchronize",
            "Stream Sync",
            102,
            1035.0,
            1250.5,
            "0x2",
            true,
        ),
        // The device's, after #5.
        wait(
            "hipDeviceSynchronize",
            "Context Sync",
            103,
            1055.0,
            4200.25,
            "",
            true,
        ),
        // Another stream's: not after a collective.
        wait(
            "hipStreamSynchronize",
            "Stream Sync",
            105,
            1050.0,
            9000.0,
            "0x5600",
            false,
        ),
        // Its stream's, before the first collective.
        wait(
            "hipStreamSynchronize",
            "Stream Sync",
            106,
            500.0,
            7000.0,
            "0x2",
            false,
        ),
    ];
    for w in &waits {
        let args = match w.stream {
            "" => json!({}),
            s => json!({"hip_stream": s}),
        };
        rows.push(runtime(w.api, w.corr, 8, w.ts, w.dur, args));
        rows.push(sync(w.kind, w.corr, 1, -1));
    }
    // An event recorded on stream 0x2 after #4 (1040 µs), waited on after #6.
    let (record_corr, event_wait) = (110, (104, 1070.0, 800.0));
    rows.push(runtime(
        "hipEventRecord",
        record_corr,
        8,
        1042.0,
        2.0,
        json!({"hip_stream": "0x2"}),
    ));
    rows.push(runtime(
        "hipEventSynchronize",
        event_wait.0,
        8,
        event_wait.1,
        event_wait.2,
        json!({"wait_on_hip_event_record_corr_id": record_corr, "wait_on_stream": "0x2"}),
    ));
    rows.push(sync("Event Sync", event_wait.0, -1, 1));
    // The same event polled just before: a query returns at once, it is no wait (its row
    // is an "Event Sync" all the same, as CUPTI writes `cudaEventQuery`).
    let query = 107;
    rows.push(runtime(
        "hipEventQuery",
        query,
        8,
        event_wait.1 - 3.0,
        1.5,
        json!({"wait_on_hip_event_record_corr_id": record_corr, "wait_on_stream": "0x2"}),
    ));
    rows.push(sync("Event Sync", query, -1, 1));
    std::fs::write(&path, job_traces::plain_trace(rows).to_string()).unwrap();
    let (text, json) = report(&path);
    let after: Vec<f64> = (waits.iter().filter(|w| w.after_a_collective))
        .map(|w| w.dur)
        .chain([event_wait.2])
        .collect();
    let total: f64 = after.iter().sum();
    let max = after.iter().copied().fold(0.0, f64::max);
    let c = &json["collectives"]["communicators"][0];
    assert_eq!(c["hash"], job_traces::COMM, "{c}");
    assert_eq!(c["waits_after"].as_u64(), Some(after.len() as u64), "{c}");
    assert_eq!(c["blocked_after_total_us"].as_f64(), Some(total), "{c}");
    assert_eq!(c["blocked_after_max_us"].as_f64(), Some(max), "{c}");
    // The communicator's row: pid, hash, rank, size, collectives, numbers, then the
    // waits, their time blocked in all and the longest (all in ms here).
    let ms = |us: f64| format!("{:.1} ms", us / 1e3);
    let want = format!(
        "7 {} 0 2 {last} #1-#{last} {} {} {} AllReduce {last}",
        job_traces::COMM,
        after.len(),
        ms(total),
        ms(max)
    );
    let section = text
        .split("\nCollectives per communicator\n")
        .nth(1)
        .expect(&text);
    assert!(
        section.lines().any(|l| words(l) == want),
        "no line {want:?}:\n{text}"
    );
}
