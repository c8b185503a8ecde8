//! The daemon's own triggers (`triggers/`), fed and obeyed: a stall record or the look
//! each second goes to every trigger in turn, over a read-only view; what they decide
//! is carried out here, one way — a `Start` begins (the trigger told how it went, every
//! trigger told it began), an `End` shortens its trace (every trigger told).

use std::collections::VecDeque;

use rocsync_common::StallRecord;
use tokio::time::Instant;

use crate::{
    clock,
    daemon::{
        handlers::events::Flow,
        state::Daemon,
        triggers::{trigger::Action, trigger::Look, trigger::Trigger, view::View},
    },
};

/// An action, and the trigger (its index in `Triggers::all`) that decided it.
type Decided = VecDeque<(usize, Action)>;

impl Daemon {
    /// A tracked process's synchronisation took longer than the kernel's threshold.
    pub(crate) fn on_stall(&mut self, r: StallRecord) {
        if !self.tracker.tracked.contains(&r.pid) {
            return;
        }
        let mut taken = false;
        self.ask(|t, v| {
            let actions = t.on_stall(&r, taken, v);
            taken |= actions.iter().any(|a| matches!(a, Action::Took));
            actions
        });
    }

    /// Each second: the calls in flight and the collectives, to every trigger.
    pub(crate) fn on_look(&mut self) {
        let look = Look {
            now_ns: clock::monotonic_ns() as u64,
            calls: self.tracker.probes.calls_in_flight().ok(),
            comms: self.tracker.probes.comms(),
        };
        self.ask(|t, v| t.on_look(&look, v));
    }

    /// Asks each trigger in turn (in `Triggers::all`'s order) what it decides of `f`,
    /// and carries it out before the next is asked: each sees the traces the ones
    /// before began.
    fn ask(&mut self, mut f: impl FnMut(&mut dyn Trigger, &View) -> Vec<Action>) {
        for i in 0..self.triggers.all().len() {
            let view = View::new(
                &self.config,
                &self.tracker,
                &self.sessions,
                &self.budget.cycle,
            );
            let actions = f(self.triggers.nth(i), &view);
            self.act(actions.into_iter().map(|a| (i, a)).collect());
        }
    }

    /// Carries out what the triggers decided, and what follows from it.
    fn act(&mut self, mut decided: Decided) {
        while let Some((i, action)) = decided.pop_front() {
            match action {
                Action::Start(start) => {
                    let Some((kind, object)) = start.origin.unasked().map(|(k, o)| (k, o.clone()))
                    else {
                        continue;
                    };
                    let began = self.begin(*start).map(|t| (t.id, t.stem.clone()));
                    let told = began.as_ref().map(|(id, stem)| (*id, stem.as_str()));
                    self.triggers.nth(i).began(kind, &object, told);
                    if let Ok((id, _)) = began {
                        self.read_stacks(id);
                        decided.extend(self.follow(id, |t, o, v| t.on_began(o, id, v)));
                    }
                }
                Action::End { trace, how, after } => {
                    let until = Instant::now() + after;
                    let Some(t) = (self.sessions.traces.iter_mut())
                        .map(|(_, t)| t)
                        .find(|t| t.id == trace)
                    else {
                        continue;
                    };
                    t.until = t.until.min(until);
                    if let Some((kind, _)) = t.origin.unasked()
                        && let Some(o) = t.origin.object_mut(kind)
                    {
                        o["ended"] = how.into();
                    }
                    decided.extend(self.follow(trace, |t, o, v| t.on_ended(o, after, v)));
                }
                Action::Took => {}
            }
        }
    }

    /// What every trigger decides of the trace `id` (its origin) beginning or ending.
    fn follow(
        &mut self,
        id: u64,
        mut f: impl FnMut(
            &mut dyn Trigger,
            &crate::daemon::triggers::origin::Origin,
            &View,
        ) -> Vec<Action>,
    ) -> Decided {
        let view = View::new(
            &self.config,
            &self.tracker,
            &self.sessions,
            &self.budget.cycle,
        );
        let Some((_, origin, _)) = view.traces().find(|(t, _, _)| *t == id) else {
            return VecDeque::new();
        };
        let mut decided = VecDeque::new();
        for (i, t) in self.triggers.all().into_iter().enumerate() {
            decided.extend(f(t, origin, &view).into_iter().map(|a| (i, a)));
        }
        decided
    }

    /// Reads the stacks of an unasked trace's process (its blocked thread first), off
    /// the loop, in a bounded child (`stacks::read`); they join the trace when read.
    fn read_stacks(&mut self, id: u64) {
        let trace = (self.sessions.traces.iter_mut()).find(|(_, t)| t.id == id);
        let Some((pid, tid)) = trace.and_then(|(_, t)| t.stacks_wanted()) else {
            return;
        };
        let back = self.stacks_read.clone();
        tokio::spawn(async move {
            let _ = back.send((id, crate::stacks::read(pid, tid).await));
        });
    }

    /// The stacks read for trace `id`: into the trace, told to the triggers (a hang's
    /// status says where it is), and said in the log.
    pub(crate) fn on_stacks(&mut self, id: u64, stacks: &crate::stacks::Stacks) -> Flow {
        let Some((_, t)) = (self.sessions.traces.iter_mut()).find(|(_, t)| t.id == id) else {
            crate::say!(
                "rocsync daemon: stacks of pid {} read after its trace {id} ended: not in it",
                stacks.pid
            );
            return Flow::Go;
        };
        t.add_stacks(stacks);
        let place = stacks.where_();
        for trigger in self.triggers.all() {
            trigger.on_stacks(&t.origin, place.as_deref());
        }
        let said = match (&place, &stacks.error) {
            (Some(w), _) => format!("in {w}"),
            (None, Some(e)) => format!("unknown ({e})"),
            (None, None) => "in no frame of its own code".into(),
        };
        crate::say!(
            "rocsync daemon: {} {id}: pid {} is {said} ({:.0} ms to read)",
            t.origin.what(),
            stacks.pid,
            stacks.took_ms
        );
        Flow::Go
    }
}
