//! A flight recorder dump: what the recorder held, written as traces off the daemon's
//! loop — every id after what the recorder may lack accounted for, each file within its
//! bound, and ended early (counted) when root asks for a dump of its own.

use std::{
    collections::BTreeMap,
    path::Path,
    sync::atomic::{AtomicBool, Ordering},
};

use anyhow::Result;
use rocsync_common::{Decoded, decode};
use serde_json::{Value, json};

use crate::calls::emit::{
    outputs::Report,
    processes::{ProcessInfo, Written},
};
use crate::daemon::recording::files;

/// A dump written: its files, and whether it was cut at its bound.
pub(crate) type Dumped = (Vec<Written>, bool);

/// The first id a dump must account for: the one after what the recorder may lack
/// without losing it (ids before it began, and those it forgot for age or memory) —
/// the calls between that and its first held one are lost, counted, not silently
/// missing from its start. Where that is unknown, or its first held call is older (the
/// records of one span are read in any order across CPUs), its first held call.
pub(crate) fn first_expected(
    first: Option<u64>,
    known_from: Option<u64>,
    assigned: Option<u64>,
) -> u64 {
    match (first, known_from) {
        (Some(first), Some(known)) if first > known => known + 1,
        (Some(first), _) => first,
        (None, Some(known)) => known + 1,
        (None, None) => assigned.map_or(1, |a| a + 1),
    }
}

/// Writes what the flight recorder holds (every process's last seconds) as traces;
/// `processes`: what the processes it may hold said of themselves; `call_probe_links`:
/// how the call probes are attached; `not_recorded`: what the budget shed or cycled off
/// within its span, and (`unrecorded`) the calls estimated in the duty cycle's periods
/// off and the returns of such calls not kept; `assigned`: the last id the probes had
/// given. Each
/// file at most `max_bytes`, as any trace (a recorder of 256 MiB wrote 1.64 GB files):
/// past it, the rows are counted as left out and the dump says it was truncated.
pub(crate) fn dump<'a>(
    records: impl Iterator<Item = &'a [u8]> + Clone,
    (assigned, known_from): (Option<u64>, Option<u64>),
    (state_dir, max_bytes): (&Path, u64),
    (id, preempted): (u64, &AtomicBool),
    processes: BTreeMap<u32, ProcessInfo>,
    (call_probe_links, not_recorded, unrecorded): (&'static str, Value, (u64, u64)),
) -> Result<Dumped> {
    let (mut pipeline, outputs) =
        files::open(state_dir, &files::numbered_stem("flight", id), id, None)?;
    pipeline.sink_mut().trace_mut().bound(max_bytes);
    let first = records
        .clone()
        .filter_map(|r| match decode(r) {
            Ok(Decoded::Entry(e)) => Some(e.correlation),
            _ => None,
        })
        .min();
    let start = first_expected(first, known_from, assigned);
    pipeline.start_at(start);
    // Root's request ends it early: the records not written are counted.
    let mut records = records.enumerate();
    let mut not_written = None;
    while let Some((i, r)) = records.next() {
        if i % PREEMPT_EVERY == 0 && preempted.load(Ordering::Relaxed) {
            not_written = Some(1 + records.by_ref().count() as u64);
            pipeline.sink_mut().trace_mut().cut_short();
            break;
        }
        let _ = pipeline.record(r);
    }
    // Ids after the last record read were given, so lost (the ring was full, or the
    // records never came): counted, never silently missing from the end. Not those of a
    // dump ended early: its records not written are counted as such.
    if let Some(last) = assigned.filter(|_| not_written.is_none()) {
        pipeline.assigned_up_to(last.max(start - 1));
    }
    pipeline.stopping();
    let (sink, mut stats) = pipeline.finish()?;
    stats.duty_cycled = unrecorded.0;
    let truncated = truncated(id, max_bytes, sink.trace(), not_written);
    let cut = truncated.is_some();
    let report = Report {
        parameters: json!({
            "mode": "daemon flight recorder", "id": id, "call_probe_links": call_probe_links,
            "not_recorded": not_recorded, "truncated": truncated,
            "returns_of_unrecorded_calls": unrecorded.1,
        }),
        libraries: Vec::new(),
        single_stepped: Vec::new(),
        processes,
    };
    Ok((outputs.finish(sink, &stats, report)?, cut))
}

/// Records written between two looks at whether root's request ended the dump.
const PREEMPT_EVERY: usize = 4096;

/// Why a dump ended early, said in the log: `not_written`, the records left when root's
/// request ended it; else its file reached `max_bytes`. `None`: it is whole.
fn truncated(
    id: u64,
    max_bytes: u64,
    files: &crate::calls::emit::processes::ProcessTraces,
    not_written: Option<u64>,
) -> Option<Value> {
    let left_out = files.left_out()?;
    let largest = files.largest_file();
    let Some(records) = not_written else {
        crate::say!(
            "rocsync daemon: flight recorder dump {id} cut at --trace-max-bytes ({max_bytes} bytes): {left_out} rows left out"
        );
        return Some(json!({
            "reason": "size", "max_bytes": max_bytes, "bytes_when_ended": largest,
            "left_out": left_out,
        }));
    };
    crate::say!(
        "rocsync daemon: flight recorder dump {id} ends early: root asked for a dump; {records} records not written"
    );
    Some(json!({
        "reason": "preempted", "by": "a flight recorder dump of root's",
        "records_not_written": records, "left_out": left_out, "bytes_when_ended": largest,
        "at_unix_us": crate::daemon::tracking::apart::shed_log::now_us(),
    }))
}
