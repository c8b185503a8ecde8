//! The budget's period: each tracked process's probes' share of its CPU measured, its
//! polls shed past the budget, then records and waits duty-cycled (`cycling.rs`), and
//! what is left over the budget said once.

use crate::daemon::{
    budget::{Budget, over::Over, shares},
    tracking::{apart::polling, discovery::Tracker},
};
use crate::units::Share;

/// The budget as `/metrics` shows it (no pid label: a node's processes come and go).
#[derive(Clone, Debug, Default)]
pub(crate) struct View {
    /// The limit (`None`: off).
    pub limit: Option<f64>,
    /// A probed call's calibrated price, in seconds: a pair on an emulated probed
    /// instruction, a pair on a single-stepped one, an entry alone on an emulated one.
    pub call_seconds: Option<(f64, f64, f64)>,
    /// The highest share of a tracked process's CPU its probes cost, last measured.
    pub highest: f64,
    /// Of the processes whose polls are shed now, the highest share their probes cost
    /// when they were shed (what the log said).
    pub highest_when_shed: f64,
    /// Processes over the budget with nothing left to shed.
    /// by reason (every reason, 0 included: an alert's series never vanishes).
    pub over: Vec<(&'static str, usize)>,
    /// Polling APIs: how many probed files have each shed now.
    pub shed: Vec<(&'static str, usize)>,
    /// The duty cycle: the share of the time its files are probed, and how many.
    pub duty: (f64, usize),
    /// With the flight recorder on: the calls it did not record for the cycle, by API
    /// (estimated).
    pub flight_unrecorded: Option<Vec<(&'static str, u64)>>,
}

impl Budget {
    /// One period: each tracked process's probes' share of its CPU, measured; the budget
    /// (`limit`; `None`: off) held by shedding, then (`cycles`) by the duty cycle.
    pub(crate) fn period(&mut self, t: &mut Tracker, limit: Option<Share>, cycles: bool) {
        let now = tokio::time::Instant::now();
        let Some(limit) = limit else {
            // Measured all the same (`/metrics`); turned off at a reload, what was shed
            // comes back.
            for pid in t.tracked.clone() {
                let calls = t.probes.target_calls(pid);
                let stepped = t.files.single_stepped(pid);
                let off = self.cycle.pids.contains(&pid) && !self.cycle.on_now();
                if let Some((c, cpu)) = calls.zip(shares::cpu_ns(pid)) {
                    self.measures.measure(pid, c, cpu, (stepped, off));
                }
            }
            self.retain(crate::os::procfs::exists);
            for said in polling::restore(&mut t.probes, t.files.polling(), |_| true, now) {
                crate::say!("rocsync daemon: budget off: {said}");
            }
            self.end_cycle(t);
            return;
        };
        let mut over = std::collections::BTreeSet::new();
        let (mut alone, mut kept_over) = (Vec::new(), Vec::new());
        let mut kept = std::collections::BTreeMap::new();
        for pid in t.tracked.clone() {
            let calls = t.probes.target_calls(pid);
            let cpu = shares::cpu_ns(pid);
            let stepped = t.files.single_stepped(pid);
            // A cycled process's verdict is the cycle's, from its periods probed whole
            // (`turn_cycle`), not one second's reading off.
            let cycled = self.cycle.pids.contains(&pid);
            let off = cycled && !self.cycle.on_now();
            let Some(shares) = calls
                .zip(cpu)
                .and_then(|(c, cpu)| self.measures.measure(pid, c, cpu, (stepped, off)))
            else {
                continue;
            };
            kept.insert(pid, shares.kept());
            if shares.all <= limit.0 {
                if !cycled {
                    self.over.remove(&pid);
                }
                continue;
            }
            // Polls worth shedding, still probed: shed.
            if shares.polling > 0.0 && !t.files.nothing_to_shed(pid) {
                over.insert(pid);
                self.measures.shed_at.insert(pid, shares.all);
                crate::say!(
                    "rocsync daemon: budget: pid {pid}'s probes cost {}, its polls {:.1}%",
                    shares::shown(shares.all, limit),
                    shares.polling * 100.0
                );
            }
            // What is never shed costs more than the budget on its own: the duty cycle
            // takes it (`cycling.rs`), or (shed-only) it is said once.
            if shares.kept() > limit.0 {
                kept_over.push((pid, shares.kept()));
                if !cycles && self.over.get(&pid) != Some(&Over::ShedOnly) {
                    alone.push((pid, shares.kept()));
                }
            } else if !cycled {
                self.over.remove(&pid);
            }
        }
        for said in polling::enforce(&mut t.probes, t.files.polling(), &over, now) {
            crate::say!("rocsync daemon: budget: {said}");
        }
        let left = match cycles {
            // Those the cycle cannot take (or not wholly) are left, as shed-only leaves
            // them.
            true => self.turn_cycle(t, limit, &kept_over, &kept),
            false => {
                self.end_cycle(t);
                alone
                    .into_iter()
                    .map(|(p, s)| (p, s, Over::ShedOnly))
                    .collect()
            }
        };
        // The cycled ones it holds are under the budget on average; those whose
        // synchronizes alone are over it stay so between the periods that measure it.
        let held: Vec<u32> = (self.cycle.pids.iter())
            .filter(|p| !left.iter().any(|l| l.0 == **p))
            .filter(|p| self.over.get(p) != Some(&Over::Synchronizes))
            .copied()
            .collect();
        for pid in held {
            self.over.remove(&pid);
        }
        for (pid, share, why) in left {
            // Said once, and again when why changes.
            if self.over.insert(pid, why) != Some(why) {
                crate::say!(
                    "rocsync daemon: warning: budget: pid {pid}'s records and waits alone \
                     cost {}, which the budget cannot take ({why}); raise --budget, turn it \
                     off, or trace it in sampled windows",
                    shares::shown(share, limit),
                    why = why.said(&self.recorders)
                );
            }
        }
        self.cycle.retain(crate::os::procfs::exists);
        self.retain(crate::os::procfs::exists);
    }

    /// Forgets processes that are gone.
    fn retain(&mut self, alive: impl Fn(u32) -> bool) {
        self.measures.retain(&alive);
        self.over.retain(|&p, _| alive(p));
    }

    /// What `/metrics` shows of it; `limit` as configured.
    pub(crate) fn view(&self, t: &mut Tracker, limit: Option<Share>) -> View {
        View {
            limit: limit.map(|b| b.0),
            call_seconds: (self.measures.prices).map(|p| {
                let s = |d: std::time::Duration| d.as_secs_f64();
                (s(p.emulated), s(p.stepped), s(p.alone))
            }),
            highest: self.measures.highest(),
            highest_when_shed: (t.tracked.iter())
                .filter_map(|&pid| self.shed_at(pid, t))
                .fold(0.0, f64::max),
            over: (Over::ALL.iter())
                .map(|&o| (o.label(), self.over.values().filter(|&&v| v == o).count()))
                .collect(),
            shed: polling::shed_apis(t.files.polling()),
            duty: (
                self.cycle.duty(),
                (t.files.cycled()).filter(|(_, c)| c.cycling).count(),
            ),
            flight_unrecorded: (self.flight).then(|| {
                self.unrecorded
                    .calls
                    .iter()
                    .map(|(a, n)| (*a, *n))
                    .collect()
            }),
        }
    }
}
