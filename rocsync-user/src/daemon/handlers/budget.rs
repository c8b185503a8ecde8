//! The budget's period came: its owner (`daemon/budget/`) measures and holds it.

use crate::daemon::{handlers::events::Flow, state::Daemon};

impl Daemon {
    /// Each tracked process's probes' share of its CPU, measured; the budget held.
    pub(crate) fn on_budget(&mut self) -> Flow {
        let (limit, cycles) = (self.config.budget, self.config.budget_cycles);
        self.budget.recorders = self.recorders();
        self.budget.flight = self.flight.is_some();
        self.budget.period(&mut self.tracker, limit, cycles);
        Flow::Go
    }

    /// What holds every probe on now, as the budget names it when it leaves a process
    /// over it for them: `--return-probes all`, and each trace with who asked for it. Not
    /// the flight recorder: the budget's duty cycle takes what it records like counting.
    fn recorders(&self) -> Vec<String> {
        let all = (self.config.all_returns).then(|| "--return-probes all".to_string());
        let traces = self.sessions.traces.iter().map(|(_, t)| match t.asked_by {
            Some(uid) => format!("{} (asked by uid {uid})", t.name()),
            None => t.name(),
        });
        all.into_iter().chain(traces).collect()
    }
}
