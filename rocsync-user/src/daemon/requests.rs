//! What the daemon answers: trace requests, standalone captures' claims and status on its
//! unix socket, dynolog's requests, and the sampled windows it starts itself.

use std::time::Duration;

use anyhow::{Result, anyhow};
use serde_json::{Value, json};
use tokio::{
    io::AsyncReadExt as _,
    net::{TcpStream, UnixStream},
    sync::mpsc::UnboundedSender,
    time::Instant,
};

use super::{
    config::Config,
    discovery::{self, Tracker},
    dynolog,
    exposition::NotStarted,
    flight::FlightRecorder,
    sessions::Sessions,
    socket::{self, Asked},
    traces::{self, Active, Request},
    writing::{Done, Writing},
};
use crate::agents::{ClaimError, ClaimId};

pub struct Daemon {
    pub config: Config,
    pub tracker: Tracker,
    pub sessions: Sessions,
    pub flight: Option<FlightRecorder>,
    /// Traces and flight recorder dumps being written.
    pub writing: Writing,
    pub traces_written: u64,
    pub not_started: NotStarted,
    /// SIGTERM came: traces in progress finish, then the daemon exits.
    pub stopping: bool,
    /// dyno's requests with a synchronized start, by start time.
    scheduled: Vec<(Instant, Request)>,
    next_id: u64,
    /// Where a held claim's connection says it closed.
    released: UnboundedSender<ClaimId>,
}

impl Daemon {
    pub fn new(
        config: Config,
        tracker: Tracker,
        flight: Option<FlightRecorder>,
        released: UnboundedSender<ClaimId>,
    ) -> Self {
        Self {
            config,
            tracker,
            sessions: Sessions::default(),
            flight,
            writing: Writing::default(),
            traces_written: 0,
            not_started: NotStarted::default(),
            stopping: false,
            scheduled: Vec::new(),
            next_id: 1,
            released,
        }
    }

    fn take_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id - 1
    }

    /// Opens and starts a trace, if its agents are free.
    fn start(&mut self, req: Request) -> Result<&Active> {
        let id = self.take_id();
        let trace = Active::open(&self.tracker, req, &self.config.state_dir, id)?;
        self.sessions.start(&mut self.tracker, trace)?;
        Ok(&self.sessions.traces.last().expect("just started").1)
    }

    /// A request read on the unix socket (its peer already checked).
    pub async fn on_request(&mut self, mut conn: UnixStream, asked: Result<Asked>) {
        let asked = match asked {
            Ok(Asked::Status) => Asked::Status,
            // Read before SIGTERM came, answered after.
            Ok(_) if self.stopping => {
                return refuse(conn, &anyhow!("the daemon is stopping")).await;
            }
            Ok(a) => a,
            Err(e) => return refuse(conn, &e).await,
        };
        match asked {
            Asked::Status => socket::answer(conn, &self.status()).await,
            Asked::Claim { name, agents } => match self.sessions.hold(name, agents) {
                Ok(id) => {
                    socket::answer_keeping(&mut conn, &json!({ "claimed": id.to_string() })).await;
                    let released = self.released.clone();
                    // The claim lasts as long as the capture's connection, however it ends.
                    tokio::spawn(async move {
                        let mut rest = Vec::new();
                        let _ = conn.read_to_end(&mut rest).await;
                        let _ = released.send(id);
                    });
                }
                Err(e) => refuse(conn, &e.into()).await,
            },
            Asked::Trace { request, .. } if request.flight => {
                let id = self.take_id();
                match &mut self.flight {
                    None => {
                        let e = anyhow!(
                            "the flight recorder is off: start the daemon with --flight-recorder 10s"
                        );
                        refuse(conn, &e).await;
                    }
                    // One at a time: a dump holds its chunks (up to the recorder's cap).
                    Some(_) if self.writing.flight_pending() => {
                        let e = anyhow!(
                            "the flight recorder is being written for an earlier request: ask again when it is done"
                        );
                        refuse(conn, &e).await;
                    }
                    Some(f) => {
                        let processes = traces::identities(self.tracker.tracked.iter().copied());
                        let dir = self.config.state_dir.clone();
                        let links = self.tracker.probes.link_kind().name();
                        self.writing
                            .flight(f.chunks(), dir, id, processes, conn, links);
                    }
                }
            }
            Asked::Trace {
                request,
                send_files,
            } => match self.start(request) {
                Ok(_) => {
                    let t = &mut self.sessions.traces.last_mut().expect("started").1;
                    t.reply = Some((conn, send_files));
                }
                Err(e) => refuse(conn, &e).await,
            },
        }
    }

    /// A dynolog request read: `dyno gputrace`.
    pub async fn on_dynolog(&mut self, mut conn: TcpStream, asked: Result<Value>) {
        let asked = asked
            .and_then(|v| dynolog::parse(&v, &self.config.state_dir))
            .and_then(|d| {
                anyhow::ensure!(!self.stopping, "the daemon is stopping");
                Ok(d)
            });
        let reply = match asked {
            Err(e) => dynolog::answer(&[], false, Some(format!("{e:#}"))),
            Ok(d) => {
                let name = d
                    .log_file
                    .file_stem()
                    .map_or("trace".into(), |s| s.to_string_lossy().into_owned());
                let req = Request {
                    flight: false,
                    pids: d.pids,
                    cgroup: None,
                    agents: 0,
                    duration: d.duration,
                    name,
                    output: Some(d.log_file),
                };
                let ahead = d
                    .start
                    .and_then(|t| t.duration_since(std::time::SystemTime::now()).ok());
                match ahead {
                    Some(ahead) => self.schedule(req, ahead),
                    None => match self.start(req) {
                        Ok(t) => dynolog::answer(&t.pids, false, None),
                        Err(e) if e.downcast_ref::<ClaimError>().is_some() => {
                            dynolog::answer(&[], true, None)
                        }
                        Err(e) => dynolog::answer(&[], false, Some(format!("{e:#}"))),
                    },
                }
            }
        };
        dynolog::write(&mut conn, &reply).await;
    }

    /// A request for later: answered with the processes it names now, started when due.
    fn schedule(&mut self, req: Request, ahead: Duration) -> Value {
        match traces::matched(&self.tracker, &req) {
            Err(e) => dynolog::answer(&[], false, Some(format!("{e:#}"))),
            Ok(pids) => {
                crate::say!(
                    "rocsync daemon: dyno trace {:?} of pid(s) {pids:?} starts in {} ms",
                    req.name,
                    ahead.as_millis()
                );
                self.scheduled.push((Instant::now() + ahead, req));
                self.scheduled.sort_by_key(|(at, _)| *at);
                dynolog::answer(&pids, false, None)
            }
        }
    }

    /// When the next scheduled trace starts.
    pub fn next_scheduled(&self) -> Option<Instant> {
        self.scheduled.first().map(|(at, _)| *at)
    }

    /// Starts the scheduled traces whose time came; one that cannot start (its processes
    /// gone, its agents recorded by another session) is said, not retried.
    pub fn start_scheduled(&mut self) {
        let due = self
            .scheduled
            .partition_point(|(at, _)| *at <= Instant::now());
        for (_, req) in self.scheduled.drain(..due).collect::<Vec<_>>() {
            let name = req.name.clone();
            if let Err(e) = self.start(req) {
                self.not_started.scheduled += 1;
                crate::say!("rocsync daemon: scheduled dyno trace {name:?} not started: {e:#}");
            }
        }
    }

    /// Stopping: scheduled traces will not start.
    pub fn drop_scheduled(&mut self) {
        for (_, req) in self.scheduled.drain(..) {
            self.not_started.scheduled += 1;
            crate::say!(
                "rocsync daemon: scheduled dyno trace {:?} not started: the daemon is stopping",
                req.name
            );
        }
    }

    /// A sampled window of every tracked process, unless another session holds agents.
    pub fn sample(&mut self, window: std::time::Duration) {
        // No window is due while nothing runs (the ended are forgotten a little later).
        if !self.tracker.tracked.iter().any(|&p| traces::alive(p)) {
            return;
        }
        let req = Request {
            flight: false,
            pids: Vec::new(),
            cgroup: None,
            agents: 0,
            duration: window,
            name: "sample".into(),
            output: None,
        };
        if let Err(e) = self.start(req) {
            self.not_started.sampled += 1;
            crate::say!("rocsync daemon: sampled window skipped: {e:#}");
        }
    }

    /// Finishes the traces whose time came: they are written off the loop.
    pub fn finish_due(&mut self) -> Result<()> {
        for trace in self.sessions.due(&mut self.tracker)? {
            self.writing.trace(trace);
        }
        Ok(())
    }

    /// A trace or a flight recorder dump was written: counted, retention applied, and its
    /// client answered.
    pub async fn written(&mut self, done: Done) {
        let reply = done.reply;
        self.traces_written += reply["files"].as_array().map_or(0, |f| f.len() as u64);
        if let Some(newest) = reply["files"].get(0).and_then(|f| f.as_str()) {
            let dir = self.config.state_dir.join("traces");
            self.config.retention.apply(&dir, newest.as_ref());
        }
        deliver(done.client, &reply).await;
    }

    fn status(&self) -> Value {
        let tracked: Vec<Value> = self
            .tracker
            .tracked
            .iter()
            .map(|&pid| json!({ "pid": pid, "exe": discovery::exe(pid) }))
            .collect();
        let traces: Vec<Value> = self
            .sessions
            .traces
            .iter()
            .map(|(_, t)| json!({ "session": t.name(), "id": t.id, "pids": t.pids }))
            .collect();
        let held: Vec<&str> = self.sessions.held.iter().map(|(_, n)| n.as_str()).collect();
        let now = Instant::now();
        let scheduled: Vec<Value> = self
            .scheduled
            .iter()
            .map(|(at, r)| json!({ "session": r.name, "starts_in_ms": at.saturating_duration_since(now).as_millis() as u64 }))
            .collect();
        let writing = self.writing.names();
        json!({ "tracked": tracked, "traces": traces, "writing": writing, "scheduled": scheduled, "claims": held })
    }
}

async fn refuse(conn: UnixStream, e: &anyhow::Error) {
    crate::say!("rocsync daemon: request refused: {e:#}");
    socket::answer(conn, &json!({ "error": format!("{e:#}") })).await;
}

/// Sends a finished trace's answer, with the files' descriptors if the client asked.
async fn deliver(client: Option<(UnixStream, bool)>, reply: &Value) {
    match client {
        None => {}
        Some((conn, false)) => socket::answer(conn, reply).await,
        Some((conn, true)) => socket::answer_with_files(conn, reply).await,
    }
}
