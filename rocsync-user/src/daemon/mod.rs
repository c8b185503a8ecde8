//! `rocsync daemon`: always on, system-wide. Finds every process mapping a GPU runtime —
//! by a scan at start, then as the probes announce an exec or a library load, never by
//! polling every process — counts their calls in the kernel (no ring traffic), and serves
//! the counts as Prometheus text on `/metrics` (and `/healthz`); records traces on request
//! (`rocsync trace`, over a unix socket). Needs nothing from the targets: no environment
//! variable, no restart. SIGHUP reloads the configuration; SIGTERM/SIGINT end it (a trace
//! in progress is finished and written first), leaving every target running.
//!
//! [`run`] sets up and then waits on one loop; each thing it waits for is one method of
//! [`state::Daemon`]: the small wakes in `state.rs`, what it records in
//! `handlers/recording.rs`, what it answers in `handlers/requests.rs`.

mod budget;
mod handlers;
mod outputs;
mod quiet;
mod recording;
mod serving;
mod settings;
mod state;
mod tracking;
mod triggers;
pub(crate) mod untrusted;

pub(crate) use serving::{protocol, remote};
pub(crate) use settings::config;

/// Longest trace a request may ask for (`rocsync trace --duration` checks it first).
pub(crate) use triggers::origin::MAX_DURATION as MAX_TRACE_DURATION;

use std::time::Duration;

use anyhow::{Context as _, Result};
use aya::maps::{MapData, RingBuf};
use rocsync_common::{GetDeviceMode, Switch};
use tokio::{
    io::unix::AsyncFd,
    net::{TcpListener, UnixListener},
    sync::mpsc::UnboundedReceiver,
    time::{Instant, Interval},
};

use crate::{
    calls::{
        agents::ClaimId,
        probes::{ProbeOptions, Probes, async_ring, seccomp::Returns},
    },
    os::{lockfile::LockFile, signals::Signals},
};
use handlers::Flow;
use outputs::statedir;
use serving::{
    pauses::{DYNO, METRICS, Pauses, REQUESTS},
    readers::{Incoming, Readers},
    socket,
};
use settings::config::{ConfigFlags, DaemonConfig};
use state::Daemon;
use tracking::{discovery::Tracker, pods};

use crate::calls::pipeline::cadence::{DRAIN_EVERY, TICK_EVERY};

/// How often tracked processes that exited are forgotten.
const PRUNE_EVERY: Duration = Duration::from_secs(5);

/// Runs the daemon with `flags` over its configuration file; `check`: print the settings
/// in effect and exit.
pub(crate) async fn run(flags: ConfigFlags, check: bool, signals: Signals) -> Result<i32> {
    let config = DaemonConfig::load(&flags)?;
    if check {
        // What the start would refuse of the state directory, said now.
        statedir::check(&config.state_dir)?;
        use std::io::Write as _;
        std::io::stdout()
            .write_all(config.summary().as_bytes())
            .context("writing to standard output")?;
        return Ok(0);
    }
    let (daemon, io) = start(config, flags, signals).await?;
    serve(daemon, io).await?;
    Ok(0)
}

/// What the loop waits on besides the daemon's own timers: the probes' ring, the
/// listeners, what their readers read, and signals.
struct Io {
    ring: AsyncFd<RingBuf<MapData>>,
    metrics: TcpListener,
    requests: UnixListener,
    socket_file: socket::SocketFile,
    /// One daemon per node, for as long as this one runs.
    _lock: LockFile,
    dyno: Option<TcpListener>,
    readers: Readers,
    incoming: UnboundedReceiver<Incoming>,
    /// Standalone captures' claims whose connection closed.
    released: UnboundedReceiver<ClaimId>,
    /// Stacks read for the daemon's own traces (`recording/stacks.rs`).
    stacks: UnboundedReceiver<(u64, crate::stacks::Stacks)>,
    signals: Signals,
    prune: Interval,
    /// When the probes' shares are measured against the budget.
    budget: Interval,
    tick: Interval,
    poll: Interval,
    /// Listeners resting after a failed accept.
    pauses: Pauses,
}

/// Loads the probes, listens, and scans the running processes.
/// The daemon's probes are file-wide: they run in every process mapping a runtime file,
/// containers under seccomp profiles included. Where a probed return kills such a process
/// (`probes::seccomp`), it does not start.
fn refuse_where_returns_kill(probes: &mut Probes) -> Result<()> {
    match probes.returns_under_seccomp() {
        Ok(Returns::Pass) => Ok(()),
        Ok(Returns::Kill) => anyhow::bail!(
            "on this kernel a probed return kills a process under a seccomp filter (most \
             containers' default profiles: the filter sees the uretprobe system call), and \
             the daemon's probes run in every process mapping a runtime; it needs a kernel \
             with \"seccomp: passthrough uretprobe systemcall\" (Linux 6.14, or a stable \
             backport). `rocsync doctor` shows it as \"returns under seccomp\""
        ),
        Err(e) => {
            crate::say!(
                "rocsync daemon: warning: could not tell whether a probed return is safe under \
                 seccomp here: {e:#}"
            );
            Ok(())
        }
    }
}

async fn start(config: DaemonConfig, flags: ConfigFlags, signals: Signals) -> Result<(Daemon, Io)> {
    crate::os::preflight::check()?;
    let lock = node_lock(&config.lock)?;
    statedir::make(&config.state_dir)?;
    statedir::sweep(&config.state_dir);
    let labelled =
        (config.metric_labels.any()).then_some((pods::LABELLED_SERIES, config.max_series_per_pod));
    let mut probes = Probes::load(ProbeOptions {
        labelled_series: labelled,
        ..ProbeOptions::default()
    })?;
    refuse_where_returns_kill(&mut probes)?;
    probes.discover_system_wide()?;
    let ring = async_ring(probes.take_ring()?)?;
    // Before the scan attaches the temporary *GetDevice probes.
    probes.set_switch(handlers::switch(GetDeviceMode::Learning))?;
    let metrics = TcpListener::bind(config.metrics_addr)
        .await
        .with_context(|| format!("cannot listen on {}", config.metrics_addr))?;
    let (requests, socket_file) = socket::listen(&config.socket, config.group)?;
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
        metrics.local_addr()?
    );
    // Ids the probes gave before it began were never its.
    let flight = config.flight_recorder.map(|span| {
        recording::flight::FlightRecorder::new(span, probes.correlations_assigned().ok())
    });
    let baseline = if flight.is_some() {
        rocsync_common::TRACE_RECORDING
    } else {
        0
    };
    // Before the scan: the calibration's probes are the daemon's own, on itself.
    let prices = budget::calibrated(&mut probes);
    probes.set_stall_threshold(config.kernel_threshold())?;
    // Counting pays one trap for calls whose return it does not need (`returns.rs`).
    probes.set_returnless(true)?;
    let mut tracker = Tracker::new(
        probes,
        config.filters.clone(),
        baseline,
        pods::Pods::new(config.metric_labels, config.host_state.clone()),
    );
    // The flight recorder records every tracked process always: every return with it
    // (the budget's duty cycle takes records' and waits' off with their entries).
    if flight.is_some() || config.all_returns {
        tracker.returns_on()?;
    }
    let learn_for = config.learn_devices;
    tracker.scan_all(!learn_for.is_zero());
    // The temporary *GetDevice probes of the scan, removed after a while (they trap
    // every call of a hot function).
    let learn_until = tracker.probes.has_temporary().then(|| {
        crate::say!(
            "rocsync daemon: learning running threads' devices from *GetDevice for {:?}",
            learn_for
        );
        Instant::now() + learn_for
    });
    let (released_tx, released) = tokio::sync::mpsc::unbounded_channel();
    let (stacks_tx, stacks) = tokio::sync::mpsc::unbounded_channel();
    let (readers, incoming) = Readers::new();
    let destinations = outputs::Destinations::start(config.destinations())?;
    let d = Daemon::new(
        config,
        flags,
        tracker,
        flight,
        destinations,
        (released_tx, stacks_tx),
    )
    .started(budget::Budget::new(prices), learn_until);
    // The line clients wait for: said once nothing left can fail.
    crate::say!(
        "rocsync daemon: tracking {} process(es); SIGHUP reloads, SIGTERM stops",
        d.tracker.tracked.len()
    );
    let io = Io {
        ring,
        metrics,
        requests,
        socket_file,
        _lock: lock,
        dyno,
        readers,
        incoming,
        released,
        stacks,
        signals,
        prune: tokio::time::interval(PRUNE_EVERY),
        budget: tokio::time::interval(budget::EVERY),
        tick: tokio::time::interval(TICK_EVERY),
        poll: tokio::time::interval(DRAIN_EVERY),
        pauses: Pauses::default(),
    };
    Ok((d, io))
}

/// The loop: each event is one method of the daemon's; ends once stopping is done.
async fn serve(mut d: Daemon, mut io: Io) -> Result<()> {
    loop {
        let deadline = d.sessions.next_deadline();
        let next_due = d.next_due();
        let resumes_at = io.pauses.resumes_at();
        let accepting = [METRICS, REQUESTS, DYNO].map(|l| io.pauses.accepting(l));
        let flow = tokio::select! {
            guard = io.ring.readable_mut() => {
                let mut guard = guard?;
                d.drain(guard.get_inner_mut());
                guard.clear_ready();
                Flow::Go
            }
            // Call records wake the reader only in bulk: read them while anyone wants them.
            _ = io.poll.tick(), if d.wants_calls() => {
                d.drain(io.ring.get_mut());
                Flow::Go
            }
            // Connections are read elsewhere (`readers`); what they asked comes here whole.
            conn = io.metrics.accept(), if accepting[METRICS] => {
                if let Some((conn, _)) = io.pauses.accepted(METRICS, conn) {
                    io.readers.http(conn);
                }
                Flow::Go
            }
            conn = io.requests.accept(), if !d.stopping && accepting[REQUESTS] => {
                if let Some((conn, _)) = io.pauses.accepted(REQUESTS, conn) {
                    io.readers.request(conn, d.config.group);
                }
                Flow::Go
            }
            conn = accept(&io.dyno), if !d.stopping && accepting[DYNO] => {
                if let Some(conn) = io.pauses.accepted(DYNO, conn) {
                    io.readers.dynolog(conn);
                }
                Flow::Go
            }
            _ = sleep_until(resumes_at), if resumes_at.is_some() => {
                io.pauses.resume();
                Flow::Go
            }
            Some(asked) = io.incoming.recv() => d.on_incoming(asked, io.ring.get_mut()).await,
            Some(claim) = io.released.recv() => d.on_released(claim),
            Some((id, stacks)) = io.stacks.recv() => d.on_stacks(id, &stacks),
            _ = sleep_until(d.learn_until), if d.learn_until.is_some() => d.on_learned(),
            _ = sleep_until(next_due), if next_due.is_some() && !d.stopping => d.on_due(),
            _ = sleep_until(deadline), if deadline.is_some() => {
                // What the probes wrote up to now belongs to the traces.
                d.drain(io.ring.get_mut());
                d.finish_due(io.ring.get_mut())?;
                Flow::Go
            }
            done = d.writing.next(), if !d.writing.is_empty() => d.written(done).await,
            _ = io.tick.tick(), if d.sessions.recording() => d.on_tick(),
            _ = io.prune.tick() => d.on_prune()?,
            _ = io.budget.tick() => {
                d.on_look();
                d.on_budget()
            }
            s = io.signals.next(), if !d.stopping => d.on_signal(s),
        };
        if flow == Flow::Stop {
            break;
        }
    }
    d.on_stopped();
    // Counting stops at once; the probes detach in the background while we exit.
    d.tracker.probes.set_switch(Switch::default())?;
    io.socket_file.remove();
    Ok(())
}

/// The next connection on an optional listener (never, without one).
async fn accept(l: &Option<TcpListener>) -> std::io::Result<tokio::net::TcpStream> {
    match l {
        Some(l) => l.accept().await.map(|(c, _)| c),
        None => std::future::pending().await,
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Takes the node's daemon lock, or says which daemon holds it.
fn node_lock(path: &std::path::Path) -> Result<LockFile> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        anyhow::bail!("{}: the daemon's lock is a file's path", path.display());
    };
    match LockFile::take(dir, &name.to_string_lossy())? {
        Ok(lock) => Ok(lock),
        Err(holder) => anyhow::bail!(
            "another rocsync daemon runs on this node ({holder}, holding {}): one daemon per node \
             counts every process once; stop it first, or ask it (`rocsync status`)",
            path.display()
        ),
    }
}
