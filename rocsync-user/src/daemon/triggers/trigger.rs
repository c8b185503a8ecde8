//! The interface of the daemon's own triggers (Tetragon's observer: what the probes say
//! is decoded once and fanned out to each). A trigger watches what it needs — the
//! kernel's stall records, the look each second at the calls in flight and the
//! collectives, the traces other triggers began or ended —, keeps only its own state,
//! and says what it decided as [`Action`]s; the daemon carries them out (`handlers/
//! recording.rs`) and tells it how that went. It sees the daemon through a read-only
//! [`View`]. A new trigger is one file, one line in [`super::Triggers::all`] and its kind
//! in [`super::origin::Unasked`].

use std::time::Duration;

use rocsync_common::{CommState, StallRecord};
use serde_json::Value;

use crate::daemon::{
    serving::protocol::Status,
    triggers::{
        hangs::blocked::InFlight, origin::Origin, origin::Start, origin::Unasked, view::View,
    },
};

/// What a trigger decided.
pub(crate) enum Action {
    /// Record this (boxed: a start is large, the others small).
    Start(Box<Start>),
    /// End the trace `trace` within `after`, its object's `ended` saying `how`.
    End {
        trace: u64,
        how: &'static str,
        after: Duration,
    },
    /// It took the stall record (a trace of its holds it): the triggers after it see the
    /// record as taken.
    Took,
}

/// What the daemon reads each second for the triggers, once for all of them.
pub(crate) struct Look {
    /// The probes' clock now.
    pub now_ns: u64,
    /// Each counted thread's call in flight (none: the map could not be read).
    pub calls: Option<Vec<InFlight>>,
    /// Every process's communicators: (pid, handle, state).
    pub comms: Vec<(u32, u64, CommState)>,
}

/// How a trace a trigger asked for went: its id and file stem, or why it did not start.
pub(crate) type Began<'a> = Result<(u64, &'a str), &'a anyhow::Error>;

pub(crate) use crate::daemon::serving::exposition::Counter;

pub(crate) trait Trigger {
    /// A slow call's return (the kernel's stall record); `taken`: a trigger before this
    /// one took it.
    fn on_stall(&mut self, _r: &StallRecord, _taken: bool, _v: &View) -> Vec<Action> {
        Vec::new()
    }

    /// Once a second: the calls in flight and the collectives.
    fn on_look(&mut self, _look: &Look, _v: &View) -> Vec<Action> {
        Vec::new()
    }

    /// A trace this trigger asked for, of `kind` with its `object`, began or not.
    fn began(&mut self, _kind: Unasked, _object: &Value, _began: Began) {}

    /// Any trigger's trace began: what follows from it.
    fn on_began(&mut self, _origin: &Origin, _id: u64, _v: &View) -> Vec<Action> {
        Vec::new()
    }

    /// Any trigger's trace was ended (it records `after` more): what follows from it.
    fn on_ended(&mut self, _origin: &Origin, _after: Duration, _v: &View) -> Vec<Action> {
        Vec::new()
    }

    /// The stacks of a trace's process were read: where its thread is (`where` of the
    /// trace's object), if known.
    fn on_stacks(&mut self, _origin: &Origin, _where: Option<&str>) {}

    /// An unasked trace's files were written.
    fn on_written(&mut self, _files: &[String]) {}

    /// Its counts, for `/metrics`.
    fn counters(&self, _out: &mut Vec<Counter>) {}

    /// Its part of `rocsync status` (`now_ns`: the probes' clock).
    fn status(&self, _s: &mut Status, _now_ns: u64) {}
}
