//! What the daemon does when its loop wakes: the probes wrote, a timer came, a trace was
//! written, a signal. Requests are in `requests.rs`, timed starts and ends in `timed.rs`,
//! the budget's period in `budget.rs`.

use aya::maps::{MapData, RingBuf};
use rocsync_common::{Api, Decoded, GetDeviceMode, Op, PROCESS_EXIT, Switch, decode};

use crate::agents::ClaimId;
use crate::daemon::{
    recording::writing::Done,
    serving::exposition,
    serving::exposition::{
        Counter, StallView,
        families::{DEPENDENCY_EVICTED, DEPENDENCY_SHARED_LANE},
    },
    serving::http,
    serving::protocol::Reply,
    state::Daemon,
    triggers::{collectives, hangs::Untraced},
    untrusted,
};

/// Whether the loop goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    Go,
    Stop,
}

impl Daemon {
    /// Whether call records are wanted now (a trace records, or the flight recorder).
    pub(crate) fn wants_calls(&self) -> bool {
        self.sessions.recording() || self.flight.is_some()
    }

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

    /// Looks at a process (`Tracker::look`). One it now tracks is sampled for the budget
    /// at once: the next tick measures its share, rather than only sampling it — a
    /// process that polls from its start is shed within a tick, not two.
    fn look(&mut self, pid: u32) {
        let tracked = self.tracker.tracked.contains(&pid);
        self.tracker.look(pid);
        if !tracked && self.tracker.tracked.contains(&pid) {
            self.budget.tracked(&mut self.tracker, pid);
        }
    }

    /// A standalone capture ended (its claim's connection closed).
    pub(crate) fn on_released(&mut self, claim: ClaimId) -> Flow {
        self.sessions.release(claim);
        Flow::Go
    }

    /// The scan's temporary `*GetDevice` probes have learnt long enough.
    pub(crate) fn on_learned(&mut self) -> Flow {
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

    pub(crate) fn on_tick(&mut self) -> Flow {
        self.sessions.tick();
        // Those found mid-load whose loader has not announced the load's end yet.
        for pid in self.tracker.loading.pids() {
            self.look(pid);
        }
        Flow::Go
    }

    /// Tracked processes that exited are forgotten.
    pub(crate) fn on_prune(&mut self) -> anyhow::Result<Flow> {
        self.quiet_dyno.flush(tokio::time::Instant::now());
        let gone = self.tracker.prune()?;
        self.budget.groups_gone(&gone);
        self.sessions.queues.retain_processes(crate::procfs::exists);
        Ok(Flow::Go)
    }

    /// A trace or a flight recorder dump was written (or failed: said here, whether or
    /// not a client waits): counted, handed to its destinations, and its client answered.
    /// Stopping ends once the last is written.
    pub(crate) async fn written(&mut self, done: Done) -> Flow {
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
    pub(crate) fn on_signal(&mut self, signal: &'static str) -> Flow {
        if signal == "SIGHUP" {
            self.reload();
            return Flow::Go;
        }
        crate::say!("rocsync daemon: stopping ({signal})");
        self.drop_scheduled();
        if !self.sessions.recording() && self.writing.is_empty() {
            return Flow::Stop;
        }
        // Finish the traces in progress (their deadlines come now) and write them, then
        // stop.
        self.sessions.end_all_now();
        self.stopping = true;
        Flow::Go
    }

    /// `/metrics` and `/healthz`.
    pub(crate) fn http_page(&mut self, path: &str) -> http::Response {
        let budget = self.budget.view(&mut self.tracker, self.config.budget);
        let probes = &self.tracker.probes;
        let tracker = &self.tracker;
        // Read only when scraped: a walk of the communicator map.
        let collectives = match path {
            "/metrics" => {
                let uid =
                    |pid| (tracker.tracked.contains(&pid)).then(|| crate::procfs::uid(pid))?;
                let (shown, left_out) = collectives::sequences(&probes.comms(), uid);
                self.collectives_left_out.saw(left_out);
                shown
            }
            _ => Vec::new(),
        };
        match path {
            "/metrics" => match (
                exposition::read_series(&self.tracker, &self.budget.estimates.added),
                probes.drops(),
                probes.aql_packets(),
                probes.untimed_calls(),
            ) {
                (Ok((series, unlabelled)), Ok(drops), Ok(packets), Ok(untimed)) => (
                    "200 OK",
                    "text/plain; version=0.0.4; charset=utf-8",
                    exposition::render(&exposition::Snapshot {
                        series: &series,
                        unlabelled,
                        packets: &packets,
                        drops: &drops,
                        tracked: self.tracker.tracked.len(),
                        cpu_seconds: exposition::own_cpu_seconds(),
                        flight_evicted: self.flight.as_ref().map(|f| f.evicted),
                        traces_written: self.traces_written,
                        traces_truncated: self.sessions.truncated,
                        not_started: self.not_started,
                        files_probed: self.tracker.files.count(),
                        collectives: &collectives,
                        collectives_left_out: self.collectives_left_out.total,
                        files_refused: self.tracker.files.refused,
                        budget,
                        stall_traces: self.stall_view(untimed),
                        uploads: self.destinations.upload_view(),
                    }),
                ),
                (Err(e), _, _, _) | (_, Err(e), _, _) | (_, _, Err(e), _) | (_, _, _, Err(e)) => (
                    "500 Internal Server Error",
                    "text/plain",
                    format!("reading the probes' maps: {e:#}\n"),
                ),
            },
            "/healthz" => ("200 OK", "text/plain", "ok\n".into()),
            "/" => (
                "200 OK",
                "text/html; charset=utf-8",
                format!(
                    "<html><head><title>rocsync daemon</title></head><body>\
                     <h1>rocsync daemon</h1><p>{}</p><ul>\
                     <li><a href=\"/metrics\">/metrics</a> (Prometheus)</li>\
                     <li><a href=\"/healthz\">/healthz</a></li></ul></body></html>\n",
                    crate::VERSION
                ),
            ),
            _ => ("404 Not Found", "text/plain", "not found\n".into()),
        }
    }
}

/// The daemon's switch: calls counted, by process. Its only `*GetDevice` probes are the
/// scan's temporary ones: while they learn, a trace (the flight recorder's, from the
/// start) records a thread's calls until one succeeds, and none while they go.
pub(crate) fn switch(get_device: GetDeviceMode) -> Switch {
    let mut s = Switch {
        by_process: 1,
        metrics: 1,
        ..Switch::default()
    };
    for &api in Api::ALL.iter().filter(|a| a.op() == Op::GetDevice) {
        s.set_get_device(api, get_device);
    }
    s
}

impl Daemon {
    /// Stalls, hangs and what each trigger counts, as `/metrics` shows them.
    fn stall_view(&self, untimed: (u64, u64)) -> StallView {
        let (stalls, hangs) = (&self.triggers.stalls, &self.triggers.hangs);
        let mut counters = Vec::new();
        for t in self.triggers.each() {
            t.counters(&mut counters);
        }
        // Read when scraped; unreadable, left out rather than shown as none.
        if let Ok(evicted) = self.tracker.probes.dependency_evicted() {
            for (state, n) in [("event_record", evicted.0), ("stream_wait", evicted.1)] {
                counters.push(Counter {
                    family: &DEPENDENCY_EVICTED,
                    label: Some(("state", state)),
                    value: n as f64,
                });
            }
        }
        if let Ok(users) = self.tracker.probes.dependency_shared_lane_users() {
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
            hangs_untraced: (Untraced::ALL.iter())
                .map(|u| (u.name(), hangs.untraced.get(u.name()).copied().unwrap_or(0)))
                .collect(),
            in_flight: hangs.oldest.clone().into_iter().collect(),
            untimed,
            counters,
        }
    }
}
