//! `rocsync daemon`: always on, system-wide. Finds every process mapping a GPU runtime —
//! by a scan at start, then as the probes announce an exec or a library load, never by
//! polling every process — counts their calls in the kernel (no ring traffic), and serves
//! the counts as Prometheus text on `/metrics` (and `/healthz`); records traces on request
//! (`rocsync trace`, over a unix socket). Needs nothing from the targets: no environment
//! variable, no restart. SIGHUP reloads the configuration; SIGTERM/SIGINT end it (a trace
//! in progress is finished and written first), leaving every target running.

pub mod client;
mod clients;
pub mod config;
mod discovery;
mod dynolog;
mod exposition;
mod flight;
mod http;
mod requests;
mod retention;
mod sessions;
mod socket;
mod traces;
mod writing;

use std::time::Duration;

use anyhow::{Context as _, Result};
use rocsync_common::{
    Api, Decoded, GetDeviceMode, Op, PROCESS_EXIT, Switch, TRACE_RECORDING, decode,
};
use tokio::net::TcpListener;

use crate::{
    capture::{LEARN_FOR, Signals, session::async_ring},
    cli::DaemonArgs,
    probes::{ProbeOptions, Probes},
};
use clients::{Clients, Incoming};
use config::Config;
use discovery::Tracker;
use requests::Daemon;

/// How often tracked processes that exited are forgotten.
const PRUNE_EVERY: Duration = Duration::from_secs(5);
/// How often a trace's pipeline looks for lost correlation ids.
const TICK_EVERY: Duration = Duration::from_millis(100);
/// How often the ring is read while a trace or the flight recorder wants call records.
const DRAIN_EVERY: Duration = Duration::from_millis(10);

pub async fn daemon(args: DaemonArgs, mut signals: Signals) -> Result<i32> {
    let config = Config::load(&args)?;
    if args.check {
        use std::io::Write as _;
        std::io::stdout()
            .write_all(format!("{config:#?}\n").as_bytes())
            .context("writing to standard output")?;
        return Ok(0);
    }
    crate::preflight::check()?;
    make_private_dir(&config.state_dir)?;
    let mut probes = Probes::load(ProbeOptions::default())?;
    probes.discover_system_wide()?;
    let ring = probes.take_ring()?;
    let mut ring = async_ring(ring)?;
    // Before the scan attaches the temporary *GetDevice probes.
    probes.set_switch(switch(GetDeviceMode::Learning))?;
    let listener = TcpListener::bind(config.metrics_addr)
        .await
        .with_context(|| format!("cannot listen on {}", config.metrics_addr))?;
    let requests = socket::listen(&config.socket, config.group)?;
    let dyno = match config.dynolog_addr {
        Some(a) => {
            let l = TcpListener::bind(a)
                .await
                .with_context(|| format!("cannot listen on {a} for dynolog"))?;
            crate::say!("rocsync daemon: dynolog requests on {}", l.local_addr()?);
            Some(l)
        }
        None => None,
    };
    crate::say!(
        "rocsync daemon: traces on request at {}",
        config.socket.display()
    );
    crate::say!(
        "rocsync daemon: metrics on http://{}/metrics",
        listener.local_addr()?
    );
    let flight = config.flight_recorder.map(flight::FlightRecorder::new);
    let baseline = if flight.is_some() { TRACE_RECORDING } else { 0 };
    let mut tracker = Tracker::new(probes, config.filters.clone(), baseline);
    tracker.scan_all();
    crate::say!(
        "rocsync daemon: tracking {} process(es); SIGHUP reloads, SIGTERM stops",
        tracker.tracked.len()
    );
    // The first sampled window at a random point of the period, so a fleet's nodes spread.
    let mut next_sample = config
        .sampling
        .map(|(_, every)| tokio::time::Instant::now() + every.mul_f64(random_fraction()));
    // The temporary *GetDevice probes of the scan, removed after a while (they trap
    // every call of a hot function).
    let mut learn_until = tracker.probes.has_temporary().then(|| {
        crate::say!(
            "rocsync daemon: learning running threads' devices from *GetDevice for {:?}",
            LEARN_FOR
        );
        tokio::time::Instant::now() + LEARN_FOR
    });
    let (released, mut claims_closed) = tokio::sync::mpsc::unbounded_channel();
    let mut d = Daemon::new(config, tracker, flight, released);
    let mut prune = tokio::time::interval(PRUNE_EVERY);
    let mut tick = tokio::time::interval(TICK_EVERY);
    let mut poll = tokio::time::interval(DRAIN_EVERY);
    let (clients, mut incoming) = Clients::new();
    loop {
        let deadline = d.sessions.next_deadline();
        tokio::select! {
            guard = ring.readable_mut() => {
                let mut guard = guard?;
                drain(guard.get_inner_mut(), &mut d);
                guard.clear_ready();
            }
            // Call records wake the reader only in bulk: read them while anyone wants them.
            _ = poll.tick(), if d.sessions.recording() || d.flight.is_some() => {
                drain(ring.get_mut(), &mut d);
            }
            // Connections are read elsewhere (`clients`); what they asked comes here whole.
            conn = listener.accept() => {
                if let Ok((conn, _)) = conn {
                    clients.http(conn);
                }
            }
            conn = requests.accept(), if !d.stopping => {
                if let Ok((conn, _)) = conn {
                    clients.request(conn, d.config.group);
                }
            }
            conn = accept(&dyno), if !d.stopping => {
                if let Ok(conn) = conn {
                    clients.dynolog(conn);
                }
            }
            Some(asked) = incoming.recv() => match asked {
                Incoming::Http(path, answer) => {
                    let _ = answer.send(route(&path, &d));
                }
                Incoming::Request(conn, asked) => d.on_request(conn, asked).await,
                Incoming::Dynolog(conn, asked) => d.on_dynolog(conn, asked).await,
            },
            Some(claim) = claims_closed.recv() => d.sessions.release(claim),
            _ = sleep_until(learn_until), if learn_until.is_some() => {
                learn_until = None;
                if let Err(e) = d.tracker.probes.set_switch(switch(GetDeviceMode::Off)) {
                    crate::say!("rocsync daemon: warning: {e:#}");
                }
                // Detached in the background: unregistering uprobes takes a while.
                drop(d.tracker.probes.detach_temporary());
                crate::say!("rocsync daemon: *GetDevice probes removed");
            }
            _ = sleep_until(d.next_scheduled()), if !d.stopping => d.start_scheduled(),
            _ = sleep_until(next_sample), if next_sample.is_some() && !d.stopping => {
                let (window, every) = d.config.sampling.expect("a sample time is sampling's");
                next_sample = next_sample.map(|t| t + every);
                d.sample(window);
            }
            _ = sleep_until(deadline), if deadline.is_some() => {
                // What the probes wrote up to now belongs to the traces.
                drain(ring.get_mut(), &mut d);
                d.finish_due()?;
            }
            done = d.writing.next(), if !d.writing.is_empty() => {
                d.written(done).await;
                if d.stopping && !d.sessions.recording() && d.writing.is_empty() {
                    break;
                }
            }
            _ = tick.tick(), if d.sessions.recording() => d.sessions.tick(),
            _ = prune.tick() => d.tracker.prune()?,
            s = signals.next(), if !d.stopping => {
                if s != "SIGHUP" {
                    crate::say!("rocsync daemon: stopping ({s})");
                    d.drop_scheduled();
                    if !d.sessions.recording() && d.writing.is_empty() {
                        break;
                    }
                    // Finish the traces in progress (their deadlines come now) and write
                    // them, then stop.
                    d.sessions.end_all_now();
                    d.stopping = true;
                    continue;
                }
                match Config::load(&args) {
                    Ok(c) => {
                        d.tracker.filters = c.filters.clone();
                        d.config = Config { socket: d.config.socket.clone(), ..c };
                        crate::say!("rocsync daemon: configuration reloaded");
                    }
                    Err(e) => crate::say!("rocsync daemon: warning: keeping the configuration: {e:#}"),
                }
            }
        }
    }
    // Counting stops at once; the probes detach in the background while we exit.
    d.tracker.probes.set_switch(Switch::default())?;
    let _ = std::fs::remove_file(&d.config.socket);
    Ok(0)
}

/// The next connection on an optional listener (never, without one).
async fn accept(l: &Option<TcpListener>) -> std::io::Result<tokio::net::TcpStream> {
    match l {
        Some(l) => l.accept().await.map(|(c, _)| c),
        None => std::future::pending().await,
    }
}

/// A number in [0, 1) that differs between runs (std's hasher keys are random).
fn random_fraction() -> f64 {
    use std::hash::{BuildHasher as _, Hasher as _};
    let h = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    (h >> 11) as f64 / (1u64 << 53) as f64
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Reads what the probes wrote: announcements feed discovery, call records the flight
/// recorder and the traces in progress.
fn drain(ring: &mut aya::maps::RingBuf<aya::maps::MapData>, d: &mut Daemon) {
    // The ring first, then the calls reserved before (see `Probes::drain_calls`).
    let calls_until = d.tracker.probes.calls_reserved();
    drain_ring(ring, d);
    let (flight, sessions) = (&mut d.flight, &mut d.sessions);
    d.tracker.probes.drain_calls(calls_until, |item| {
        if let Ok(decoded) = decode(item) {
            if let Some(f) = flight.as_mut() {
                f.keep(item);
            }
            sessions.route(item, &decoded);
        }
    });
}

fn drain_ring(ring: &mut aya::maps::RingBuf<aya::maps::MapData>, d: &mut Daemon) {
    while let Some(item) = ring.next() {
        match decode(&item) {
            Ok(Decoded::LinkMap(r)) => d.tracker.look(r.pid),
            Ok(Decoded::Process(r)) if r.event == PROCESS_EXIT => {}
            Ok(Decoded::Process(r)) => d.tracker.look(r.pid),
            Ok(Decoded::Wake) => {}
            Ok(decoded) => {
                if let Some(f) = &mut d.flight {
                    f.keep(&item);
                }
                d.sessions.route(&item, &decoded);
            }
            Err(_) => {}
        }
    }
}

fn route(path: &str, d: &Daemon) -> http::Response {
    let tracker = &d.tracker;
    match path {
        "/metrics" => match (tracker.probes.metrics(), tracker.probes.drops()) {
            (Ok(series), Ok(drops)) => (
                "200 OK",
                "text/plain; version=0.0.4; charset=utf-8",
                exposition::render(&exposition::Snapshot {
                    series: &series,
                    drops: &drops,
                    tracked: tracker.tracked.len(),
                    cpu_seconds: exposition::own_cpu_seconds(),
                    flight_evicted: d.flight.as_ref().map(|f| f.evicted),
                    traces_written: d.traces_written,
                    not_started: d.not_started,
                }),
            ),
            (Err(e), _) | (_, Err(e)) => (
                "500 Internal Server Error",
                "text/plain",
                format!("reading the probes' maps: {e:#}\n"),
            ),
        },
        "/healthz" => ("200 OK", "text/plain", "ok\n".into()),
        _ => ("404 Not Found", "text/plain", "not found\n".into()),
    }
}

/// Creates the state directory (mode 0700) if missing; refuses a link or a non-directory.
fn make_private_dir(dir: &std::path::Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => anyhow::bail!("state directory {} is not a directory", dir.display()),
        Err(_) => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("cannot create the state directory {}", dir.display())),
    }
}

/// The daemon's switch: calls counted, by process. Its only `*GetDevice` probes are the
/// scan's temporary ones: while they learn, a trace (the flight recorder's, from the
/// start) records a thread's calls until one succeeds, and none while they go.
fn switch(get_device: GetDeviceMode) -> Switch {
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
