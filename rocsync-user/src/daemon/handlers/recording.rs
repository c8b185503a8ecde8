//! What the daemon records: the probes' ring read (announcements to discovery, call
//! records to the flight recorder and the traces in progress, stall records to the
//! triggers); its own triggers (`triggers/`) asked over a read-only view, what they
//! decide carried out one way — a `Start` begins (the trigger told how it went, every
//! trigger told it began), an `End` shortens its trace (every trigger told); timed
//! starts (dyno's scheduled requests, sampled windows); and the one place a [`Start`]
//! becomes a recording ([`Daemon::begin`]): its processes chosen, its trace opened
//! (numbered, bounded in size), its recording switched on — the daemon's own stall and
//! hang traces beginning with what the flight recorder holds. Traces whose time came
//! end here too.

use std::{collections::VecDeque, time::Duration};

use anyhow::Result;
use aya::maps::{MapData, RingBuf};
use rocsync_common::{Decoded, PROCESS_EXIT, StallRecord, decode};
use tokio::time::Instant;

use crate::daemon::{
    handlers::Flow,
    recording::{flight, selection, traces::Active},
    serving::peer::Peer,
    state::Daemon,
    tracking::apart::shed_log,
    triggers::{
        asked::dyno,
        collectives,
        origin::{Origin, Start},
        trigger::{Action, Look, Trigger},
        view::View,
    },
    untrusted,
};
use crate::{calls::ingest::Call, os::clock};

/// An action, and the trigger (its index in `Triggers::all`) that decided it.
type Decided = VecDeque<(usize, Action)>;

impl Daemon {
    /// Reads what the probes wrote: announcements feed discovery, call records the
    /// flight recorder and the traces in progress.
    pub(crate) fn drain(&mut self, ring: &mut RingBuf<MapData>) {
        let until = self.tracker.probes.calls_reserved();
        self.drain_until(ring, until);
    }

    /// Reads everything the probes wrote before now, however much (a drain reads at most
    /// a ring's worth): what a flight recorder dump asked now must hold.
    pub(crate) fn catch_up(&mut self, ring: &mut RingBuf<MapData>) {
        let until = self.tracker.probes.calls_reserved();
        while self.drain_until(ring, until) > 0 {}
    }

    /// Returns how many call records were read.
    fn drain_until(&mut self, ring: &mut RingBuf<MapData>, calls_until: u64) -> usize {
        // The ring first, then the calls reserved before (see `Probes::drain_calls`).
        self.drain_ring(ring);
        let (flight, sessions) = (&mut self.flight, &mut self.sessions);
        self.tracker.probes.drain_calls(calls_until, |item| {
            if let Ok(decoded) = decode(item) {
                if let Some(f) = flight.as_mut() {
                    f.keep_call(item, &decoded);
                }
                sessions.route(item, &decoded);
            }
        })
    }

    fn drain_ring(&mut self, ring: &mut RingBuf<MapData>) {
        while let Some(item) = ring.next() {
            match decode(&item) {
                Ok(Decoded::LinkMap(r)) => self.look(r.pid),
                Ok(Decoded::Process(r)) if r.event == PROCESS_EXIT => {
                    if let Some(f) = &mut self.flight {
                        f.exited(r.pid);
                    }
                }
                Ok(Decoded::Process(r)) => self.look(r.pid),
                // A thread's name as it left: the daemon's traces name threads as the
                // stacks read them.
                Ok(Decoded::Wake | Decoded::Thread(_)) => {}
                Ok(Decoded::Stall(r)) => self.on_stall(r),
                Ok(decoded) => {
                    if let Some(f) = &mut self.flight {
                        f.keep_call(&item, &decoded);
                    }
                    self.sessions.route(&item, &decoded);
                }
                Err(_) => {}
            }
        }
    }

    /// Starts what a trigger asked, unless its processes are gone or (asked) its agents
    /// are another session's: then nothing of it stays. Returns the trace.
    pub(crate) fn begin(&mut self, mut start: Start) -> Result<&mut Active> {
        // A stall's or a hang's process is named as it is: it may have exited since, and
        // what the flight recorder holds of it is still its trace.
        let unasked = start.origin.unasked().is_some();
        let pids = match unasked {
            true => start.spec.pids.clone(),
            false => selection::matched(&self.tracker, &start.spec)?,
        };
        let mut slow_call = start.slow_call.take();
        let id = self.take_id();
        let limits = (id, self.config.trace_max_bytes);
        // Every return it records is probed before its recording is switched on, and
        // before its span starts (attaching takes milliseconds: not the user's).
        self.budget.recording(&mut self.tracker)?;
        let mut trace = Active::open(&self.tracker, start, pids, &self.config.state_dir, limits)?;
        match (&mut self.flight, unasked) {
            (Some(f), true) => {
                let span_us = f.span().as_micros() as u64;
                trace.not_recorded_from(shed_log::now_us().saturating_sub(span_us));
                let chunks = f.chunks();
                let history = flight::records(&chunks);
                slow_call = slow_call.filter(|c| !holds(history.clone(), c));
                self.sessions
                    .start_from(&mut self.tracker, trace, history)?;
            }
            _ => self.sessions.start(&mut self.tracker, trace)?,
        }
        let trace = &mut self.sessions.traces.last_mut().expect("just started").1;
        // Before the loop reads its exit: its thread's next exit of its API is its own.
        if let Some(call) = slow_call {
            trace.hold_slow_call(call);
        }
        let comms = self.tracker.probes.comms();
        // Those set up since the last prune too.
        self.tracker.claims.seen(&comms, &[]);
        let tracked = &self.tracker.tracked;
        let owner = |pid| {
            tracked
                .contains(&pid)
                .then(|| collectives::owner(pid))
                .flatten()
        };
        let claims = &self.tracker.claims;
        let past = |id: u64| -> Vec<_> { claims.past_owners(id).cloned().collect() };
        for id in trace.know_communicators(&comms, owner, past) {
            crate::say!(
                "rocsync daemon: comm {id} is claimed on this node by processes of another user or cgroup too (or was): trace {} is not uploaded under job-{id}/",
                trace.id
            );
        }
        Ok(trace)
    }

    /// A request for later, from `peer`: answered with the processes it names now,
    /// started when due.
    pub(crate) fn schedule(
        &mut self,
        start: Start,
        ahead: Duration,
        peer: Peer,
    ) -> Result<Vec<u32>> {
        self.scheduled.admit(peer)?;
        let pids = selection::matched(&self.tracker, &start.spec)?;
        crate::say!(
            "rocsync daemon: dyno trace {:?} of pid(s) {} from {peer} starts in {} ms",
            start.spec.name,
            untrusted::pids_shown(&pids),
            ahead.as_millis()
        );
        self.scheduled.add(start, Instant::now() + ahead, peer)?;
        Ok(pids)
    }

    /// When the next timed trace starts: a scheduled one or a sampled window.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        (self.scheduled.next().into_iter())
            .chain(self.sampling.next)
            .min()
    }

    /// Starts the timed traces whose time came. A scheduled one that cannot start (its
    /// processes gone, its agents recorded by another session) is said, not retried; a
    /// sampled window is skipped while another session holds agents, and while nothing
    /// runs (the ended are forgotten a little later).
    pub(crate) fn on_due(&mut self) -> Flow {
        for w in self.scheduled.due() {
            let name = w.start.spec.name.clone();
            let admitted = dyno::admit(w.peer, self.sessions.origins());
            if let Err(e) = admitted.map_err(anyhow::Error::from).and_then(|()| {
                self.begin(w.start)?;
                Ok(())
            }) {
                self.not_started.scheduled += 1;
                crate::say!("rocsync daemon: scheduled dyno trace {name:?} not started: {e:#}");
            }
        }
        let window = self.sampling.due(self.config.sampling);
        let running = || (self.tracker.tracked.iter()).any(|&p| selection::alive(p));
        if let Some(window) = window.filter(|_| running())
            && let Err(e) = self.begin(window)
        {
            self.not_started.sampled += 1;
            crate::say!("rocsync daemon: sampled window skipped: {e:#}");
        }
        Flow::Go
    }

    /// Finishes the traces whose time came: their recording switched off, then what the
    /// probes wrote before read (theirs), then they are written off the loop.
    pub(crate) fn finish_due(&mut self, ring: &mut RingBuf<MapData>) -> Result<()> {
        self.sessions.due(&mut self.tracker)?;
        if self.sessions.has_closing() {
            self.catch_up(ring);
        }
        for trace in self.sessions.take_closing() {
            self.writing.trace(trace);
        }
        // Nothing records: the returns counting does not need come off (`returns.rs`).
        let wanted = self.flight.is_some() || self.config.all_returns;
        if !wanted && !self.sessions.recording() && !self.sessions.has_closing() {
            self.tracker.returns_off()?;
        }
        self.tracker.retire_returns();
        Ok(())
    }

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
        mut f: impl FnMut(&mut dyn Trigger, &Origin, &View) -> Vec<Action>,
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
            // Why its native stack is unknown, when it is (a thread that kept leaving its
            // system call, one that could not be sampled): not "no frame of its own".
            (None, None) => match stacks.blocked().and_then(|t| t.native_error.as_deref()) {
                Some(e) if !stacks.is_python() => format!("unknown (native stack: {e})"),
                _ => "in no frame of its own code".into(),
            },
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

/// Whether `records` hold the entry of `call` (of its thread and API, within a
/// millisecond: the in-flight start and the entry record are two reads of the clock).
fn holds<'a>(records: impl Iterator<Item = &'a [u8]>, call: &Call) -> bool {
    records
        .into_iter()
        .any(|r| match rocsync_common::decode(r) {
            Ok(Decoded::Entry(e)) => {
                e.pid == call.pid
                    && e.tid == call.tid
                    && u32::from(e.api) == call.api as u32
                    && e.enter_ns.abs_diff(call.enter_ns) < 1_000_000
            }
            _ => false,
        })
}
