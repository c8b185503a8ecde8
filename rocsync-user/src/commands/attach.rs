//! `rocsync attach --pid PID`: trace a process that is already running.

use std::path::Path;

use anyhow::{Result, bail};
use serde_json::json;

use crate::{
    capture::{Session, Signals, clock, launch, session::async_ring},
    cli::AttachArgs,
    daemon::client,
    emit::{outputs::Outputs, raw::Header},
    probes::{Probes, ld_so, maps},
    procfs::{self, Stat},
};

pub async fn attach(args: AttachArgs, mut signals: Signals) -> Result<i32> {
    let pid = args.pid;
    if pid == 0 || !Path::new(&format!("/proc/{pid}")).exists() {
        bail!("no process with id {pid}");
    }
    // A zombie: nothing left to trace, though its /proc entry stays until it is reaped.
    if procfs::exited(pid) {
        bail!("process {pid} has exited (its parent has not reaped it yet)");
    }
    crate::preflight::check()?;
    let _claim = crate::capture::claim::claim(pid)?;
    let _agents = client::claim_for(&args.out, &format!("rocsync attach --pid {pid}"))?;
    let mut outputs = Outputs::reserve(&args.out)?;

    outputs.name_after(pid);
    let exited = process_exit(pid)?;
    let mut probes = Probes::load(args.out.probe_options())?;
    let ring = probes.take_ring()?;
    let mut wanted: Vec<&str> = args.out.runtimes().iter().map(|r| r.library).collect();
    wanted.push("libhsa-runtime64");
    let clock_offset_ns = clock::realtime_offset_ns();
    let header = Header {
        clock_offset_ns,
        start_ns: clock::monotonic_ns() as u64,
        command: cmdline(pid),
        from_start: false,
    };
    let sink = outputs.open(header)?;
    let mut session = Session::new(probes, &args.out, sink, false);
    let text = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map_err(|e| anyhow::anyhow!("cannot read /proc/{pid}/maps: {e}"))?;
    let mappings = maps::parse(&text);
    // Hook the loader before the scan, so a library loaded in between is not missed.
    session.add_target(pid, ld_so::of_process(pid, &mappings))?;
    let mut tree = vec![pid];
    // The processes it started already (a launcher's ranks); later ones the kernel adds.
    if !args.out.no_follow {
        for child in descendants(pid) {
            let Ok(text) = std::fs::read_to_string(format!("/proc/{child}/maps")) else {
                continue; // gone already
            };
            session.add_target(child, ld_so::of_process(child, &maps::parse(&text)))?;
            tree.push(child);
        }
    }
    let mut mapped = 0;
    for p in tree {
        mapped += session.scan(p)?;
    }
    if mapped == 0 {
        if !args.wait {
            bail!(
                "process {pid}{} has no {} mapped; if it loads one later, add --wait to wait for it",
                if args.out.no_follow {
                    ""
                } else {
                    " (nor any of its children)"
                },
                wanted.join(" or ")
            );
        }
        crate::say!(
            "rocsync: waiting for process {pid} to load {}",
            wanted.join(" or ")
        );
    }
    let mut ring = async_ring(ring)?;
    session.arm()?;
    // Said once armed: what the target does from here on is held for the probes.
    crate::say!("rocsync: tracing pid {pid}; Ctrl-C to stop");
    let stop = session
        .run(&mut ring, &mut signals, args.duration, exited)
        .await?;
    crate::say!("rocsync: stopping ({})", describe(stop));
    let captured = session.finish(ring, stop).await?;
    let params = json!({
        "mode": "attach",
        "pid": pid,
        "duration_s": args.duration.map(|d| d.as_secs_f64()),
        "wait": args.wait,
        "agents": args.out.agents.as_ref().map(ToString::to_string),
    });
    super::write_outputs(outputs, captured, params)?;
    Ok(0)
}

fn describe(stop: crate::capture::StopReason) -> String {
    use crate::capture::StopReason::*;
    match stop {
        Signal(s) => s.to_string(),
        Duration => "duration reached".into(),
        TargetExited => "target exited".into(),
        OutputFailed => "writing the outputs failed".into(),
    }
}

/// Every live descendant process of `pid`, parents before children (from each process's
/// parent in /proc/*/stat).
fn descendants(pid: u32) -> Vec<u32> {
    let parent_of: Vec<(u32, u32)> = procfs::pids()
        .into_iter()
        .filter_map(|p| Some((p, Stat::of(p)?.ppid)))
        .collect();
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(parent_of.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    found.remove(0);
    found
}

fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Resolves when `pid` exits (a pidfd becomes readable), without being its parent.
fn process_exit(pid: u32) -> Result<impl std::future::Future<Output = ()>> {
    let fd = launch::pidfd(pid)?;
    Ok(async move {
        let _ = fd.readable().await;
    })
}
