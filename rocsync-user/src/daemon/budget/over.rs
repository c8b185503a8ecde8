//! Why a process whose records and waits alone cost more than the budget is left so:
//! said once in the log, and the `reason` label of `rocsync_over_budget_processes`, so an
//! alert can tell an operator's choice (shed-only) from a limit of the duty cycle.

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Over {
    /// `--budget-mode shed-only`: records and waits are never shed.
    ShedOnly,
    /// Counted in series of another user's processes: cycling it would turn their counts
    /// into estimates and hide their hangs' chains.
    SharedSeries,
    /// A trace records it (or `--return-probes all`): every probe stays on. Not the
    /// flight recorder, which records what the cycle leaves on.
    Recording,
    /// The node's one duty cycle holds other processes' series.
    OtherCycle,
    /// What stays probed (its synchronizes) costs more than the budget on its own.
    Synchronizes,
}

impl Over {
    pub(crate) const ALL: [Over; 5] = [
        Over::ShedOnly,
        Over::SharedSeries,
        Over::Recording,
        Over::OtherCycle,
        Over::Synchronizes,
    ];

    /// The `reason` label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Over::ShedOnly => "shed_only",
            Over::SharedSeries => "shared_series",
            Over::Recording => "recording",
            Over::OtherCycle => "other_cycle",
            Over::Synchronizes => "synchronizes",
        }
    }

    /// Why, as the log says it.
    pub(crate) fn why(self) -> &'static str {
        match self {
            Over::ShedOnly => "--budget-mode shed-only: records and waits are never shed",
            Over::SharedSeries => {
                "its records and waits are counted in series of another user's processes \
                 too: they are not duty-cycled"
            }
            Over::Recording => "a trace holds every probe on",
            Over::OtherCycle => "the node's duty cycle holds other processes' series",
            Over::Synchronizes => {
                "what stays probed (synchronizes) costs more on its own: its records and \
                 waits are duty-cycled as far as they go"
            }
        }
    }

    /// Why, as the log says it, naming what records (`recorders`) where that is why.
    pub(crate) fn said(self, recorders: &[String]) -> String {
        match (self, recorders) {
            (Over::Recording, []) => "a trace that just ended held every probe on".into(),
            (Over::Recording, r) => format!("{} records it: every probe stays on", r.join(", ")),
            _ => self.why().into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recording_that_holds_the_probes_is_named_with_who_asked() {
        let recorders = [
            "--return-probes all".to_string(),
            "trace 2 (step-9) of pid(s) [7] (asked by uid 1000)".to_string(),
        ];
        assert_eq!(
            Over::Recording.said(&recorders),
            "--return-probes all, trace 2 (step-9) of pid(s) [7] (asked by uid 1000) \
             records it: every probe stays on"
        );
        assert_eq!(
            Over::Recording.said(&[]),
            "a trace that just ended held every probe on"
        );
        assert_eq!(Over::ShedOnly.said(&recorders), Over::ShedOnly.why());
    }
}
