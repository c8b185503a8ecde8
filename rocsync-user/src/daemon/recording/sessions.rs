//! The sessions running on the node: traces the daemon records and claims held by
//! standalone captures (`rocsync attach`/`run` while a daemon runs). Sessions may run
//! together only on disjoint agent sets (`AgentClaims`); an overlapping one is refused,
//! naming the session it conflicts with.
//!
//! Traces on disjoint agents may record the same process: the kernel then records the
//! union of their agents (attributing each call to its device) and each trace is given the
//! calls of the others' agents marked filtered — what a standalone `--agents` capture of
//! its own would have recorded. Their packets go to the traces of their agent only: the
//! kernel, recording the union (or, beside the flight recorder, every agent), lets them
//! all through.

use std::{collections::BTreeSet, time::Duration};

use anyhow::Result;
use rocsync_common::{Decoded, TRACE_RECORDING, TRACE_STOPPING};
use tokio::time::Instant;

use crate::calls::agents::{AgentClaims, AgentSet, ClaimError, ClaimId};
use crate::daemon::{
    recording::agent_filter::{filtered, other_agents, other_agents_packet},
    recording::queues::LiveQueues,
    recording::traces::Active,
    tracking::discovery::Tracker,
    triggers::origin::Origin,
    untrusted,
};

#[derive(Default)]
pub(crate) struct Sessions {
    claims: AgentClaims,
    /// Traces in progress, each with its claim (none: a stall, hang or dyno trace, which
    /// records beside any session and keeps none from starting).
    pub traces: Vec<(Option<ClaimId>, Active)>,
    /// Traces done, their processes' recording switched off: they still get what the
    /// probes wrote before the switch, then are written (`take_closing`).
    closing: Vec<Active>,
    /// Claims of standalone captures: (claim, its name), held while their connection is.
    pub held: Vec<(ClaimId, String)>,
    /// The highest call id read so far: a trace starting now numbers its calls after it.
    last_read: u64,
    /// The tracked processes' HSA queues now: a trace gets those of its processes first.
    pub queues: LiveQueues,
    /// Traces that ended early (their size, a failed output).
    pub truncated: u64,
}

impl Sessions {
    /// Starts a trace opened by `Active::open`, unless it would share an agent with a
    /// running session: then nothing of it stays.
    pub(crate) fn start(&mut self, tracker: &mut Tracker, trace: Active) -> Result<()> {
        self.start_from(tracker, trace, std::iter::empty())
    }

    /// As [`Sessions::start`], the trace beginning with `history` (what the flight
    /// recorder holds, every process's records as they were read): its processes' calls
    /// from the first id there, the others' ids passed over.
    pub(crate) fn start_from<'a>(
        &mut self,
        tracker: &mut Tracker,
        mut trace: Active,
        history: impl Iterator<Item = &'a [u8]> + Clone,
    ) -> Result<()> {
        // The daemon's own stall and hang traces claim nothing: a hang is traced whoever
        // records the process, and no one's trace is refused for it.
        let claim = match trace.origin.claims_agents() {
            false => None,
            true => Some(self.claims.start(&trace.name(), trace.agents.clone())?),
        };
        let first = history
            .clone()
            .filter_map(|r| match rocsync_common::decode(r) {
                Ok(Decoded::Entry(e)) => Some(e.correlation),
                _ => None,
            })
            .min()
            .filter(|&f| f <= self.last_read);
        match first {
            Some(first) => {
                trace.begin_after(first - 1);
                for r in history {
                    if let Ok(d) = rocsync_common::decode(r)
                        && let Some(pid) = pid_of(&d)
                    {
                        feed(&mut trace, r, &d, pid);
                    }
                }
            }
            None => trace.begin_after(self.last_read),
        }
        // Its processes' queues made before it: their packets are placed by them.
        let pids = trace.pids.clone();
        for q in self.queues.of(&pids) {
            trace.record(q);
        }
        self.traces.push((claim, trace));
        if let Err(e) = self.apply(tracker, &pids) {
            // Refused whole: neither it nor its claim stays, and what it switched on is
            // put back as the other traces want it.
            if let Some((Some(claim), _)) = self.traces.pop() {
                let _ = self.claims.stop(claim);
            }
            let _ = self.apply(tracker, &pids);
            return Err(e);
        }
        // Said once it is so: a process's calls from this line on are recorded.
        if let Some((_, trace)) = self.traces.last_mut() {
            trace.switched_on();
            crate::say!(
                "rocsync daemon: {} {}: recording pid(s) {} ({}) for {}",
                trace.origin.what(),
                trace.id,
                untrusted::pids_shown(&pids),
                trace.agents,
                // To the millisecond: the time since it was asked is not the user's.
                crate::units::shown_duration(Duration::from_millis(
                    (trace.until - Instant::now())
                        .as_secs_f64()
                        .mul_add(1e3, 0.5) as u64
                ))
            );
        }
        Ok(())
    }

    /// Ends now, and releases the agents of, every trace another user than root asked for
    /// on agents overlapping `agents`: root's request comes first. Returns how many.
    pub(crate) fn preempt_for(&mut self, agents: &AgentSet) -> usize {
        let mut n = 0;
        for (claim, t) in &mut self.traces {
            let users = t.asked_by.is_some_and(|uid| uid != 0);
            if users && t.recording() && t.agents.overlaps(agents) {
                if let Some(c) = claim.take() {
                    let _ = self.claims.stop(c);
                }
                // Counted truncated when it is done (`due`).
                t.end_early(true);
                n += 1;
            }
        }
        n
    }

    /// A standalone capture's claim.
    pub(crate) fn hold(&mut self, name: String, agents: AgentSet) -> Result<ClaimId, ClaimError> {
        let id = self.claims.start(&name, agents)?;
        crate::say!(
            "rocsync daemon: {} holds its agents",
            untrusted::shown(&name)
        );
        self.held.push((id, name));
        Ok(id)
    }

    /// A standalone capture ended, or a trace's client went away (their connection
    /// closed): the claim goes, and such a trace ends now, written as far as it went.
    pub(crate) fn release(&mut self, id: ClaimId) {
        let _ = self.claims.stop(id);
        self.held.retain(|(h, _)| *h != id);
        for (claim, t) in &mut self.traces {
            if claim.take_if(|c| *c == id).is_some() {
                t.end_early(false);
            }
        }
    }

    /// The claim of the trace just started, if it has one (asked traces do).
    pub(crate) fn last_claim(&self) -> Option<ClaimId> {
        self.traces.last().and_then(|(c, _)| *c)
    }

    /// Who started each trace recording.
    pub(crate) fn origins(&self) -> impl Iterator<Item = &Origin> {
        self.traces.iter().map(|(_, t)| &t.origin)
    }

    pub(crate) fn recording(&self) -> bool {
        !self.traces.is_empty()
    }

    /// The earliest moment a trace stops or finishes.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.traces.iter().map(|(_, t)| t.until).min()
    }

    /// Ends every trace now (the daemon stops: each still finishes and is written).
    pub(crate) fn end_all_now(&mut self) {
        let now = Instant::now();
        for (_, t) in &mut self.traces {
            t.until = t.until.min(now);
        }
    }

    pub(crate) fn tick(&mut self) {
        for (_, t) in &mut self.traces {
            t.tick();
        }
    }

    /// Traces whose time came: recording ones start stopping; stopped ones are done:
    /// closing, their processes' recording switched off (what the probes wrote before is
    /// still theirs: read the ring, then `take_closing`).
    pub(crate) fn due(&mut self, tracker: &mut Tracker) -> Result<()> {
        let now = Instant::now();
        let mut changed = BTreeSet::new();
        let mut i = 0;
        while i < self.traces.len() {
            let (claim, t) = &mut self.traces[i];
            if t.until > now {
                i += 1;
                continue;
            }
            changed.extend(t.pids.iter().copied());
            if t.deadline() {
                self.truncated += u64::from(t.truncated());
                if let Some(claim) = claim {
                    let _ = self.claims.stop(*claim);
                }
                self.closing.push(self.traces.remove(i).1);
            } else {
                i += 1;
            }
        }
        let changed: Vec<u32> = changed.into_iter().collect();
        self.apply(tracker, &changed)
    }

    /// The traces done, to be written: the ring was read since their recording was
    /// switched off (a record written before the switch, read later, would otherwise go
    /// to the process's next trace, or nowhere).
    pub(crate) fn take_closing(&mut self) -> Vec<Active> {
        std::mem::take(&mut self.closing)
    }

    pub(crate) fn has_closing(&self) -> bool {
        !self.closing.is_empty()
    }

    /// Gives a record to the traces of its process.
    pub(crate) fn route(&mut self, bytes: &[u8], decoded: &Decoded) {
        let Some(pid) = pid_of(decoded) else { return };
        if let Decoded::Queue(r) = decoded {
            self.queues.note(bytes, r);
        }
        if let Decoded::Entry(e) = decoded {
            self.last_read = self.last_read.max(e.correlation);
        }
        let closing = self.closing.iter_mut();
        for t in self.traces.iter_mut().map(|(_, t)| t).chain(closing) {
            feed(t, bytes, decoded, pid);
        }
    }

    /// Sets each process's recording in the kernel from the traces that hold it:
    /// recording (the union of their agents), stopping (returns only), or the baseline.
    fn apply(&self, tracker: &mut Tracker, pids: &[u32]) -> Result<()> {
        for &pid in pids {
            let holding = || {
                self.traces
                    .iter()
                    .map(|(_, t)| t)
                    .filter(|t| t.pids.contains(&pid))
            };
            let recording: Vec<u64> = holding()
                .filter(|t| t.recording())
                .map(|t| t.agents.mask())
                .collect();
            let (capture, mut agents) = if !recording.is_empty() {
                let all = recording.contains(&0);
                let union = recording.iter().fold(0, |m, a| m | a);
                (TRACE_RECORDING, if all { 0 } else { union })
            } else if holding().next().is_some() && tracker.baseline == 0 {
                (TRACE_STOPPING, 0)
            } else {
                (tracker.baseline, 0)
            };
            // The flight recorder keeps every agent: attribute without dropping, and let
            // `route` split.
            if tracker.baseline == TRACE_RECORDING && agents != 0 {
                agents = u64::MAX;
            }
            tracker.set_capture(pid, capture, agents)?;
        }
        Ok(())
    }
}

/// Whether an entry the kernel let through belongs to agents outside `agents` (a trace
/// on some agents, sharing the process with a trace on others): its synchronisations and
/// event records are then filtered for that trace, as the kernel filters them.
/// The process a call or HSA record is of.
fn pid_of(decoded: &Decoded) -> Option<u32> {
    match decoded {
        Decoded::Entry(r) => Some(r.pid),
        Decoded::Exit(r) => Some(r.pid),
        Decoded::Queue(r) => Some(r.pid),
        Decoded::Packet(r) => Some(r.pid),
        _ => None,
    }
}

/// One record of `pid` to a trace: its own, or (another process's call) an id it passes.
fn feed(t: &mut Active, bytes: &[u8], decoded: &Decoded, pid: u32) {
    if !t.pids.contains(&pid) {
        // Its id is another trace's call, or no trace's: not this one's loss.
        if let Decoded::Entry(e) = decoded {
            t.skip(e.correlation);
        }
        return;
    }
    match decoded {
        Decoded::Entry(e) if other_agents(e, &t.agents) => t.record(&filtered(bytes)),
        // Dropped, as the kernel drops them for a capture of its own: not counted either.
        Decoded::Packet(p) if other_agents_packet(p, &t.agents) => {}
        _ => t.record(bytes),
    }
}
