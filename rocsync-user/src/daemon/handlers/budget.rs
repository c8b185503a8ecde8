//! The budget's period came: its owner (`daemon/budget/`) measures and holds it.

use crate::daemon::{handlers::events::Flow, state::Daemon};

impl Daemon {
    /// Each tracked process's probes' share of its CPU, measured; the budget held.
    pub fn on_budget(&mut self) -> Flow {
        let (limit, cycles) = (self.config.budget, self.config.budget_cycles);
        self.budget.period(&mut self.tracker, limit, cycles);
        Flow::Go
    }
}
