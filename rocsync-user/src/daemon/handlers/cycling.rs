//! The budget's duty cycle turned each budget period (`tracking/cycle.rs`): files join
//! it when a process they serve is over the budget with records and waits alone, it is
//! sized by their share measured while on, and it ends when that share fits the budget.
//! Probes are file-wide: a file that also serves another user's processes never joins
//! (one user's loop would make another's counts estimates and blind their hangs'
//! chains), and a cycle ends when another user's process maps one of its files.

use std::collections::BTreeMap;

use rocsync_common::MetricKey;
use tokio::time::Instant;

use crate::daemon::{
    state::Daemon,
    tracking::{
        budget,
        cycle::Turn,
        discovery::Tracker,
        estimate::{Counts, is_cycled},
    },
};
use crate::units::Share;

/// Whether the live processes of `pids` are all one user's.
fn one_user(pids: &std::collections::BTreeSet<u32>) -> bool {
    let mut uids = pids.iter().filter_map(|&p| crate::procfs::uid(p));
    let first = uids.next();
    uids.all(|u| Some(u) == first)
}

/// What the kernel has counted now of the cycled APIs, and of each tracked process.
pub fn counts(t: &mut Tracker) -> Counts {
    let mut series = BTreeMap::new();
    let slot = |k: &MetricKey| MetricKey::slot(k.api, k.device);
    for (k, v) in t.probes.metrics().unwrap_or_default() {
        if let Some(s) = slot(&k).filter(|_| is_cycled(&k)) {
            series.insert((0, s), v.calls);
        }
    }
    if t.pods.labels().any() {
        for (g, k, v) in t.probes.group_metrics().unwrap_or_default() {
            if let Some(s) = slot(&k).filter(|_| is_cycled(&k)) {
                series.insert((g, s), v.calls);
            }
        }
    }
    let mut pids = BTreeMap::new();
    for pid in t.tracked.clone() {
        if let Some((calls, _)) = t.probes.target_calls(pid) {
            pids.insert(pid, (calls, t.pods.group_of(pid), t.files.cycles(pid)));
        }
    }
    Counts {
        at: Instant::now(),
        series,
        pids,
    }
}

impl Daemon {
    /// One budget period of the cycle: `over` are the processes whose records and waits
    /// alone cost more than `limit` (measured over the period just ended), `kept` every
    /// measured process's share of them. Returns those of `over` it cannot take: a file
    /// they map serves another user's processes too.
    pub fn turn_cycle(
        &mut self,
        limit: Share,
        over: &[(u32, f64)],
        kept: &BTreeMap<u32, f64>,
    ) -> Vec<(u32, f64)> {
        let now = Instant::now();
        let t = &mut self.tracker;
        let mut shared = Vec::new();
        // A recording holds the cycle, its probes on (`Tracker::returns_on`).
        if t.returns.on() {
            return shared;
        }
        // Another user's process maps a cycled file now: the cycle ends (it may start
        // again without that file).
        if (t.files.cycled()).any(|(pids, c)| c.cycling && !one_user(pids)) {
            t.estimates.stop(now);
            for (_, c) in t.files.cycled() {
                c.cycling = false;
            }
            t.cycle.end(&mut t.probes, t.files.cycled().map(|(_, c)| c));
            crate::say!(
                "rocsync daemon: budget: records and waits probed whole again (another \
                 user's process maps a cycled file)"
            );
            return shared;
        }
        let cycled_share = |t: &Tracker| {
            (kept.iter())
                .filter(|(pid, _)| t.files.cycles(**pid))
                .map(|(_, s)| *s)
                .fold(0.0, f64::max)
        };
        // Files serving a process over the budget join the cycle, those of one user only.
        let mut joined = Vec::new();
        for &(pid, share) in over {
            let serves = |pids: &std::collections::BTreeSet<u32>| pids.contains(&pid);
            if !(t.files.cycled()).all(|(pids, _)| !serves(pids) || one_user(pids)) {
                shared.push((pid, share));
                continue;
            }
            for (_, c) in (t.files.cycled()).filter(|(pids, c)| serves(pids) && !c.cycling) {
                c.cycling = true;
                joined.push(c.library());
            }
        }
        if !t.cycle.cycling() {
            if joined.is_empty() {
                return shared;
            }
            let share = cycled_share(t);
            let every = t.cycle.size(share, limit.0);
            let pids: Vec<String> = over.iter().map(|(p, _)| p.to_string()).collect();
            crate::say!(
                "rocsync daemon: budget: pid(s) {}: records and waits alone cost {}: their \
                 probes in {} are on 1 s in every {every} from now, their counts estimated \
                 meanwhile (rocsync_sync_calls_estimated_total); synchronizes stay probed",
                pids.join(", "),
                budget::shown(share, limit),
                joined.join(", ")
            );
            // The period to come is on, and measured: the estimate starts from it.
            let counts = counts(t);
            t.estimates.probed(counts);
            return shared;
        }
        // Its processes all gone: it ends now, the time since the last turn not estimated
        // (they ended in it).
        let alive = (t.files.cycled())
            .filter(|(_, c)| c.cycling)
            .any(|(pids, _)| pids.iter().any(|&p| crate::procfs::exists(p)));
        if !alive {
            t.estimates.halt();
            for (_, c) in t.files.cycled() {
                c.cycling = false;
            }
            t.cycle.end(&mut t.probes, t.files.cycled().map(|(_, c)| c));
            crate::say!(
                "rocsync daemon: budget: records and waits probed whole again (the cycled \
                 processes are gone)"
            );
            return shared;
        }
        if t.cycle.on_now() {
            // The period just ended was probed whole: the cycle sized (or ended) by it.
            let share = cycled_share(t);
            if share <= limit.0 {
                t.estimates.stop(now);
                let files: Vec<String> = (t.files.cycled())
                    .filter(|(_, c)| c.cycling)
                    .map(|(_, c)| c.library())
                    .collect();
                for (_, c) in t.files.cycled() {
                    c.cycling = false;
                }
                t.cycle.end(&mut t.probes, t.files.cycled().map(|(_, c)| c));
                crate::say!(
                    "rocsync daemon: budget: records and waits probed whole again in {} \
                     (they cost {})",
                    files.join(", "),
                    budget::shown(share, limit)
                );
                return shared;
            }
            let before = t.cycle.every();
            let every = t.cycle.size(share, limit.0);
            if before != Some(every) {
                crate::say!(
                    "rocsync daemon: budget: records and waits probed 1 s in every {every} \
                     (they cost {})",
                    budget::shown(share, limit)
                );
            }
        }
        match t
            .cycle
            .turn(&mut t.probes, t.files.cycled().map(|(_, c)| c))
        {
            Turn::On => {
                let counts = counts(t);
                t.estimates.probed(counts);
            }
            Turn::Off => {
                let counts = counts(t);
                t.estimates.unprobed(counts);
            }
            Turn::StillOff => t.estimates.extend(now),
            Turn::Idle => {}
        }
        shared
    }

    /// The cycle ended (the budget off, or shed-only): every probe on again.
    pub fn end_cycle(&mut self) {
        let t = &mut self.tracker;
        if !t.cycle.cycling() {
            return;
        }
        t.estimates.stop(Instant::now());
        for (_, c) in t.files.cycled() {
            c.cycling = false;
        }
        t.cycle.end(&mut t.probes, t.files.cycled().map(|(_, c)| c));
        crate::say!("rocsync daemon: budget: records and waits probed whole again");
    }
}
