//! Hang detection: a synchronisation still blocked after `--hang-after` (1 s; at least
//! the stall threshold) is a hang candidate while it is blocked (a deadlocked collective never returns, so a stall seen
//! at the return comes too late). Each second the daemon reads the calls in flight the
//! probes keep anyway (each counted thread's call start, `PENDING`); a tracked process
//! with one past the threshold is traced from then — what the flight recorder holds of it
//! first — until the call returns (plus `--stall-window-after`), the process exits, or
//! `--hang-bound` passes: the trace's `rocsync.parameters.hang.ended` says which.

use std::collections::{BTreeMap, HashMap};

use rocsync_common::{Api, Cookie};
use serde_json::json;
use tokio::time::Instant;

use super::{stalls::stamp, state::Daemon, traces::TraceSpec};
use crate::clock;

/// A hang being traced.
struct Hang {
    /// Its trace's id.
    trace: u64,
    tid: u32,
    entry_ns: u64,
}

#[derive(Default)]
pub struct Hangs {
    open: HashMap<u32, Hang>,
    /// Hangs whose trace could not start, by process: (its call's entry), said once.
    refused: HashMap<u32, u64>,
    /// The oldest call in flight of each synchronising API, in seconds (last look).
    pub oldest: BTreeMap<&'static str, f64>,
    pub traces: u64,
}

impl Hangs {
    /// Whether a hang trace records `pid` now (its stall, when the call returns, is in it).
    pub fn tracing(&self, pid: u32) -> bool {
        self.open.contains_key(&pid)
    }
}

impl Daemon {
    /// Looks at the calls in flight: hangs begin and end.
    pub fn check_in_flight(&mut self) {
        self.hangs.oldest.clear();
        if self.config.capture_on_stall.is_none() {
            return;
        }
        let threshold = self.config.hang_after;
        let Ok(calls) = self.tracker.probes.calls_in_flight() else {
            return;
        };
        let now_ns = clock::monotonic_ns() as u64;
        let mut blocked = Vec::new();
        for &(pid, tid, c) in &calls {
            let Some(api) = Api::from_u32(c.api) else {
                continue;
            };
            if !self.tracker.tracked.contains(&pid)
                || Cookie::of(api).kind() != Cookie::KIND_SYNC
                || api.is_polling()
            {
                continue;
            }
            let age = now_ns.saturating_sub(c.ns);
            let oldest = self.hangs.oldest.entry(api.symbol()).or_default();
            *oldest = oldest.max(age as f64 / 1e9);
            if age >= threshold.as_nanos() as u64 {
                blocked.push((pid, tid, api, c.ns));
            }
        }
        self.end_hangs(&calls);
        self.hangs
            .refused
            .retain(|&pid, entry| calls.iter().any(|&(p, _, c)| p == pid && c.ns == *entry));
        for (pid, tid, api, entry_ns) in blocked {
            let refused = self.hangs.refused.get(&pid) == Some(&entry_ns);
            if !self.hangs.open.contains_key(&pid) && !refused {
                self.begin_hang(pid, tid, api, (entry_ns, now_ns));
            }
        }
    }

    /// Ends the hang traces whose call returned or whose process exited.
    fn end_hangs(&mut self, calls: &[(u32, u32, rocsync_common::PendingCall)]) {
        let ended: Vec<(u32, &'static str)> = self
            .hangs
            .open
            .iter()
            .filter_map(|(&pid, h)| {
                let blocked = calls
                    .iter()
                    .any(|&(p, t, c)| p == pid && t == h.tid && c.ns == h.entry_ns);
                match (blocked, crate::procfs::exists(pid)) {
                    (true, true) => None,
                    (_, true) => Some((pid, "returned")),
                    (_, false) => Some((pid, "exited")),
                }
            })
            .collect();
        for (pid, how) in ended {
            self.end_hang(pid, how);
        }
    }

    /// The hang of `pid` ended (`how`: returned, exited): its trace goes on for the
    /// window after a stall (after a return), then is written.
    fn end_hang(&mut self, pid: u32, how: &'static str) {
        let Some(h) = self.hangs.open.remove(&pid) else {
            return;
        };
        let after = match how {
            "returned" => self.config.stall_window_after,
            _ => Default::default(),
        };
        let until = Instant::now() + after;
        if let Some((_, t)) = self
            .sessions
            .traces
            .iter_mut()
            .find(|(_, t)| t.id == h.trace)
        {
            t.until = t.until.min(until);
            if let Some(hang) = &mut t.hang {
                hang["ended"] = how.into();
            }
        }
        crate::say!("rocsync daemon: hang of pid {pid}: the call {how}");
    }

    /// A stall's return: the hang's own call, if one is traced (it returned just now,
    /// whatever the process does next).
    pub fn stall_of_hang(&mut self, pid: u32, tid: u32, entry_ns: u64) -> bool {
        let own = self
            .hangs
            .open
            .get(&pid)
            .is_some_and(|h| h.tid == tid && h.entry_ns == entry_ns);
        if own {
            self.end_hang(pid, "returned");
        }
        self.hangs.tracing(pid) || own
    }

    fn begin_hang(&mut self, pid: u32, tid: u32, api: Api, (entry_ns, now_ns): (u64, u64)) {
        // One stall or hang trace per interval, per process and per node: a storm of
        // them is counted (its stalls, at their return), not traced each.
        if self
            .stalls
            .admit(pid, Instant::now(), self.config.stall_interval)
            .is_err()
        {
            self.hangs.refused.insert(pid, entry_ns);
            return;
        }
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let name = format!("hang-{}-{pid}-{}", api.symbol(), stamp(unix));
        let spec = TraceSpec {
            flight: false,
            pids: vec![pid],
            cgroup: None,
            pod: None,
            agents: Default::default(),
            duration: self.config.hang_bound,
            name: name.clone(),
            output: None,
        };
        let offset = clock::realtime_offset_ns();
        let id = self.take_id();
        let hang = json!({
            "api": api.symbol(), "pid": pid, "tid": tid,
            "entry_unix_us": (entry_ns as i64 + offset) / 1000,
            "blocked_ms_when_found": now_ns.saturating_sub(entry_ns) as f64 / 1e6,
            // Until it is seen to return or its process to exit.
            "ended": "bound",
        });
        let started = self.trace_one(spec, pid, id, |t| t.hang = Some(hang));
        match started {
            Ok(()) => {
                self.hangs.open.insert(
                    pid,
                    Hang {
                        trace: id,
                        tid,
                        entry_ns,
                    },
                );
                self.hangs.traces += 1;
                crate::say!(
                    "rocsync daemon: hang: pid {pid}'s {} (thread {tid}) still blocked: traced as {name}.json",
                    api.symbol()
                );
            }
            Err(e) => {
                self.hangs.refused.insert(pid, entry_ns);
                crate::say!("rocsync daemon: hang of pid {pid} not traced: {e:#}");
            }
        }
    }
}
