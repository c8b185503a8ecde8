//! Ranks behind: when a hang's call waits in a collective that other local ranks of its
//! communicator have not entered yet, each of them is traced too — what the laggard does
//! meanwhile — for as long as the hang's trace at most, and ends with it.

use std::time::Duration;

use serde_json::{Value, json};

use crate::daemon::triggers::{
    origin::Origin, origin::Start, origin::TraceSpec, origin::Unasked, trigger::Action,
    trigger::Began, trigger::Trigger, view::View,
};

/// Ranks behind traced at once on the node: a hang of many local ranks names the same
/// few laggards, each traced once.
pub const MAX_BEHIND_TRACES: usize = 4;

#[derive(Default)]
pub struct Behind;

impl Trigger for Behind {
    /// A hang began: the ranks behind in its collective (`behind` of its object) are
    /// traced, unless a trace of one as a laggard (or a stuck rank) records already or
    /// [`MAX_BEHIND_TRACES`] do.
    fn on_began(&mut self, origin: &Origin, _id: u64, v: &View) -> Vec<Action> {
        let Some((Unasked::Hang, hang)) = origin.unasked() else {
            return Vec::new();
        };
        let Some(ranks) = hang["behind"].as_array() else {
            return Vec::new();
        };
        let mut traced: Vec<u64> = (v.traces())
            .filter_map(|(_, o, _)| match o.unasked() {
                Some((Unasked::Behind, b)) => b["pid"].as_u64(),
                _ => None,
            })
            .collect();
        let mut actions = Vec::new();
        for b in ranks {
            let pid = b["pid"].as_u64();
            if pid.is_none_or(|p| traced.contains(&p)) || traced.len() >= MAX_BEHIND_TRACES {
                continue;
            }
            // Traced already as a stuck rank (found before the hang was).
            if pid.is_some_and(|p| v.unasked_recording(p as u32)) {
                continue;
            }
            if let Some(start) = trace_of_behind(b, hang, v.config.hang_bound) {
                traced.extend(pid);
                actions.push(Action::Start(Box::new(start)));
            }
        }
        actions
    }

    /// A laggard's trace ends with the hang that waited for it.
    fn on_ended(&mut self, origin: &Origin, after: Duration, v: &View) -> Vec<Action> {
        let Some((Unasked::Hang, hang)) = origin.unasked() else {
            return Vec::new();
        };
        (v.traces())
            .filter(|(_, o, _)| match o.unasked() {
                Some((Unasked::Behind, b)) => b["waited_by"]["pid"] == hang["pid"],
                _ => false,
            })
            .map(|(trace, _, _)| Action::End {
                trace,
                how: "hang_ended",
                after,
            })
            .collect()
    }

    fn began(&mut self, _kind: Unasked, b: &Value, began: Began) {
        match began {
            Ok((_, stem)) => crate::say!(
                "rocsync daemon: rank behind: pid {} is at #{} of comm {}: tracing it as {stem}.json",
                b["pid"],
                b["seq"],
                b["comm"].as_str().unwrap_or("?"),
            ),
            Err(e) => crate::say!(
                "rocsync daemon: rank behind (pid {}) not traced: {e:#}",
                b["pid"]
            ),
        }
    }
}

/// The trace of a rank behind (`b`, an element of `collectives::behind`) while
/// `waited_by` (the hang object of a rank blocked in the collective) waits for it: what
/// the laggard does meanwhile, for as long as the hang's trace at most (`bound`).
pub fn trace_of_behind(b: &Value, waited_by: &Value, bound: Duration) -> Option<Start> {
    let pid = u32::try_from(b["pid"].as_u64()?).ok()?;
    let behind = json!({
        "pid": pid, "rank": b["rank"], "seq": b["seq"], "comm": b["comm"],
        "waited_by": {
            "pid": waited_by["pid"], "api": waited_by["api"],
            "collective": waited_by["collective"],
        },
        "ended": "bound",
    });
    let spec = TraceSpec::of(pid, bound, format!("behind-{pid}"));
    Some(Start::new(spec, Origin::Unasked(Unasked::Behind, behind)))
}
