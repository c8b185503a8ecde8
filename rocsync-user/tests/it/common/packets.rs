//! A trace's HSA packet rows against the simulated HIP runtime's own account of every
//! packet it published (`$HIP_SIM_EVERY_PACKET_LOG`: the queue's HIP device, the queue,
//! the write index, the packet type, and the clock around its doorbell): each row is a
//! logged packet of its kind, on its device, at its doorbell; and every packet logged
//! within a span of the trace is a row.

use std::{collections::BTreeMap, path::Path};

use serde_json::Value;

use crate::common::hex;

/// One packet as the simulated runtime published it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LoggedPacket {
    /// The HIP device whose agent the queue is on.
    pub device: u64,
    pub queue: u64,
    pub index: u64,
    /// As the trace names it.
    pub kind: &'static str,
    /// CLOCK_MONOTONIC just before and just after its doorbell rang.
    pub before_ns: i64,
    pub after_ns: i64,
}

/// The runtime's log (written at its exit).
pub(crate) fn read_every_packet_log(path: &Path) -> Vec<LoggedPacket> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            assert_eq!(f.len(), 6, "bad packet log line {l:?}");
            // The header's packet type (HSA_PACKET_TYPE_*; vendor-specific: AMD's
            // barrier-value, the only one the runtime publishes).
            let kind = match f[3] {
                "0" => "barrier_value",
                "2" => "kernel_dispatch",
                "3" => "barrier_and",
                "4" => "agent_dispatch",
                "5" => "barrier_or",
                t => panic!("packet type {t} in {l:?}"),
            };
            LoggedPacket {
                device: f[0].parse().unwrap(),
                queue: hex(f[1]),
                index: f[2].parse().unwrap(),
                kind,
                before_ns: f[4].parse().unwrap(),
                after_ns: f[5].parse().unwrap(),
            }
        })
        .collect()
}

/// One packet row of a trace, as the test reads it.
#[derive(Clone, Debug)]
pub(crate) struct PacketRow {
    /// `None`: the queue's agent is unknown (found at its first doorbell).
    pub agent: Option<u64>,
    pub queue: u64,
    pub index: u64,
    pub kind: String,
    /// The doorbell's time on CLOCK_MONOTONIC.
    pub at_ns: i64,
}

/// A row's start on CLOCK_MONOTONIC (the clock the scenarios log with).
pub(crate) fn monotonic_ns(trace: &Value, ts_us: f64) -> i64 {
    let base = trace["baseTimeNanoseconds"].as_i64().unwrap();
    let offset = trace["rocsync"]["clock_offset_ns"].as_i64().unwrap();
    base + (ts_us * 1000.0).round() as i64 - offset
}

/// The trace's packet rows.
pub(crate) fn packet_rows_of(trace: &Value) -> Vec<PacketRow> {
    trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "hsa_packet")
        .map(|e| {
            let a = &e["args"];
            PacketRow {
                agent: a["agent"].as_u64(),
                queue: hex(a["queue"].as_str().unwrap()),
                index: a["write_index"].as_u64().unwrap(),
                kind: e["name"].as_str().unwrap().to_string(),
                at_ns: monotonic_ns(trace, e["ts"].as_f64().unwrap()),
            }
        })
        .collect()
}

/// The first and last start (CLOCK_MONOTONIC) of the trace's call and packet rows: the
/// span it recorded, at least.
pub(crate) fn recorded_span(trace: &Value) -> (i64, i64) {
    let starts: Vec<i64> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && (e["cat"] == "cuda_runtime" || e["cat"] == "hsa_packet"))
        .map(|e| monotonic_ns(trace, e["ts"].as_f64().unwrap()))
        .collect();
    (*starts.iter().min().unwrap(), *starts.iter().max().unwrap())
}

/// How a trace's rows name the agent of a logged packet.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Agents {
    /// By its HIP device.
    Known,
    /// Unknown: its queue was found at a doorbell.
    Unknown,
}

/// Asserts the trace's packet rows are logged packets (`logged`), each once, of its
/// kind, on its device (or unknown), read at its doorbell; and that every logged packet
/// whose doorbell lies within `span` (and whose device `keep` admits) is a row. Returns
/// the rows.
pub(crate) fn assert_packets_of_log(
    trace: &Value,
    logged: &[LoggedPacket],
    span: (i64, i64),
    agents: Agents,
    keep: impl Fn(u64) -> bool,
) -> Vec<PacketRow> {
    let by_slot: BTreeMap<(u64, u64), &LoggedPacket> =
        logged.iter().map(|p| ((p.queue, p.index), p)).collect();
    assert_eq!(by_slot.len(), logged.len(), "each slot logged once");
    let rows = packet_rows_of(trace);
    let mut seen = BTreeMap::new();
    for r in &rows {
        let p = by_slot
            .get(&(r.queue, r.index))
            .unwrap_or_else(|| panic!("a row the runtime never published: {r:?}"));
        assert_eq!(r.kind, p.kind, "{r:?} against {p:?}");
        let agent = match agents {
            Agents::Known => Some(p.device),
            Agents::Unknown => None,
        };
        assert_eq!(r.agent, agent, "{r:?} against {p:?}");
        assert!(keep(p.device), "a row of a device not asked for: {r:?}");
        // Read by the doorbell's probe: between the runtime's clock readings around it
        // (1 ns either side for the row's rounding to its µs with 3 decimals).
        assert!(
            p.before_ns - 1 <= r.at_ns && r.at_ns <= p.after_ns + 1,
            "{r:?} not at its doorbell {p:?}"
        );
        assert!(
            seen.insert((r.queue, r.index), ()).is_none(),
            "twice: {r:?}"
        );
    }
    let missing: Vec<&LoggedPacket> = logged
        .iter()
        .filter(|p| keep(p.device) && span.0 <= p.before_ns && p.after_ns <= span.1)
        .filter(|p| !seen.contains_key(&(p.queue, p.index)))
        .collect();
    assert!(
        missing.is_empty(),
        "{} packet(s) published within the span {span:?} missing, the first {:?}",
        missing.len(),
        missing.first()
    );
    rows
}
