//! The budget's period came: its owner (`daemon/budget/`) measures and holds it.

use crate::daemon::{handlers::events::Flow, state::Daemon};

impl Daemon {
    /// Each tracked process's probes' share of its CPU, measured; the budget held.
    pub(crate) fn on_budget(&mut self) -> Flow {
        let (limit, cycles) = (self.config.budget, self.config.budget_cycles);
        self.budget.recorders = self.recorders();
        self.budget.period(&mut self.tracker, limit, cycles);
        Flow::Go
    }

    /// What records now, as the budget names it when it keeps every probe on for it:
    /// `--return-probes all`, the flight recorder, and each trace with who asked for it.
    fn recorders(&self) -> Vec<String> {
        let all = (self.config.all_returns).then(|| "--return-probes all".to_string());
        let flight = self
            .flight
            .as_ref()
            .map(|_| "the flight recorder".to_string());
        let traces = self.sessions.traces.iter().map(|(_, t)| match t.asked_by {
            Some(uid) => format!("{} (asked by uid {uid})", t.name()),
            None => t.name(),
        });
        all.into_iter().chain(flight).chain(traces).collect()
    }
}
