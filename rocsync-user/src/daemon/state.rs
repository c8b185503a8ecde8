//! The daemon's state: its configuration, the processes it tracks, the sessions
//! recording, the flight recorder, what is being written, and the counts `/metrics`
//! shows of them.

use tokio::{sync::mpsc::UnboundedSender, time::Instant};

use crate::agents::ClaimId;
use crate::daemon::{
    budget::Budget,
    outputs::Destinations,
    quiet::Quiet,
    recording::flight::FlightRecorder,
    recording::sessions::Sessions,
    recording::writing::Writing,
    serving::exposition::NotStarted,
    serving::protocol::{Communicator, ProbeCost, Recording, Scheduled, Status, Tracked},
    settings::config::{ConfigFlags, DaemonConfig},
    tracking::discovery::Tracker,
    triggers::Triggers,
    triggers::collectives::LeftOut,
    triggers::sampled::Sampling,
    triggers::scheduled::Waiting,
};

pub(super) struct Daemon {
    pub config: DaemonConfig,
    /// The command line's settings, read again with the file on SIGHUP.
    pub flags: ConfigFlags,
    pub tracker: Tracker,
    pub sessions: Sessions,
    pub flight: Option<FlightRecorder>,
    /// Traces and flight recorder dumps being written.
    pub writing: Writing,
    pub traces_written: u64,
    /// `rocsync_collective_seq`'s series left out for their user's share.
    pub collectives_left_out: LeftOut,
    pub not_started: NotStarted,
    /// SIGTERM came: traces in progress finish, then the daemon exits.
    pub stopping: bool,
    /// dyno's requests with a synchronized start, by start time.
    pub scheduled: Vec<Waiting>,
    /// When the next sampled window starts (sampling configured).
    pub sampling: Sampling,
    /// When the scan's temporary `*GetDevice` probes come off.
    pub learn_until: Option<Instant>,
    /// What the probes cost each process, and what was shed to hold the budget.
    pub budget: Budget,
    /// The daemon's own triggers: hangs, stalls, ranks behind, stuck ranks.
    pub triggers: Triggers,
    /// dyno refusals said in the log, per peer.
    pub quiet_dyno: Quiet,
    /// Where written traces go: uploaded (`--upload`), kept within retention.
    pub destinations: Destinations,
    next_id: u64,
    /// Where a held claim's connection says it closed.
    pub released: UnboundedSender<ClaimId>,
    /// Where a stacks read for a trace (its id) comes back, off the loop.
    pub stacks_read: UnboundedSender<(u64, crate::stacks::Stacks)>,
}

impl Daemon {
    pub(super) fn new(
        config: DaemonConfig,
        flags: ConfigFlags,
        tracker: Tracker,
        flight: Option<FlightRecorder>,
        destinations: Destinations,
        (released, stacks_read): (
            UnboundedSender<ClaimId>,
            UnboundedSender<(u64, crate::stacks::Stacks)>,
        ),
    ) -> Self {
        Self {
            config,
            flags,
            tracker,
            sessions: Sessions::default(),
            flight,
            writing: Writing::default(),
            traces_written: 0,
            collectives_left_out: LeftOut::default(),
            not_started: NotStarted::default(),
            stopping: false,
            scheduled: Vec::new(),
            sampling: Sampling::default(),
            learn_until: None,
            budget: Budget::new(None),
            triggers: Triggers::default(),
            quiet_dyno: Quiet::new("dyno refusals"),
            destinations,
            next_id: 1,
            released,
            stacks_read,
        }
    }

    pub(super) fn take_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id - 1
    }

    /// What `rocsync status` shows.
    pub(super) fn status(&self) -> Status {
        let now = Instant::now();
        let comms = self.tracker.probes.comms();
        let mut status = Status {
            claims: self.sessions.held.iter().map(|(_, n)| n.clone()).collect(),
            scheduled: self
                .scheduled
                .iter()
                .map(|w| Scheduled {
                    session: w.start.spec.name.clone(),
                    starts_in_ms: w.at.saturating_duration_since(now).as_millis() as u64,
                })
                .collect(),
            traces: self
                .sessions
                .traces
                .iter()
                .map(|(_, t)| Recording {
                    id: t.id,
                    pids: t.pids.clone(),
                    session: t.name(),
                })
                .collect(),
            tracked: self
                .tracker
                .tracked
                .iter()
                .map(|&pid| Tracked {
                    exe: (crate::procfs::exe(pid).map(|p| p.display().to_string()))
                        .unwrap_or_default(),
                    pid,
                    pod: self.tracker.pods.pod(pid).cloned(),
                    communicators: communicators(&comms, pid),
                    probes: self.budget.share(pid).map(|share| ProbeCost {
                        cpu_share: share,
                        priced: match self.tracker.files.single_stepped(pid).pairs {
                            true => "single_stepped",
                            false => "emulated",
                        }
                        .into(),
                        polls_shed_at: self.budget.shed_at(pid, &self.tracker),
                    }),
                })
                .collect(),
            writing: self.writing.names().into_iter().map(String::from).collect(),
            stall_traces: Vec::new(),
            hangs: Vec::new(),
            returns_probed: match self.tracker.returns.on() {
                true => "all",
                false => "needed",
            }
            .into(),
        };
        let now_ns = crate::clock::monotonic_ns() as u64;
        for t in self.triggers.each() {
            t.status(&mut status, now_ns);
        }
        status
    }
}

/// `pid`'s communicators, as the probes keep them, for `rocsync status`.
fn communicators(comms: &[(u32, u64, rocsync_common::CommState)], pid: u32) -> Vec<Communicator> {
    let known = |v: u32| (v != u32::MAX).then_some(v);
    comms
        .iter()
        .filter(|c| c.0 == pid)
        .map(|(_, _, c)| Communicator {
            comm: (c.id != 0).then(|| format!("{:#x}", c.id)),
            rank: known(c.rank),
            nranks: known(c.nranks),
            seq: c.seq,
        })
        .collect()
}
