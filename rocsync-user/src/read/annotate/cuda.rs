//! CUDA: CUPTI writes a `cuda_sync` row for every event wait (Stream Wait Event, Event
//! Sync) but, on CUDA 12.9+/13, leaves its producer unresolved (`wait_on_stream: -1`,
//! `wait_on_cuda_event_record_corr_id: -1`; kineto#1552). Annotate fills those two
//! fields on the rows CUPTI left unresolved, in the trace's own terms: the recording
//! stream's CUPTI id and the correlation of the record's runtime row. A row CUPTI
//! resolved is never changed; rocsync's answer is compared with it and a disagreement is
//! counted and shown.

use super::{
    edit::set_int,
    process::Process,
    summary::{Reason, Summary},
};
use crate::calls::resolve::Producer;

/// Event-wait rows as CUPTI names them (`cuda_sync_kind`).
const EVENT_WAITS: [&str; 2] = ["Stream Wait Event", "Event Sync"];

/// The edits to make: (index in `traceEvents`, new text of that element).
pub(super) fn fill(p: &Process, s: &mut Summary) -> Vec<(usize, String)> {
    let mut edits = Vec::new();
    let w = &mut s.waits;
    for d in &p.profile.device {
        if d.cat != "cuda_sync" || !EVENT_WAITS.contains(&d.name.as_str()) {
            continue;
        }
        if !p.ours.contains(&d.correlation) {
            continue;
        }
        w.rows += 1;
        let cupti = match (d.wait_on_stream, d.wait_on_record) {
            (Some(st), Some(rec)) if st >= 0 && rec >= 0 => Some((st, rec)),
            _ => None,
        };
        w.resolved_before += usize::from(cupti.is_some());
        let answer = producer_of(p, d.correlation);
        match (cupti, answer) {
            (Some(c), Ok(r)) if c == r => w.agreed += 1,
            (Some(c), Ok(r)) => {
                w.disagreed += 1;
                if s.disagreements.len() < 10 {
                    s.disagreements.push(format!(
                        "correlation {}: CUPTI says stream {} record {}, rocsync stream {} record {}",
                        d.correlation, c.0, c.1, r.0, r.1
                    ));
                }
            }
            (Some(_), Err(_)) => {}
            (None, Err(why)) => w.leave(why),
            (None, Ok((stream, record))) => {
                let text = p.profile.event_text(d.event);
                let edited = set_int(text, "wait_on_stream", stream)
                    .and_then(|t| set_int(&t, "wait_on_cuda_event_record_corr_id", record));
                match edited {
                    Some(t) => {
                        edits.push((d.event, t));
                        w.filled += 1;
                    }
                    // CUPTI writes both keys on every event wait; a row without them is
                    // not CUPTI's, and is left alone.
                    None => w.leave(Reason::NoCall),
                }
            }
        }
    }
    w.resolved_after = w.resolved_before + w.filled;
    edits
}

/// The producer of the profiler's wait `correlation` in the profiler's terms:
/// (recording stream id, record row's correlation), or why it cannot be named.
pub(super) fn producer_of(p: &Process, correlation: i64) -> Result<(i64, i64), Reason> {
    let rc = p
        .matches
        .to_rocsync
        .get(&correlation)
        .ok_or(Reason::NoCall)?;
    let row = p.rows.get(rc).ok_or(Reason::NoCall)?;
    let pr = match (row.producer, row.unresolved) {
        (Some(pr), _) => pr,
        (None, Some(u)) => return Err(Reason::Unresolved(u.name())),
        (None, None) => return Err(Reason::Unresolved("no_event")),
    };
    in_profile(p, &pr)
}

/// A record rocsync resolved, in the profiler's terms.
pub(super) fn in_profile(p: &Process, pr: &Producer) -> Result<(i64, i64), Reason> {
    let record = *p
        .matches
        .to_profiler
        .get(&pr.correlation)
        .ok_or(Reason::ProducerNotInProfile)?;
    let stream = p
        .streams
        .get((pr.device, pr.stream_index))
        .ok_or(Reason::ProducerStreamUnknown)?;
    Ok((stream.1, record))
}
