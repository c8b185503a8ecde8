//! The daemon's state — its configuration, the processes it tracks, the sessions
//! recording, the flight recorder, what is being written, and the counts `/metrics`
//! shows of them — and what it does on the loop's small wakes (a signal, a timer, a
//! trace written, the budget's period). What it records is in `handlers/recording.rs`,
//! what it answers in `handlers/requests.rs`. Its fields are the daemon module's alone.

use rocsync_common::GetDeviceMode;
use tokio::{sync::mpsc::UnboundedSender, time::Instant};

use crate::calls::agents::ClaimId;
use crate::daemon::{
    budget::Budget,
    handlers::{Flow, switch},
    outputs::{Destinations, statedir},
    quiet::Quiet,
    recording::{
        flight::FlightRecorder,
        sessions::Sessions,
        writing::{Done, Writing},
    },
    serving::{
        exposition::{self, NotStarted},
        protocol::{Recording, Reply, Status},
        status,
    },
    settings::config::{ConfigFlags, DaemonConfig},
    tracking::discovery::Tracker,
    triggers::{
        Triggers,
        asked::{sampled::Sampling, scheduled::Scheduled},
        collectives::{self, LeftOut},
    },
    untrusted,
};

pub(super) struct Daemon {
    pub(super) config: DaemonConfig,
    /// The command line's settings, read again with the file on SIGHUP.
    flags: ConfigFlags,
    pub(super) tracker: Tracker,
    pub(super) sessions: Sessions,
    pub(super) flight: Option<FlightRecorder>,
    /// Traces and flight recorder dumps being written.
    pub(super) writing: Writing,
    traces_written: u64,
    /// `rocsync_collective_seq`'s series left out for their user's share.
    pub(super) collectives_left_out: LeftOut,
    pub(super) not_started: NotStarted,
    /// SIGTERM came: traces in progress finish, then the daemon exits.
    pub(super) stopping: bool,
    /// dyno's requests with a synchronized start.
    pub(super) scheduled: Scheduled,
    /// When the next sampled window starts (sampling configured).
    pub(super) sampling: Sampling,
    /// When the scan's temporary `*GetDevice` probes come off.
    pub(super) learn_until: Option<Instant>,
    /// What the probes cost each process, and what was shed to hold the budget.
    pub(super) budget: Budget,
    /// The daemon's own triggers: hangs, stalls, ranks behind, stuck ranks.
    pub(super) triggers: Triggers,
    /// dyno refusals said in the log, per peer.
    pub(super) quiet_dyno: Quiet,
    /// Where written traces go: uploaded (`--upload`), kept within retention.
    destinations: Destinations,
    next_id: u64,
    /// Where a held claim's connection says it closed.
    pub(super) released: UnboundedSender<ClaimId>,
    /// Where a stacks read for a trace (its id) comes back, off the loop.
    pub(super) stacks_read: UnboundedSender<(u64, crate::stacks::Stacks)>,
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
            scheduled: Scheduled::default(),
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

    /// What the start measured and scheduled: the probes' prices, the sampling from now,
    /// and until when the scan's `*GetDevice` probes learn.
    pub(super) fn started(mut self, budget: Budget, learn_until: Option<Instant>) -> Self {
        self.budget = budget;
        self.budget.flight = self.flight.is_some();
        self.sampling = Sampling::new(self.config.sampling);
        self.learn_until = learn_until;
        self
    }

    pub(super) fn take_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id - 1
    }

    /// What `rocsync status` shows.
    pub(super) fn status(&self) -> Status {
        let traces = self.sessions.traces.iter();
        let mut status = Status {
            claims: self.sessions.held.iter().map(|(_, n)| n.clone()).collect(),
            scheduled: self.scheduled.status(),
            traces: traces
                .map(|(_, t)| Recording {
                    id: t.id,
                    pids: t.pids.clone(),
                    session: t.name(),
                })
                .collect(),
            tracked: status::tracked(&self.tracker, &self.budget),
            writing: self.writing.names().into_iter().map(String::from).collect(),
            stall_traces: Vec::new(),
            hangs: Vec::new(),
            returns_probed: match self.tracker.returns.on() {
                true => "all",
                false => "needed",
            }
            .into(),
        };
        let now_ns = crate::os::clock::monotonic_ns() as u64;
        for t in self.triggers.each() {
            t.status(&mut status, now_ns);
        }
        status
    }

    /// Whether call records are wanted now (a trace records, or the flight recorder).
    pub(super) fn wants_calls(&self) -> bool {
        self.sessions.recording() || self.flight.is_some()
    }

    /// Looks at a process (`Tracker::look`). One it now tracks is sampled for the budget
    /// at once: the next tick measures its share, rather than only sampling it — a
    /// process that polls from its start is shed within a tick, not two.
    pub(super) fn look(&mut self, pid: u32) {
        let tracked = self.tracker.tracked.contains(&pid);
        self.tracker.look(pid);
        if !tracked && self.tracker.tracked.contains(&pid) {
            self.budget.tracked(&mut self.tracker, pid);
        }
    }

    /// A standalone capture ended (its claim's connection closed).
    pub(super) fn on_released(&mut self, claim: ClaimId) -> Flow {
        self.sessions.release(claim);
        Flow::Go
    }

    /// The scan's temporary `*GetDevice` probes have learnt long enough.
    pub(super) fn on_learned(&mut self) -> Flow {
        self.learn_until = None;
        if let Err(e) = self.tracker.probes.set_switch(switch(GetDeviceMode::Off)) {
            crate::say!("rocsync daemon: warning: {e:#}");
        }
        // Detached in the background (unregistering uprobes takes a while), and said
        // once done: until then a probe whose switch could not be set still records.
        let detaching = self.tracker.probes.detach_temporary();
        std::thread::spawn(move || {
            let _ = detaching.join();
            crate::say!("rocsync daemon: *GetDevice probes removed");
        });
        Flow::Go
    }

    pub(super) fn on_tick(&mut self) -> Flow {
        self.sessions.tick();
        // Those found mid-load whose loader has not announced the load's end yet.
        for pid in self.tracker.loading.pids() {
            self.look(pid);
        }
        Flow::Go
    }

    /// What the logs held back is said: the daemon stops before their windows pass (a
    /// stop within 10 s of a flood of removals lost their count, issue 60).
    pub(super) fn on_stopped(&mut self) {
        self.quiet_dyno.say_held();
        self.destinations.say_held();
    }

    /// Tracked processes that exited are forgotten.
    pub(super) fn on_prune(&mut self) -> anyhow::Result<Flow> {
        self.quiet_dyno.flush(Instant::now());
        self.destinations.flush();
        let gone = self.tracker.prune()?;
        self.budget.groups_gone(&gone);
        self.sessions
            .queues
            .retain_processes(crate::os::procfs::exists);
        if let Some(f) = &mut self.flight {
            f.expire();
        }
        // What gone processes, the recorder and the loop freed goes back to the system
        // (glibc keeps a freed heap resident until trimmed); measured at up to 15 ms on a
        // 20 MB heap of 100 000 scattered free chunks, so at most that every 5 s.
        crate::os::memory::give_back();
        Ok(Flow::Go)
    }

    /// Each tracked process's probes' share of its CPU, measured; the budget held.
    pub(super) fn on_budget(&mut self) -> Flow {
        let (limit, cycles) = (self.config.budget, self.config.budget_cycles);
        self.budget.recorders = self.recorders();
        self.budget.flight = self.flight.is_some();
        self.budget.period(&mut self.tracker, limit, cycles);
        Flow::Go
    }

    /// What holds every probe on now, as the budget names it when it leaves a process
    /// over it for them: `--return-probes all`, and each trace with who asked for it. Not
    /// the flight recorder: the budget's duty cycle takes what it records like counting.
    fn recorders(&self) -> Vec<String> {
        let all = (self.config.all_returns).then(|| "--return-probes all".to_string());
        let traces = self.sessions.traces.iter().map(|(_, t)| match t.asked_by {
            Some(uid) => format!("{} (asked by uid {uid})", t.name()),
            None => t.name(),
        });
        all.into_iter().chain(traces).collect()
    }

    /// A trace or a flight recorder dump was written (or failed: said here, whether or
    /// not a client waits): counted, handed to its destinations, and its client answered.
    /// Stopping ends once the last is written.
    pub(super) async fn written(&mut self, done: Done) -> Flow {
        self.sessions.truncated += u64::from(done.truncated);
        match &done.reply {
            Reply::Written(w) => {
                self.traces_written += w.files.len() as u64;
                if done.unasked {
                    for t in self.triggers.all() {
                        t.on_written(&w.files);
                    }
                }
            }
            Reply::Refused { error } => crate::say!(
                "rocsync daemon: error: {}: {}",
                done.name,
                untrusted::shown(error)
            ),
            _ => {}
        }
        if let Some(trace) = done.trace() {
            self.destinations.written(&trace);
        }
        if let Some(client) = done.client {
            client.send(&done.reply).await;
        }
        if self.stopping && !self.sessions.recording() && self.writing.is_empty() {
            return Flow::Stop;
        }
        Flow::Go
    }

    /// SIGHUP reloads the configuration; the others stop the daemon once the traces in
    /// progress are written.
    pub(super) fn on_signal(&mut self, signal: &'static str) -> Flow {
        if signal == "SIGHUP" {
            self.reload();
            return Flow::Go;
        }
        crate::say!("rocsync daemon: stopping ({signal})");
        for w in self.scheduled.take_all() {
            self.not_started.scheduled += 1;
            crate::say!(
                "rocsync daemon: scheduled dyno trace {:?} not started: the daemon is stopping",
                w.start.spec.name
            );
        }
        if !self.sessions.recording() && self.writing.is_empty() {
            return Flow::Stop;
        }
        // Finish the traces in progress (their deadlines come now) and write them, then
        // stop.
        self.sessions.end_all_now();
        self.stopping = true;
        Flow::Go
    }

    /// A new configuration, checked whole before it replaces the one in effect (a bad
    /// one is said and the old kept): the state directory made as at start, and the
    /// sampling schedule follows the sampling now configured. What was set up at start
    /// stays as it is (listeners, the flight recorder, the socket's group, the learning
    /// done): said, never pretended (`DaemonConfig::replacing`).
    fn reload(&mut self) {
        let checked = DaemonConfig::load(&self.flags).and_then(|c| {
            statedir::make(&c.state_dir)?;
            Ok(c)
        });
        let mut c = match checked {
            Ok(c) => c,
            Err(e) => {
                let e = format!("{e:#}");
                return crate::say!(
                    "rocsync daemon: warning: keeping the configuration: {}",
                    untrusted::shown(&e)
                );
            }
        };
        let threshold = c.kernel_threshold();
        if threshold != self.config.kernel_threshold()
            && let Err(e) = self.tracker.probes.set_stall_threshold(threshold)
        {
            crate::say!("rocsync daemon: warning: {e:#}");
        }
        if c.sampling != self.config.sampling {
            self.sampling = Sampling::new(c.sampling);
        }
        self.tracker.set_filters(c.filters.clone());
        if !(self.destinations).reload(c.destinations(), self.config.destinations()) {
            (c.upload, c.node_name) = (self.config.upload.clone(), self.config.node_name.clone());
        }
        self.config = c.replacing(&self.config);
        crate::say!("rocsync daemon: configuration reloaded");
    }

    /// `/metrics` as scraped now: the probes' maps read, the budget's view, and every
    /// part's counts.
    pub(super) fn metrics(&mut self) -> anyhow::Result<String> {
        let budget = self.budget.view(&mut self.tracker, self.config.budget);
        let tracker = &self.tracker;
        let probes = &tracker.probes;
        // Read only when scraped: a walk of the communicator map.
        let uid = |pid| (tracker.tracked.contains(&pid)).then(|| crate::os::procfs::uid(pid))?;
        let (collectives, left_out) = collectives::sequences(&probes.comms(), uid);
        self.collectives_left_out.saw(left_out);
        let (series, unlabelled) = exposition::read_series(tracker, &self.budget.estimates.added)?;
        let (drops, packets) = (probes.drops()?, probes.aql_packets()?);
        let stall_traces = (self.triggers).stall_view(
            probes.dependency_evicted().ok(),
            probes.dependency_shared_lane_users().ok(),
            probes.untimed_calls()?,
        );
        Ok(exposition::render(&exposition::Snapshot {
            series: &series,
            unlabelled,
            packets: &packets,
            drops: &drops,
            tracked: tracker.tracked.len(),
            cpu_seconds: exposition::own_cpu_seconds(),
            flight_evicted: self.flight.as_ref().map(|f| f.evicted),
            traces_written: self.traces_written,
            traces_truncated: self.sessions.truncated,
            not_started: self.not_started,
            files_probed: tracker.files.count(),
            collectives: &collectives,
            collectives_left_out: self.collectives_left_out.total,
            files_refused: tracker.files.refused,
            budget,
            stall_traces,
            uploads: self.destinations.upload_view(),
        }))
    }
}
