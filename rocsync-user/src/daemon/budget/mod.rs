//! The overhead budget, with one owner ([`Budget`]): what each tracked process's probes
//! cost it, as a share of its CPU time (`shares.rs`), held under a limit each period
//! (`period.rs`) by shedding the probes resolution does not need (the polling ones,
//! `tracking/apart/polling.rs`), then by duty-cycling records and waits (`cycle.rs`,
//! `cycling.rs`) and estimating what they miss (`estimate.rs`); what is left over the
//! budget is said once, with why (`over.rs`). It acts on what the tracker probes; the
//! tracker never calls it back.

pub(super) mod cycle;
mod cycling;
pub(super) mod estimate;
pub(super) mod over;
pub(super) mod period;
pub(super) mod shares;
mod unrecorded;

use std::collections::BTreeMap;

use anyhow::Result;

use crate::{
    calls::probes::CallPrices,
    daemon::{budget::shares::Measures, tracking::discovery::Tracker},
};
use cycle::DutyCycle;
use estimate::Estimates;
use over::Over;
use unrecorded::Unrecorded;

pub(super) use shares::{EVERY, calibrated, cpu_ns};

pub(super) struct Budget {
    /// Each tracked process's last counts and share, at the prices calibrated at start.
    measures: Measures,
    /// Processes over the budget with nothing left to shed, and why (said once each).
    over: BTreeMap<u32, Over>,
    /// The duty cycle of records and waits (`cycle.rs`).
    pub cycle: DutyCycle,
    /// What the cycle estimates of the calls it did not see: `/metrics` adds them.
    pub estimates: Estimates,
    /// What holds every probe on now (traces and who asked for them, `--return-probes
    /// all`): named when the budget leaves a process over it for them. Not the flight
    /// recorder: it records what the cycle leaves on.
    pub recorders: Vec<String>,
    /// The flight recorder runs: what the cycle keeps from it is counted.
    pub flight: bool,
    /// The periods off, said to the traces and dumps that overlap them, and counted.
    pub unrecorded: Unrecorded,
}

impl Budget {
    /// `prices`: what a probed call costs here (`None`: calibrating failed, and no budget
    /// is held).
    pub(super) fn new(prices: Option<CallPrices>) -> Self {
        Self {
            measures: Measures::new(prices),
            over: BTreeMap::new(),
            cycle: DutyCycle::default(),
            estimates: Estimates::default(),
            recorders: Vec::new(),
            flight: false,
            unrecorded: Unrecorded::default(),
        }
    }

    /// A process just tracked: sampled now, so that the next period measures its share
    /// rather than only sampling it (one that polls from its start is shed within a
    /// period, not two).
    pub(super) fn tracked(&mut self, t: &mut Tracker, pid: u32) {
        let calls = t.probes.target_calls(pid);
        if let Some((c, cpu)) = calls.zip(cpu_ns(pid)) {
            self.measures.first_sample(pid, c, cpu);
        }
    }

    /// Every probe a recording needs on, before it is switched on: the duty cycle held
    /// (records and waits probed, the estimate ended there) and the returns counting
    /// does not need attached.
    pub(super) fn recording(&mut self, t: &mut Tracker) -> Result<()> {
        if self.cycle.cycling() {
            let returns = t.returns.on();
            (self.cycle).hold(&mut t.probes, t.files.cycled_returns(returns));
            match self.counts(t) {
                Some(counts) => self.estimates.probed(counts),
                None => self.estimates.halt(),
            }
            let added = &self.estimates.added;
            (self.unrecorded).on(&t.shed_log, added, self.flight);
        }
        t.returns_on()
    }

    /// The label groups gone (`Tracker::prune`): their estimates forgotten.
    pub(super) fn groups_gone(&mut self, groups: &[u32]) {
        for &g in groups {
            self.estimates.forget_group(g);
        }
    }

    /// `pid`'s probes' share of its CPU time over the last period.
    pub(super) fn share(&self, pid: u32) -> Option<f64> {
        self.measures.shares.get(&pid).copied()
    }

    /// While `pid`'s polls are shed, the share its probes cost when they were (the log's
    /// figure; the share measured since is without them).
    pub(super) fn shed_at(&self, pid: u32, t: &Tracker) -> Option<f64> {
        let shed = t.files.polls_shed(pid);
        self.measures.shed_at.get(&pid).copied().filter(|_| shed)
    }
}
