//! What starts a trace. Each trigger keeps only its own state and says what to record
//! as a [`Start`]; one place (`handlers/start.rs`) turns a `Start` into a recording.
//! Asked on the socket (`asked.rs`), dyno's requests with a synchronized start
//! (`scheduled.rs`), sampled windows (`sampled.rs`); and the daemon's own, unasked,
//! each a [`Trigger`] registered in [`Triggers::all`]: hangs while a call is still
//! blocked (`hangs/`), stalls at a slow call's return (`stalls.rs`), the ranks behind a
//! hang (`behind.rs`), ranks whose collectives stopped (`stuck.rs`).

pub(super) mod asked;
pub(super) mod behind;
pub(super) mod chain;
pub(super) mod collectives;
pub(super) mod dyno;
pub(super) mod hangs;
pub(super) mod origin;
pub(super) mod sampled;
pub(super) mod scheduled;
pub(super) mod stalls;
pub(super) mod stuck;
pub(super) mod trigger;
pub(super) mod view;

use trigger::Trigger;

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
