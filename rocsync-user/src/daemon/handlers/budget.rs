//! The budget's period: each tracked process's probes' share of its CPU measured, its
//! polls shed past the budget, then records and waits duty-cycled (`cycling.rs`), and
//! what is left over the budget said once.

use crate::daemon::{
    handlers::events::Flow,
    state::Daemon,
    tracking::{budget, over::Over, polling},
};

impl Daemon {
    /// Each tracked process's probes' share of its CPU, measured; the budget held.
    pub fn on_budget(&mut self) -> Flow {
        let now = tokio::time::Instant::now();
        let Some(limit) = self.config.budget else {
            // Measured all the same (`/metrics`); turned off at a reload, what was shed
            // comes back.
            for pid in self.tracker.tracked.clone() {
                let calls = self.tracker.probes.target_calls(pid);
                let stepped = self.tracker.files.single_stepped(pid);
                if let Some((c, cpu)) = calls.zip(budget::cpu_ns(pid)) {
                    self.budget.measure(pid, c, cpu, stepped);
                }
            }
            self.budget.retain(crate::procfs::exists);
            let t = &mut self.tracker;
            for said in polling::restore(&mut t.probes, t.files.polling(), |_| true, now) {
                crate::say!("rocsync daemon: budget off: {said}");
            }
            self.end_cycle();
            return Flow::Go;
        };
        let mut over = std::collections::BTreeSet::new();
        let (mut alone, mut kept_over) = (Vec::new(), Vec::new());
        let mut kept = std::collections::BTreeMap::new();
        let cycles = self.config.budget_cycles;
        for pid in self.tracker.tracked.clone() {
            let calls = self.tracker.probes.target_calls(pid);
            let cpu = budget::cpu_ns(pid);
            let stepped = self.tracker.files.single_stepped(pid);
            let Some(shares) = calls
                .zip(cpu)
                .and_then(|(c, cpu)| self.budget.measure(pid, c, cpu, stepped))
            else {
                continue;
            };
            kept.insert(pid, shares.kept());
            // A cycled process's verdict is the cycle's, from its periods probed whole
            // (`turn_cycle`), not one second's reading off.
            let cycled = self.tracker.cycle.pids.contains(&pid);
            if shares.all <= limit.0 {
                if !cycled {
                    self.budget.over.remove(&pid);
                }
                continue;
            }
            // Polls worth shedding, still probed: shed.
            if shares.polling > 0.0 && !self.tracker.files.nothing_to_shed(pid) {
                over.insert(pid);
                crate::say!(
                    "rocsync daemon: budget: pid {pid}'s probes cost {}, its polls {:.1}%",
                    budget::shown(shares.all, limit),
                    shares.polling * 100.0
                );
            }
            // What is never shed costs more than the budget on its own: the duty cycle
            // takes it (`cycling.rs`), or (shed-only) it is said once.
            if shares.kept() > limit.0 {
                kept_over.push((pid, shares.kept()));
                if !cycles && self.budget.over.get(&pid) != Some(&Over::ShedOnly) {
                    alone.push((pid, shares.kept()));
                }
            } else if !cycled {
                self.budget.over.remove(&pid);
            }
        }
        let t = &mut self.tracker;
        for said in polling::enforce(&mut t.probes, t.files.polling(), &over, now) {
            crate::say!("rocsync daemon: budget: {said}");
        }
        let left = match cycles {
            // Those the cycle cannot take (or not wholly) are left, as shed-only leaves
            // them.
            true => self.turn_cycle(limit, &kept_over, &kept),
            false => {
                self.end_cycle();
                alone
                    .into_iter()
                    .map(|(p, s)| (p, s, Over::ShedOnly))
                    .collect()
            }
        };
        // The cycled ones it holds are under the budget on average; those whose
        // synchronizes alone are over it stay so between the periods that measure it.
        let held: Vec<u32> = (self.tracker.cycle.pids.iter())
            .filter(|p| !left.iter().any(|l| l.0 == **p))
            .filter(|p| self.budget.over.get(p) != Some(&Over::Synchronizes))
            .copied()
            .collect();
        for pid in held {
            self.budget.over.remove(&pid);
        }
        for (pid, share, why) in left {
            // Said once, and again when why changes.
            if self.budget.over.insert(pid, why) != Some(why) {
                crate::say!(
                    "rocsync daemon: warning: budget: pid {pid}'s records and waits alone \
                     cost {}, which the budget cannot take ({why}); raise --budget, turn it \
                     off, or trace it in sampled windows",
                    budget::shown(share, limit),
                    why = why.why()
                );
            }
        }
        self.tracker.cycle.retain(crate::procfs::exists);
        self.budget.retain(crate::procfs::exists);
        Flow::Go
    }
}
