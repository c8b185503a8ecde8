//! Why a process whose records and waits alone cost more than the budget is left so:
//! said once in the log, and the `reason` label of `rocsync_over_budget_processes`, so an
//! alert can tell an operator's choice (shed-only) from a limit of the duty cycle.

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Over {
    /// `--budget-mode shed-only`: records and waits are never shed.
    ShedOnly,
    /// Counted in series of another user's processes: cycling it would turn their counts
    /// into estimates and hide their hangs' chains.
    SharedSeries,
    /// Something records it: every probe stays on.
    Recording,
    /// The node's one duty cycle holds other processes' series.
    OtherCycle,
    /// What stays probed (its synchronizes) costs more than the budget on its own.
    Synchronizes,
}

impl Over {
    pub const ALL: [Over; 5] = [
        Over::ShedOnly,
        Over::SharedSeries,
        Over::Recording,
        Over::OtherCycle,
        Over::Synchronizes,
    ];

    /// The `reason` label.
    pub fn label(self) -> &'static str {
        match self {
            Over::ShedOnly => "shed_only",
            Over::SharedSeries => "shared_series",
            Over::Recording => "recording",
            Over::OtherCycle => "other_cycle",
            Over::Synchronizes => "synchronizes",
        }
    }

    /// Why, as the log says it.
    pub fn why(self) -> &'static str {
        match self {
            Over::ShedOnly => "--budget-mode shed-only: records and waits are never shed",
            Over::SharedSeries => {
                "its records and waits are counted in series of another user's processes \
                 too: they are not duty-cycled"
            }
            Over::Recording => "something records it: every probe stays on",
            Over::OtherCycle => "the node's duty cycle holds other processes' series",
            Over::Synchronizes => {
                "what stays probed (synchronizes) costs more on its own: its records and \
                 waits are duty-cycled as far as they go"
            }
        }
    }
}
