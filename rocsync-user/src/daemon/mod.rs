//! `rocsync daemon`: always on, system-wide. Finds every process mapping a GPU runtime —
//! by a scan at start, then as the probes announce an exec or a library load, never by
//! polling every process — counts their calls in the kernel (no ring traffic), and serves
//! the counts as Prometheus text on `/metrics` (and `/healthz`). Needs nothing from the
//! targets: no environment variable, no restart. SIGHUP reloads the configuration;
//! SIGTERM/SIGINT end it, leaving every target running.

pub mod config;
mod discovery;
mod exposition;
mod http;

use std::time::Duration;

use anyhow::{Context as _, Result};
use rocsync_common::{Decoded, PROCESS_EXIT, Switch, decode};
use tokio::net::TcpListener;

use crate::{
    capture::{Signals, session::async_ring},
    cli::DaemonArgs,
    probes::{ProbeOptions, Probes},
};
use config::Config;
use discovery::Tracker;

/// How often tracked processes that exited are forgotten.
const PRUNE_EVERY: Duration = Duration::from_secs(5);

pub async fn daemon(args: DaemonArgs, mut signals: Signals) -> Result<i32> {
    let mut config = Config::load(&args)?;
    if args.check {
        println!("{config:#?}");
        return Ok(0);
    }
    crate::preflight::check()?;
    make_private_dir(&config.state_dir)?;
    let mut probes = Probes::load(ProbeOptions::default())?;
    probes.discover_system_wide()?;
    let ring = probes.take_ring()?;
    let mut ring = async_ring(ring)?;
    probes.set_switch(Switch {
        capture: 0,
        by_process: 1,
        agents: 0,
        metrics: 1,
        pad: 0,
    })?;
    let listener = TcpListener::bind(config.metrics_addr)
        .await
        .with_context(|| format!("cannot listen on {}", config.metrics_addr))?;
    eprintln!(
        "rocsync daemon: metrics on http://{}/metrics",
        listener.local_addr()?
    );
    let mut tracker = Tracker::new(probes, config.filters.clone());
    tracker.scan_all();
    eprintln!(
        "rocsync daemon: tracking {} process(es); SIGHUP reloads, SIGTERM stops",
        tracker.tracked.len()
    );
    let mut prune = tokio::time::interval(PRUNE_EVERY);
    loop {
        tokio::select! {
            guard = ring.readable_mut() => {
                let mut guard = guard?;
                while let Some(item) = guard.get_inner_mut().next() {
                    match decode(&item) {
                        Ok(Decoded::LinkMap(r)) => tracker.look(r.pid),
                        Ok(Decoded::Process(r)) if r.event == PROCESS_EXIT => {}
                        Ok(Decoded::Process(r)) => tracker.look(r.pid),
                        _ => {}
                    }
                }
                guard.clear_ready();
            }
            conn = listener.accept() => {
                if let Ok((conn, _)) = conn {
                    http::serve(conn, |path| route(path, &tracker)).await;
                }
            }
            _ = prune.tick() => tracker.prune()?,
            s = signals.next() => {
                if s != "SIGHUP" {
                    eprintln!("rocsync daemon: stopping ({s})");
                    break;
                }
                match Config::load(&args) {
                    Ok(c) => {
                        tracker.filters = c.filters.clone();
                        config = c;
                        eprintln!("rocsync daemon: configuration reloaded");
                    }
                    Err(e) => eprintln!("rocsync daemon: warning: keeping the configuration: {e:#}"),
                }
            }
        }
    }
    // Counting stops at once; the probes detach in the background while we exit.
    tracker.probes.set_switch(Switch::default())?;
    let _ = config;
    Ok(0)
}

fn route(path: &str, tracker: &Tracker) -> http::Response {
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
