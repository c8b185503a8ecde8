//! What a trigger may look at: a read-only view of what the daemon tracks (its
//! processes, the probes' maps, the traces recording) and its settings. Triggers decide
//! from it; they change nothing but their own state.

use rocsync_common::{Api, CommState, Dependency, LastCollective};
use serde_json::Value;

use crate::{
    calls::probes::Probes,
    daemon::{
        budget::cycle::DutyCycle,
        recording::sessions::Sessions,
        settings::config::DaemonConfig,
        tracking::discovery::Tracker,
        triggers::{
            chain, collectives,
            origin::{Origin, Start, Unasked},
        },
    },
    os::clock,
};

pub(crate) struct View<'a> {
    pub config: &'a DaemonConfig,
    tracker: &'a Tracker,
    sessions: &'a Sessions,
    /// The budget's duty cycle: when records and waits went unprobed.
    cycle: &'a DutyCycle,
}

impl<'a> View<'a> {
    pub(crate) fn new(
        config: &'a DaemonConfig,
        tracker: &'a Tracker,
        sessions: &'a Sessions,
        cycle: &'a DutyCycle,
    ) -> Self {
        Self {
            config,
            tracker,
            sessions,
            cycle,
        }
    }

    /// Whether the daemon tracks `pid` (a process gone stays tracked until pruned).
    pub(crate) fn tracked(&self, pid: u32) -> bool {
        self.tracker.tracked.contains(&pid)
    }

    /// The traces recording: (id, origin, pids).
    pub(crate) fn traces(&self) -> impl Iterator<Item = (u64, &Origin, &[u32])> {
        (self.sessions.traces.iter()).map(|(_, t)| (t.id, &t.origin, t.pids.as_slice()))
    }

    /// Whether trace `id` still records.
    pub(crate) fn recording(&self, id: u64) -> bool {
        self.traces().any(|(t, _, _)| t == id)
    }

    /// Whether an unasked trace records `pid` now (of any trigger's).
    pub(crate) fn unasked_recording(&self, pid: u32) -> bool {
        (self.traces()).any(|(_, o, pids)| o.unasked().is_some() && pids.contains(&pid))
    }

    /// What `pid`'s call `api(arg0)`, entered at `entry_ns`, waits on, from the probes'
    /// dependency state: its steps (in the wall clock), the line that says it, and the
    /// collective it ends at with the local ranks behind it (`collective`, `behind`).
    pub(crate) fn waits_on(&self, pid: u32, api: Option<Api>, arg0: u64, entry_ns: u64) -> Chain {
        let probes = &self.tracker.probes;
        // Its records and waits cycled at some moment: the spans they were off.
        let cycle = (self.cycle.was_cycled(pid)).then_some(self.cycle);
        let state = Of(probes, pid, cycle);
        let steps = api.map_or_else(Vec::new, |api| chain::waits_on(api, arg0, entry_ns, &state));
        let mut said = chain::said(&steps, entry_ns);
        let collective = chain::collective(&steps).cloned().unwrap_or(Value::Null);
        // Only processes of the waiter's own user and cgroup: a communicator id is public
        // and its unique id any process's to pass, and naming (and tracing) another user's
        // or pod's process on its say-so is not on.
        let own = collectives::owner(pid);
        let tracked =
            |p: u32| own.is_some() && p != pid && self.tracked(p) && collectives::owner(p) == own;
        let behind = collectives::behind(&collective, &probes.comms(), tracked);
        if let (Some(s), Some(b)) = (&mut said, collectives::said_behind(&behind)) {
            s.push_str(&b);
        }
        let steps = chain::on_wall_clock(steps, clock::realtime_offset_ns());
        Chain {
            steps,
            said,
            collective,
            behind,
        }
    }
}

/// What a slow call waits on ([`View::waits_on`]).
pub(crate) struct Chain {
    pub steps: Vec<Value>,
    pub said: Option<String>,
    pub collective: Value,
    pub behind: Vec<Value>,
}

impl Chain {
    /// Its collective and the ranks behind, in the stall or hang object.
    pub(crate) fn answer(&self, start: &mut Start) {
        for kind in [Unasked::Hang, Unasked::Stall] {
            if let Some(o) = start.origin.object_mut(kind) {
                o["collective"] = self.collective.clone();
                o["behind"] = self.behind.clone().into();
            }
        }
    }
}

/// One process's dependency state, as the probes keep it, and the duty cycle its records
/// and waits are in, if they are.
struct Of<'a>(&'a Probes, u32, Option<&'a DutyCycle>);

impl chain::State for Of<'_> {
    fn last_wait(&self, stream: u64) -> Option<Dependency> {
        self.0.last_wait(self.1, stream)
    }
    fn last_record(&self, event: u64) -> Option<Dependency> {
        self.0.last_record(self.1, event)
    }
    fn last_collective(&self, stream: u64) -> Option<LastCollective> {
        self.0.last_collective(self.1, stream)
    }
    fn comm(&self, handle: u64) -> Option<CommState> {
        self.0.comm(self.1, handle)
    }
    fn blind_between(&self, from_ns: u64, to_ns: u64) -> bool {
        self.2.is_some_and(|c| c.blind_between(from_ns, to_ns))
    }
}
