//! Stuck ranks, found on their own node: each second the collective numbers the probes
//! keep of every tracked rank are compared. A rank is traced (with its stacks) when its
//! collectives stopped advancing for `--hang-after` while another local rank of its
//! communicator (same user and cgroup: `collectives::Owner`) entered a later one — `behind`, whether or not any rank
//! blocks in a call — or for [`USUAL_TIMES`] its own usual interval between collectives
//! (and `--hang-after` at least) — `stopped`. So every node of a hung job writes what it
//! knows without talking to the others. A rank is traced once per collective it stops
//! at, never while another of the daemon's traces records it; bounded per user and per
//! node like the hangs, and what is held back is counted.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use rocsync_common::{Api, CommState};
use serde_json::{Value, json};

use crate::daemon::{
    serving::exposition::families::{STUCK_TRACES, STUCK_UNTRACED},
    triggers::{
        collectives::{Owner, owner},
        origin::Origin,
        origin::Start,
        origin::TraceSpec,
        origin::Unasked,
        trigger::Action,
        trigger::Began,
        trigger::Counter,
        trigger::Look,
        trigger::Trigger,
        view::View,
    },
};

/// A rank stopped for this many times its usual interval between collectives is stuck.
pub(crate) const USUAL_TIMES: u64 = 50;
/// Collectives seen before a rank's usual interval is known.
const KNOWN_AFTER: u64 = 8;
/// Traces of stuck ranks recording at once, per user and on the node.
pub(crate) const PER_USER: usize = 2;
pub(crate) const PER_NODE: usize = 8;

/// What was first seen of a communicator of a rank: its number and when it was entered.
#[derive(Clone, Copy)]
struct First {
    seq: u64,
    ns: u64,
}

/// A rank's trace recording: its id and the collective it stopped at.
struct Open {
    trace: u64,
    seq: u64,
}

#[derive(Default)]
pub(crate) struct Stuck {
    first: HashMap<(u32, u64), First>,
    open: HashMap<u32, Open>,
    /// The collective each rank was last traced (or held back) at: once per collective.
    done: HashMap<u32, u64>,
    /// Asked for, not yet begun: pid → its collective number.
    asked: HashMap<u32, u64>,
    traces: BTreeMap<&'static str, u64>,
    untraced: BTreeMap<&'static str, u64>,
}

/// A rank found stuck: its process, communicator handle, state, why and for how long.
struct Found {
    pid: u32,
    uid: u32,
    comm: CommState,
    why: &'static str,
    stopped_ns: u64,
    usual_ns: Option<u64>,
    others_at: u64,
}

impl Trigger for Stuck {
    fn on_look(&mut self, look: &Look, v: &View) -> Vec<Action> {
        let Some(after) = v.config.hang_after else {
            return Vec::new();
        };
        let live = |pid: u32| v.tracked(pid) && crate::os::procfs::exists(pid);
        let ranks: Vec<(u32, u64, CommState, Owner)> = (look.comms.iter())
            .filter(|(pid, _, c)| c.id != 0 && c.seq > 0 && live(*pid))
            .filter_map(|&(pid, h, c)| Some((pid, h, c, owner(pid)?)))
            .collect();
        self.first.retain(|(pid, _), _| live(*pid));
        self.done.retain(|pid, _| live(*pid));
        let mut actions = self.ended(&ranks, v);
        for (pid, handle, c, own) in &ranks {
            let (pid, handle, c, uid) = (*pid, *handle, *c, own.uid);
            let first = *self.first.entry((pid, handle)).or_insert(First {
                seq: c.seq,
                ns: c.last_ns,
            });
            let stopped_ns = look.now_ns.saturating_sub(c.last_ns);
            let usual_ns = (c.seq - first.seq >= KNOWN_AFTER)
                .then(|| c.last_ns.saturating_sub(first.ns) / (c.seq - first.seq));
            // Another local rank of the same communicator, user and cgroup, further on.
            let others_at = (ranks.iter())
                .filter(|r| r.2.id == c.id && r.3 == *own && r.0 != pid)
                .map(|r| r.2.seq)
                .max()
                .unwrap_or(0);
            let long = stopped_ns >= after.as_nanos() as u64;
            let why = match usual_ns {
                _ if long && others_at > c.seq => "behind",
                Some(u) if long && stopped_ns >= u.saturating_mul(USUAL_TIMES) => "stopped",
                _ => continue,
            };
            if self.done.get(&pid) == Some(&c.seq) || self.asked.contains_key(&pid) {
                continue;
            }
            let found = Found {
                pid,
                uid,
                comm: c,
                why,
                stopped_ns,
                usual_ns,
                others_at,
            };
            actions.extend(self.decide(found, v).map(|s| Action::Start(Box::new(s))));
        }
        actions
    }

    fn began(&mut self, _kind: Unasked, o: &Value, began: Began) {
        let pid = o["pid"].as_u64().unwrap_or_default() as u32;
        let Some(seq) = self.asked.remove(&pid) else {
            return;
        };
        let why = if o["reason"] == "behind" {
            "behind"
        } else {
            "stopped"
        };
        match began {
            Ok((trace, stem)) => {
                *self.traces.entry(why).or_default() += 1;
                self.open.insert(pid, Open { trace, seq });
                crate::say!(
                    "rocsync daemon: stuck rank: pid {pid} (rank {}) has been at #{seq} of comm {} for {:.1} s ({why}): tracing it as {stem}.json",
                    o["rank"],
                    o["comm"].as_str().unwrap_or("?"),
                    o["stopped_s"].as_f64().unwrap_or(0.0)
                );
            }
            Err(e) => {
                self.hold(pid, seq, "not_started");
                crate::say!("rocsync daemon: stuck rank (pid {pid}) not traced: {e:#}");
            }
        }
    }

    fn counters(&self, out: &mut Vec<Counter>) {
        for (family, counts, reasons) in [
            (&STUCK_TRACES, &self.traces, &["behind", "stopped"][..]),
            (
                &STUCK_UNTRACED,
                &self.untraced,
                &["traced", "user_limit", "node_limit", "not_started"][..],
            ),
        ] {
            for &r in reasons {
                out.push(Counter {
                    family,
                    label: Some(("reason", r)),
                    value: counts.get(r).copied().unwrap_or(0) as f64,
                });
            }
        }
    }
}

impl Stuck {
    /// The trace of a rank found stuck, unless the bounds hold it back (counted once per
    /// collective it stopped at).
    fn decide(&mut self, f: Found, v: &View) -> Option<Start> {
        let (pid, seq) = (f.pid, f.comm.seq);
        // A hang or laggard trace of the daemon's records it already.
        if v.unasked_recording(pid) {
            self.hold(pid, seq, "traced");
            return None;
        }
        let stuck_users: Vec<u32> = (self.open.keys())
            .filter_map(|&p| crate::os::procfs::uid(p))
            .collect();
        if stuck_users.iter().filter(|&&u| u == f.uid).count() >= PER_USER {
            self.hold(pid, seq, "user_limit");
            return None;
        }
        if self.open.len() >= PER_NODE {
            self.hold(pid, seq, "node_limit");
            return None;
        }
        self.asked.insert(pid, seq);
        let known = |n: u32| (n != u32::MAX).then_some(n);
        let o = json!({
            "pid": pid, "tid": pid, "reason": f.why,
            "comm": format!("{:#x}", f.comm.id), "rank": known(f.comm.rank),
            "nranks": known(f.comm.nranks), "seq": seq,
            "api": Api::from_u32(f.comm.last_api).map(|a| a.symbol()),
            "stopped_s": f.stopped_ns as f64 / 1e9,
            "usual_interval_s": f.usual_ns.map(|u| u as f64 / 1e9),
            "others_at": (f.others_at > 0).then_some(f.others_at),
            "ended": "bound",
        });
        let name = format!(
            "{}-{pid}",
            if f.why == "behind" { "behind" } else { "stuck" }
        );
        let spec = TraceSpec::of(pid, v.config.hang_bound, name);
        Some(Start::new(spec, Origin::Unasked(Unasked::Stuck, o)))
    }

    /// A rank held back at collective `seq`, for `why`: counted once.
    fn hold(&mut self, pid: u32, seq: u64, why: &'static str) {
        if self.done.insert(pid, seq) != Some(seq) {
            *self.untraced.entry(why).or_default() += 1;
        }
    }

    /// The traced ranks that moved on (or exited): their traces end a stall's window
    /// later.
    fn ended(&mut self, ranks: &[(u32, u64, CommState, Owner)], v: &View) -> Vec<Action> {
        let mut actions = Vec::new();
        self.open.retain(|&pid, o| {
            let now = ranks.iter().filter(|r| r.0 == pid).map(|r| r.2.seq).max();
            let how = match now {
                None => "exited",
                Some(seq) if seq > o.seq => "advanced",
                Some(_) if !v.recording(o.trace) => "bound",
                Some(_) => return true,
            };
            if how != "bound" {
                let after = match how {
                    "advanced" => v.config.stall_window_after,
                    _ => Duration::ZERO,
                };
                actions.push(Action::End {
                    trace: o.trace,
                    how,
                    after,
                });
            }
            self.done.insert(pid, o.seq);
            false
        });
        actions
    }
}
