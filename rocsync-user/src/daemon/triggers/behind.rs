//! Ranks behind: when a hang's call waits in a collective that other local ranks of its
//! communicator have not entered yet, each of them is traced too — what the laggard does
//! meanwhile — for as long as the hang's trace at most, and ends with it. Bounded per
//! user and on the node (one user's hung jobs once took every slot: root's laggard went
//! untraced, unsaid); what is held back is counted and said.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde_json::{Value, json};

use crate::daemon::serving::exposition::families::BEHIND_UNTRACED;
use crate::daemon::triggers::{
    origin::Origin, origin::Start, origin::TraceSpec, origin::Unasked, trigger::Action,
    trigger::Began, trigger::Counter, trigger::Trigger, view::View,
};

/// Ranks behind traced at once, per user and on the node: a hang of many local ranks
/// names the same few laggards, each traced once; no user takes every slot.
pub(crate) const PER_USER: usize = 2;
pub(crate) const PER_NODE: usize = 8;

#[derive(Default)]
pub(crate) struct Behind {
    /// The collective each laggard was last held back at: counted once per collective.
    held: HashMap<u32, u64>,
    /// Asked for, not yet begun (the hangs of one look each ask before any begins):
    /// pid → its user.
    asked: HashMap<u32, Option<u32>>,
    untraced: BTreeMap<&'static str, u64>,
}

impl Trigger for Behind {
    /// A hang began: the ranks behind in its collective (`behind` of its object) are
    /// traced, unless a trace of one as a laggard (or a stuck rank) records already, or
    /// [`PER_USER`] of its user's or [`PER_NODE`] do (held back: counted and said).
    fn on_began(&mut self, origin: &Origin, _id: u64, v: &View) -> Vec<Action> {
        let Some((Unasked::Hang, hang)) = origin.unasked() else {
            return Vec::new();
        };
        let Some(ranks) = hang["behind"].as_array() else {
            return Vec::new();
        };
        // Each laggard traced now, and its user (when the trace began).
        let mut traced: Vec<(u64, Option<u32>)> = (v.traces())
            .filter_map(|(_, o, _)| match o.unasked() {
                Some((Unasked::Behind, b)) => Some((b["pid"].as_u64()?, b["uid"].as_u64())),
                _ => None,
            })
            .map(|(pid, uid)| (pid, uid.and_then(|u| u32::try_from(u).ok())))
            .chain(self.asked.iter().map(|(&pid, &uid)| (u64::from(pid), uid)))
            .collect();
        self.held.retain(|&pid, _| crate::os::procfs::exists(pid));
        let mut actions = Vec::new();
        for b in ranks {
            let Some(pid) = b["pid"].as_u64().and_then(|p| u32::try_from(p).ok()) else {
                continue;
            };
            // Traced already as a laggard, or as a stuck rank (found before the hang was).
            if traced.iter().any(|t| t.0 == u64::from(pid)) || v.unasked_recording(pid) {
                continue;
            }
            let uid = crate::os::procfs::uid(pid);
            let why = if traced.iter().filter(|t| t.1 == uid).count() >= PER_USER {
                "user_limit"
            } else if traced.len() >= PER_NODE {
                "node_limit"
            } else {
                let Some(start) = trace_of_behind(b, uid, hang, v.config.hang_bound) else {
                    continue;
                };
                traced.push((u64::from(pid), uid));
                self.asked.insert(pid, uid);
                actions.push(Action::Start(Box::new(start)));
                continue;
            };
            self.hold(pid, b, why);
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
        let pid = b["pid"].as_u64().unwrap_or_default() as u32;
        self.asked.remove(&pid);
        match began {
            Ok((_, stem)) => crate::say!(
                "rocsync daemon: rank behind: pid {} is at #{} of comm {}: tracing it as {stem}.json",
                b["pid"],
                b["seq"],
                b["comm"].as_str().unwrap_or("?"),
            ),
            Err(e) => {
                self.hold(pid, b, "not_started");
                crate::say!("rocsync daemon: rank behind (pid {pid}) not traced: {e:#}");
            }
        }
    }

    fn counters(&self, out: &mut Vec<Counter>) {
        for r in ["user_limit", "node_limit", "not_started"] {
            out.push(Counter {
                family: &BEHIND_UNTRACED,
                label: Some(("reason", r)),
                value: self.untraced.get(r).copied().unwrap_or(0) as f64,
            });
        }
    }
}

impl Behind {
    /// A laggard `b` held back for `why`: counted once per collective it is at, and said
    /// (a limit's once too).
    fn hold(&mut self, pid: u32, b: &Value, why: &'static str) {
        let seq = b["seq"].as_u64().unwrap_or_default();
        if self.held.insert(pid, seq) == Some(seq) {
            return;
        }
        *self.untraced.entry(why).or_default() += 1;
        let limit = match why {
            "user_limit" => format!("{PER_USER} of its user's laggards are traced already"),
            "node_limit" => format!("{PER_NODE} laggards are traced already"),
            _ => return,
        };
        crate::say!(
            "rocsync daemon: rank behind: pid {pid} is at #{seq} of comm {}: not traced, {limit} ({why})",
            b["comm"].as_str().unwrap_or("?"),
        );
    }
}

/// The trace of a rank behind (`b`, an element of `collectives::behind`) while
/// `waited_by` (the hang object of a rank blocked in the collective) waits for it: what
/// the laggard does meanwhile, for as long as the hang's trace at most (`bound`); `uid`:
/// its user (whose share of the slots it takes).
pub(crate) fn trace_of_behind(
    b: &Value,
    uid: Option<u32>,
    waited_by: &Value,
    bound: Duration,
) -> Option<Start> {
    let pid = u32::try_from(b["pid"].as_u64()?).ok()?;
    let behind = json!({
        "pid": pid, "uid": uid, "rank": b["rank"], "seq": b["seq"], "comm": b["comm"],
        "waited_by": {
            "pid": waited_by["pid"], "api": waited_by["api"],
            "collective": waited_by["collective"],
        },
        "ended": "bound",
    });
    let spec = TraceSpec::of(pid, bound, format!("behind-{pid}"));
    Some(Start::new(spec, Origin::Unasked(Unasked::Behind, behind)))
}
