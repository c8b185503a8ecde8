//! What the daemon answers: trace requests, standalone captures' claims and status on its
//! unix socket, scrapes of `/metrics`, and dynolog's requests.

use anyhow::{Result, anyhow};
use aya::maps::{MapData, RingBuf};
use serde_json::Value;
use tokio::{
    io::AsyncReadExt as _,
    net::{TcpStream, UnixStream},
};

use crate::daemon::{
    handlers::Flow,
    recording::{files, flight, selection},
    serving::peer::Peer,
    serving::{
        dynolog, http,
        protocol::{ClaimRequest, Reply, Request},
        readers::Incoming,
        socket::{self, PendingReply},
    },
    state::Daemon,
    tracking::apart::shed_log,
    triggers::{
        asked::{dyno, socket as asked},
        origin::{Origin, Start, TraceSpec},
    },
    untrusted,
};

/// A request on the socket, checked.
enum Asked {
    /// A trace (none: a flight recorder dump), and whether to send the files'
    /// descriptors.
    Trace(Option<TraceSpec>, bool),
    Claim(ClaimRequest),
}

impl Daemon {
    /// A request its reader read whole; `ring`: the probes' ring, read up to now before a
    /// flight recorder dump.
    pub(crate) async fn on_incoming(
        &mut self,
        asked: Incoming,
        ring: &mut RingBuf<MapData>,
    ) -> Flow {
        match asked {
            Incoming::Http(path, answer) => {
                let _ = answer.send(http::page(&path, || self.metrics()));
            }
            Incoming::Request(conn, asked) => self.on_request(conn, asked, ring).await,
            Incoming::Dynolog(conn, asked, peer) => self.on_dynolog(conn, asked, peer).await,
        }
        Flow::Go
    }

    /// A request read on the unix socket (its peer already checked).
    async fn on_request(
        &mut self,
        mut conn: UnixStream,
        asked: Result<Request>,
        ring: &mut RingBuf<MapData>,
    ) {
        let asked = match asked {
            Ok(Request::Status {}) => {
                let status = Reply::Status(self.status());
                return socket::answer(conn, &status).await;
            }
            Ok(Request::Trace(t)) => {
                let send_files = t.send_files;
                asked::checked(t).map(|spec| Asked::Trace(spec, send_files))
            }
            Ok(Request::Claim(c)) => Ok(Asked::Claim(c)),
            Err(e) => Err(e),
        };
        let asked = match asked {
            // Read before SIGTERM came, answered after.
            Ok(_) if self.stopping => {
                return refuse(conn, &anyhow!("the daemon is stopping")).await;
            }
            Ok(a) => a,
            Err(e) => return refuse(conn, &e).await,
        };
        match asked {
            Asked::Claim(c) => match self.sessions.hold(c.name, c.agents) {
                Ok(id) => {
                    let claimed = Reply::Claimed {
                        claimed: id.to_string(),
                    };
                    socket::answer_keeping(&mut conn, &claimed).await;
                    let released = self.released.clone();
                    // The claim lasts as long as the capture's connection, however it ends;
                    // what a client sends meanwhile is read and dropped, never kept.
                    tokio::spawn(async move {
                        let mut scratch = [0u8; 4096];
                        while matches!(conn.read(&mut scratch).await, Ok(n) if n > 0) {}
                        let _ = released.send(id);
                    });
                }
                Err(e) => refuse(conn, &e.into()).await,
            },
            Asked::Trace(None, send_files) => {
                let client = PendingReply::new(conn, send_files);
                self.dump_flight(client, ring).await
            }
            Asked::Trace(Some(spec), send_files) => {
                let uid = rustix::net::sockopt::socket_peercred(&conn)
                    .ok()
                    .map(|c| c.uid.as_raw());
                // Root's request first: a group member's trace of the same agents ends.
                if uid == Some(0) {
                    self.sessions.preempt_for(&spec.agents);
                }
                if let Err(e) = self.begin(Start::new(spec, Origin::Asked)) {
                    return refuse(conn, &e).await;
                }
                // Its client going away ends it (through its claim, as a capture's does).
                let reply = match self.sessions.last_claim() {
                    Some(claim) => {
                        let released = self.released.clone();
                        PendingReply::watched(conn, send_files, move || {
                            let _ = released.send(claim);
                        })
                    }
                    None => PendingReply::new(conn, send_files),
                };
                let trace = &mut self.sessions.traces.last_mut().expect("just begun").1;
                trace.reply = Some(reply);
                trace.asked_by = uid;
            }
        }
    }

    /// Writes what the flight recorder holds, off the loop: every call made before the
    /// request, or counted lost.
    async fn dump_flight(&mut self, client: PendingReply, ring: &mut RingBuf<MapData>) {
        let conn = client.conn;
        let id = self.take_id();
        let roots = rustix::net::sockopt::socket_peercred(&conn).is_ok_and(|c| c.uid.is_root());
        match &self.flight {
            None => {
                let e = anyhow!(
                    "the flight recorder is off: start the daemon with --flight-recorder 10s"
                );
                refuse(conn, &e).await;
            }
            // One at a time: a dump holds its chunks (up to the recorder's cap). Root's
            // ends another user's (written as far as it went), which then soon lets go.
            Some(_)
                if self.writing.flight_pending() && !(roots && self.writing.preempt_flights()) =>
            {
                let e = anyhow!(
                    "the flight recorder is being written for an earlier request: ask again when it is done"
                );
                refuse(conn, &e).await;
            }
            Some(_) => {
                // The counter first: ids given before it are in the records read next,
                // or lost (a call that took its id and has yet to reserve its record in
                // this instant is counted lost rather than missed).
                let assigned = self.tracker.probes.correlations_assigned().ok();
                // The reader may be behind (a loaded moment): the dump holds what was
                // made up to the request, not what happened to be read.
                self.catch_up(ring);
                let processes =
                    files::identities(self.tracker.tracked.iter().copied(), &self.tracker.pods);
                let dir = self.config.state_dir.clone();
                let max_bytes = self.config.trace_max_bytes;
                let links = self.tracker.probes.link_kind().name();
                let Some(f) = &mut self.flight else { return };
                // What the budget shed within the recorder's span.
                let from_us = shed_log::now_us() - f.span().as_micros() as u64;
                let shed = self.tracker.shed_log.overlapping(from_us);
                let duty_cycled = self.tracker.shed_log.cycled_calls(from_us);
                let chunks = f.chunks();
                let queues = self.sessions.queues.missing_from(flight::records(&chunks));
                let held = flight::Held {
                    chunks,
                    assigned,
                    known_from: f.known_from(),
                    queues,
                    max_bytes,
                    duty_cycled,
                };
                let client = PendingReply::new(conn, client.send_files);
                self.writing
                    .flight((held, roots), dir, id, processes, client, (links, shed));
            }
        }
    }

    /// A dynolog request read (`dyno gputrace`): answered with the processes triggered,
    /// busy, or what is wrong — said in the log too.
    async fn on_dynolog(&mut self, mut conn: TcpStream, asked: Result<Value>, peer: Peer) {
        let reply = match asked.and_then(|v| self.dyno_request(&v, peer)) {
            Ok(pids) => dynolog::answer(&pids, false, None),
            Err(e) => {
                // Busy (the peer's or the node's dyno traces at their bound) is dyno's
                // own answer.
                let busy = e.downcast_ref::<dyno::Busy>().is_some();
                let e = format!("{e:#}");
                if self
                    .quiet_dyno
                    .allow(&peer.to_string(), tokio::time::Instant::now())
                {
                    crate::say!(
                        "rocsync daemon: dyno request from {peer} refused: {}",
                        untrusted::shown(&e)
                    );
                }
                dynolog::answer(&[], busy, (!busy).then_some(e))
            }
        };
        dynolog::write(&mut conn, &reply).await;
    }

    /// Starts or schedules what dyno asked; the processes it names.
    fn dyno_request(&mut self, v: &Value, peer: Peer) -> Result<Vec<u32>> {
        let d = dynolog::parse(v, &self.config.state_dir)?;
        anyhow::ensure!(!self.stopping, "the daemon is stopping");
        let name = d
            .log_file
            .file_stem()
            .map_or("trace".into(), |s| s.to_string_lossy().into_owned());
        let spec = TraceSpec {
            pids: d.pids,
            cgroup: None,
            pod: None,
            agents: Default::default(),
            duration: d.duration,
            name,
        };
        // Names no trace of another request, waiting, recording or already written.
        if self.dyno_log_file_taken(&d.log_file) {
            anyhow::bail!(
                "log file {} is an earlier request's, still recording or waiting: name another",
                d.log_file.display()
            );
        }
        dynolog::names_free(&d.log_file, &selection::matched(&self.tracker, &spec)?)?;
        let ahead = d
            .start
            .and_then(|t| t.duration_since(std::time::SystemTime::now()).ok());
        let log_file = d.log_file;
        let start = Start::new(spec, Origin::Dyno { log_file, peer });
        match ahead {
            Some(ahead) => self.schedule(start, ahead, peer),
            None => {
                dyno::admit(peer, self.sessions.origins())?;
                Ok(self.begin(start)?.pids.clone())
            }
        }
    }

    /// Whether a dyno request waiting or recording writes to `log`.
    fn dyno_log_file_taken(&self, log: &std::path::Path) -> bool {
        let mut recording = self.sessions.traces.iter();
        self.scheduled.writes_to(log) || recording.any(|(_, t)| t.origin.output() == Some(log))
    }
}

async fn refuse(conn: UnixStream, e: &anyhow::Error) {
    // Errors may quote the request (serde names an unknown variant as sent).
    let said = untrusted::shown(&format!("{e:#}"));
    crate::say!("rocsync daemon: request refused: {said}");
    socket::answer(conn, &Reply::refused(e)).await;
}
