//! The budget's duty cycle turned each budget period (`cycle.rs`): files join
//! it when a process they serve is over the budget with records and waits alone, it is
//! sized by their share measured while on, and it ends when that share fits the budget.
//! A cycle takes every process counted in the same series as the one over the budget
//! and every file they map (`closure`), so that the estimate of a series is the cycled
//! processes' alone; it is refused when those are not one user's (one user's loop would
//! make another's counts estimates and blind their hangs' chains), and it ends when one
//! of them exits or another process joins their series or files (`must_end`).

use std::collections::{BTreeMap, BTreeSet};

use rocsync_common::MetricKey;
use tokio::time::Instant;

use crate::daemon::{
    budget::{
        Budget,
        cycle::{DutyCycle, Turn},
        estimate::{Counts, is_cycled},
        over::Over,
        shares,
    },
    tracking::discovery::Tracker,
};
use crate::{calls::probes::CallPrices, units::Share};

/// Whether the live processes of `pids` are all one user's.
fn one_user(pids: &std::collections::BTreeSet<u32>) -> bool {
    let mut uids = pids.iter().filter_map(|&p| crate::os::procfs::uid(p));
    let first = uids.next();
    uids.all(|u| Some(u) == first)
}

impl Budget {
    /// What the kernel has counted now of the cycled APIs, and of each tracked process;
    /// `None` when its counts cannot be read.
    pub(super) fn counts(&self, t: &mut Tracker) -> Option<Counts> {
        counts(t, &self.cycle, self.measures.prices)
    }
}

/// [`Budget::counts`], of `cycle` at `prices`.
fn counts(t: &mut Tracker, cycle: &DutyCycle, prices: Option<CallPrices>) -> Option<Counts> {
    let mut series = BTreeMap::new();
    let slot = |k: &MetricKey| MetricKey::slot(k.api, k.device);
    for (k, v) in t.probes.metrics().ok()? {
        if let Some(s) = slot(&k).filter(|_| is_cycled(&k)) {
            series.insert((0, s), v.calls);
        }
    }
    if t.pods.labels().any() {
        for (g, k, v) in t.probes.group_metrics().ok()? {
            if let Some(s) = slot(&k).filter(|_| is_cycled(&k)) {
                series.insert((g, s), v.calls);
            }
        }
    }
    let (mut pids, mut cpu) = (BTreeMap::new(), BTreeMap::new());
    for pid in t.tracked.clone() {
        if let Some(counts) = t.probes.target_calls(pid) {
            let cycled = cycle.pids.contains(&pid);
            pids.insert(pid, (counts.calls, t.pods.group_of(pid), cycled));
            // Its own work is its CPU time less its probed calls', priced as a pair's.
            let price = prices.map(|p| p.of(t.files.single_stepped(pid).pairs));
            if let Some((ns, price)) = shares::cpu_ns(pid).zip(price).filter(|_| cycled) {
                cpu.insert(pid, (ns, price.as_nanos() as f64));
            }
        }
    }
    Some(Counts {
        at: Instant::now(),
        series,
        pids,
        cpu,
    })
}

/// The APIs the cycled files probe apart (each once), and those files, as a span of the
/// shed log names them.
fn cycled_apis(t: &mut Tracker) -> (Vec<&'static str>, String) {
    let (mut apis, mut files) = (std::collections::BTreeSet::new(), Vec::new());
    for (_, c) in t.files.cycled().filter(|(_, c)| c.cycling) {
        apis.extend(c.apis());
        files.push(c.library());
    }
    (apis.into_iter().collect(), files.join(", "))
}

/// The processes and label groups a cycle for `pid` takes: every tracked process counted
/// in the same series as one mapping a file `pid` maps, and every file those map, until
/// nothing more is added; so that every call of a cycled API in those series goes
/// through cycled probes, and the estimate is theirs alone. Refused when they are not
/// one user's.
fn closure(t: &mut Tracker, pid: u32) -> Option<(BTreeSet<u32>, BTreeSet<u32>)> {
    let mut pids = BTreeSet::from([pid]);
    let mut groups = BTreeSet::new();
    loop {
        let before = (pids.len(), groups.len());
        for (served, _) in t.files.cycled() {
            if !served.is_disjoint(&pids) {
                pids.extend(served.iter().copied());
            }
        }
        groups.extend(pids.iter().map(|&p| t.pods.group_of(p)));
        let tracked = t.tracked.iter().copied();
        pids.extend(tracked.filter(|&p| groups.contains(&t.pods.group_of(p))));
        if (pids.len(), groups.len()) == before {
            break;
        }
    }
    one_user(&pids).then_some((pids, groups))
}

/// Why a running cycle must end now, if it must: a cycled process exited (the estimate
/// would go on at its rate), or another process is counted in its series or maps its
/// files (its calls would be estimated too, or not be counted).
fn must_end(t: &mut Tracker, cycle: &DutyCycle) -> Option<&'static str> {
    let (pids, groups) = (&cycle.pids, &cycle.groups);
    if pids.iter().any(|&p| !crate::os::procfs::exists(p)) {
        return Some("a cycled process exited");
    }
    let joined = |p: &u32| !pids.contains(p) && crate::os::procfs::exists(*p);
    if (t.tracked.iter()).any(|p| joined(p) && groups.contains(&t.pods.group_of(*p))) {
        return Some("another process is counted in its series");
    }
    let files = t.files.cycled().filter(|(_, c)| c.cycling);
    if files
        .collect::<Vec<_>>()
        .iter()
        .any(|(served, _)| served.iter().any(joined))
    {
        return Some("another process maps a cycled file");
    }
    None
}

impl Budget {
    /// One budget period of the cycle: `over` are the processes whose records and waits
    /// alone cost more than `limit` (measured over the period just ended), `kept` every
    /// measured process's share of them. Returns those it leaves over the budget, and
    /// why.
    pub(super) fn turn_cycle(
        &mut self,
        t: &mut Tracker,
        limit: Share,
        over: &[(u32, f64)],
        kept: &BTreeMap<u32, f64>,
    ) -> Vec<(u32, f64, Over)> {
        let mut left = Vec::new();
        // A trace holds the cycle, its probes on (`Budget::recording`), as does one just
        // ended (its returns on still); the flight recorder does not.
        if !self.recorders.is_empty() || (t.returns.on() && !self.flight) {
            if !self.cycle.cycling() {
                left.extend(over.iter().map(|&(p, s)| (p, s, Over::Recording)));
            }
            return left;
        }
        if self.cycle.cycling()
            && let Some(why) = must_end(t, &self.cycle)
        {
            self.end(t, why);
            return left;
        }
        let cycled_share = |cycle: &DutyCycle| {
            (kept.iter())
                .filter(|(pid, _)| cycle.pids.contains(pid))
                .map(|(_, s)| *s)
                .fold(0.0, f64::max)
        };
        if !self.cycle.cycling() {
            // The first process over the budget whose closure is one user's starts it.
            for &(pid, share) in over {
                let Some((pids, groups)) = closure(t, pid) else {
                    left.push((pid, share, Over::SharedSeries));
                    continue;
                };
                let mut files = Vec::new();
                for (_, c) in (t.files.cycled()).filter(|(served, _)| !served.is_disjoint(&pids)) {
                    c.cycling = true;
                    files.push(c.library());
                }
                let shown: Vec<String> = pids.iter().map(u32::to_string).collect();
                self.cycle.start(pids, groups);
                let flight = match self.flight {
                    true => {
                        "; the flight recorder records them while on, its dumps say the \
                         periods off and the calls estimated in them"
                    }
                    false => "",
                };
                crate::say!(
                    "rocsync daemon: budget: pid {pid}'s records and waits alone cost {}: \
                     their probes in {} are duty-cycled from now (pid(s) {}), their counts \
                     estimated while off (rocsync_sync_calls_estimated_total); synchronizes \
                     stay probed{flight}",
                    shares::shown(share, limit),
                    files.join(", "),
                    shown.join(", ")
                );
                // The period to come is on, and measured: the estimate starts from it.
                if let Some(counts) = self.counts(t) {
                    self.estimates.probed(counts);
                }
                break;
            }
            return left;
        }
        let others = over.iter().filter(|(p, _)| !self.cycle.pids.contains(p));
        left.extend(others.map(|&(p, s)| (p, s, Over::OtherCycle)));
        if !self.cycle.on_now() {
            // The period just ended was off: what stays probed cost this.
            self.cycle.note_off(cycled_share(&self.cycle));
        } else if self.cycle.take_partial() {
            // A recording turned the probes on midway: the period to come measures.
            return left;
        } else {
            // The period just ended was probed whole: the cycle sized (or ended) by it.
            let share = cycled_share(&self.cycle);
            if share <= limit.0 {
                self.end(t, "they fit the budget now");
                return left;
            }
            let before = self.cycle.every();
            let sized = self.cycle.size(share, self.cycle.off_share(), limit.0);
            if sized.is_none() {
                let pids = self.cycle.pids.iter();
                left.extend(pids.filter_map(|p| Some((*p, *kept.get(p)?, Over::Synchronizes))));
            } else {
                // Sized within the budget: held, whatever the last measure said.
                for p in &self.cycle.pids {
                    self.over.remove(p);
                }
            }
            if before != self.cycle.every() {
                crate::say!(
                    "rocsync daemon: budget: records and waits probed 1 s in every {} (they \
                     cost {} probed whole, {:.1}% off)",
                    self.cycle.every().unwrap_or(1),
                    shares::shown(share, limit),
                    self.cycle.off_share() * 100.0
                );
            }
        }
        let returns = t.returns.on();
        match (self.cycle).turn(&mut t.probes, t.files.cycled_returns(returns)) {
            Turn::On => {
                match self.counts(t) {
                    Some(counts) => self.estimates.probed(counts),
                    None => self.estimates.halt(),
                }
                let added = &self.estimates.added;
                (self.unrecorded).on(&t.shed_log, added, self.flight);
            }
            Turn::Off => {
                match self.counts(t) {
                    Some(counts) => self.estimates.unprobed(counts),
                    None => self.estimates.halt(),
                }
                let (apis, libraries) = cycled_apis(t);
                let added = &self.estimates.added;
                (self.unrecorded).off(&t.shed_log, (&apis, &libraries), added);
            }
            Turn::StillOff => {
                if let Some(counts) = self.counts(t) {
                    self.estimates.extend(&counts);
                }
                let added = &self.estimates.added;
                (self.unrecorded).update(&t.shed_log, added, self.flight);
            }
            Turn::Idle => {}
        }
        left
    }

    /// The cycle ended (the budget off, or shed-only): every probe on again.
    pub(super) fn end_cycle(&mut self, t: &mut Tracker) {
        if self.cycle.cycling() {
            self.end(t, "the budget's mode changed");
        }
    }

    /// Ends the cycle, said with `why`: every cycled file's probes on again. A cycled
    /// process gone: the time since the last turn is not estimated (it ended within it).
    fn end(&mut self, t: &mut Tracker, why: &str) {
        match self.counts(t).filter(|_| why != "a cycled process exited") {
            Some(counts) => self.estimates.stop(counts),
            None => self.estimates.halt(),
        }
        let files: Vec<String> = (t.files.cycled())
            .filter(|(_, c)| c.cycling)
            .map(|(_, c)| c.library())
            .collect();
        for (_, c) in t.files.cycled() {
            c.cycling = false;
        }
        let returns = t.returns.on();
        (self.cycle).end(&mut t.probes, t.files.cycled_returns(returns));
        (self.unrecorded).on(&t.shed_log, &self.estimates.added, self.flight);
        crate::say!(
            "rocsync daemon: budget: records and waits probed whole again in {} ({why})",
            files.join(", ")
        );
    }
}
