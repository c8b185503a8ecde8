//! What starts a trace. Each trigger keeps only its own state and says what to record
//! as a [`Start`](origin::Start); one place (`Daemon::begin`, `handlers/recording.rs`)
//! turns a `Start` into a recording. The daemon's own, unasked, are each a [`Trigger`]
//! registered in [`Triggers::all`]: hangs while a call is still blocked (`hangs/`),
//! stalls at a slow call's return (`stalls.rs`), the ranks behind a hang (`behind.rs`),
//! ranks whose collectives stopped (`stuck.rs`).
//!
//! Asked traces (`asked/socket.rs`: `rocsync trace` on the socket), dyno's
//! (`asked/dyno.rs`, and `asked/scheduled.rs` for a synchronized start) and the sampled
//! windows (`asked/sampled.rs`) are
//! not `Trigger`s, and need not be: a `Trigger` decides from what the daemon watches
//! (records, the look each second, other triggers' traces) and answers no one, while
//! these are decided elsewhere and only admitted here. A request has a client waiting
//! on its connection for the answer — its refusal, its pids, dyno's "busy" — so it is
//! checked and begun in the request's own handling, and its bounds are a client's
//! (dyno: per peer and node; asked: its agents claimed, root's first); a sampled window
//! has a timer of its own that the loop sleeps until, and claims agents as an asked
//! trace does. Each of them is only a function from what was asked (or the time) to a
//! `Start`, through the same `begin`; their `Origin` is checked exhaustively with the
//! triggers' kinds.

pub(super) mod asked;
pub(super) mod behind;
pub(super) mod chain;
pub(super) mod collectives;
pub(super) mod hangs;
pub(super) mod origin;
pub(super) mod stalls;
pub(super) mod stuck;
pub(super) mod trigger;
pub(super) mod view;

use trigger::Trigger;

use crate::daemon::serving::exposition::{
    Counter, StallView,
    families::{DEPENDENCY_EVICTED, DEPENDENCY_SHARED_LANE},
};

/// The daemon's own triggers, each once.
#[derive(Default)]
pub(super) struct Triggers {
    pub hangs: hangs::Hangs,
    pub stalls: stalls::Stalls,
    pub behind: behind::Behind,
    pub stuck: stuck::Stuck,
}

impl Triggers {
    /// Every trigger, in the order each record reaches them: a hang trace takes a stall
    /// of its call before the stalls see it.
    pub(super) fn all(&mut self) -> [&mut dyn Trigger; 4] {
        [
            &mut self.hangs,
            &mut self.stalls,
            &mut self.behind,
            &mut self.stuck,
        ]
    }

    /// The `i`th of [`Triggers::all`].
    pub(super) fn nth(&mut self, i: usize) -> &mut dyn Trigger {
        self.all().into_iter().nth(i).expect("a trigger's index")
    }

    /// Every trigger, to read.
    pub(super) fn each(&self) -> [&dyn Trigger; 4] {
        [&self.hangs, &self.stalls, &self.behind, &self.stuck]
    }
}

impl Triggers {
    /// Stalls, hangs and what each trigger counts, as `/metrics` shows them; `evicted`:
    /// the probes' dependency entries evicted (event records, stream waits), if read;
    /// `shared_lane`: the users past the seventh who share the last dependency lane.
    pub(super) fn stall_view(
        &self,
        evicted: Option<(u64, u64)>,
        shared_lane: Option<u64>,
        untimed: (u64, u64),
    ) -> StallView {
        let (stalls, hangs) = (&self.stalls, &self.hangs);
        let mut counters = Vec::new();
        for t in self.each() {
            t.counters(&mut counters);
        }
        // Read when scraped; unreadable, left out rather than shown as none.
        if let Some(evicted) = evicted {
            for (state, n) in [("event_record", evicted.0), ("stream_wait", evicted.1)] {
                counters.push(Counter {
                    family: &DEPENDENCY_EVICTED,
                    label: Some(("state", state)),
                    value: n as f64,
                });
            }
        }
        if let Some(users) = shared_lane {
            counters.push(Counter {
                family: &DEPENDENCY_SHARED_LANE,
                label: None,
                value: users as f64,
            });
        }
        StallView {
            traces: stalls.traces,
            skipped_interval: stalls.skipped_interval,
            skipped_node_limit: stalls.skipped_node_limit,
            skipped_not_started: stalls.skipped_not_started,
            skipped_hang: stalls.skipped_hang,
            hang_traces: hangs.traces,
            hangs_untraced: (hangs::Untraced::ALL.iter())
                .map(|u| (u.name(), hangs.untraced.get(u.name()).copied().unwrap_or(0)))
                .collect(),
            in_flight: hangs.oldest.clone().into_iter().collect(),
            untimed,
            counters,
        }
    }
}
