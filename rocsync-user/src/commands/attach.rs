//! `rocsync attach --pid PID`: trace a process that is already running.

use anyhow::{Result, bail};
use serde_json::json;

use crate::{
    capture::{Capture, launch},
    cli::AttachArgs,
    probes::{ld_so, maps},
    procfs,
    signals::Signals,
};

pub async fn attach(args: AttachArgs, mut signals: Signals) -> Result<i32> {
    let pid = args.pid;
    if pid == 0 || !procfs::exists(pid) {
        bail!("no process with id {pid}");
    }
    // A zombie: nothing left to trace, though its /proc entry stays until it is reaped.
    if procfs::exited(pid) {
        bail!("process {pid} has exited (its parent has not reaped it yet)");
    }
    let what = format!("rocsync attach --pid {pid}");
    let mut capture = Capture::prepare(args.out.into(), &what, Some(pid))?;
    let exit = launch::pidfd(pid)?;
    let exited = async { drop(exit.readable().await) };
    let mut session = capture.open(pid, procfs::cmdline(pid), false)?;
    let text =
        procfs::maps(pid).map_err(|e| anyhow::anyhow!("cannot read /proc/{pid}/maps: {e}"))?;
    // Hook the loader before the scan, so a library loaded in between is not missed.
    session.add_target(pid, ld_so::of_process(pid, &maps::parse(&text)))?;
    let mut tree = vec![pid];
    // The processes it started already (a launcher's ranks); later ones the kernel adds.
    if capture.settings.follow {
        for child in procfs::descendants(pid) {
            let Ok(text) = procfs::maps(child) else {
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
        let mut wanted: Vec<&str> = capture
            .settings
            .runtimes
            .iter()
            .map(|r| r.library)
            .collect();
        wanted.push("libhsa-runtime64");
        let wanted = wanted.join(" or ");
        if !args.wait {
            let children = if capture.settings.follow {
                " (nor any of its children)"
            } else {
                ""
            };
            bail!(
                "process {pid}{children} has no {wanted} mapped; if it loads one later, add --wait to wait for it"
            );
        }
        crate::say!("rocsync: waiting for process {pid} to load {wanted}");
    }
    session.arm()?;
    // Said once armed: what the target does from here on is held for the probes.
    crate::say!("rocsync: tracing pid {pid}; Ctrl-C to stop");
    let stop = capture
        .trace(&mut session, &mut signals, args.duration, exited)
        .await?;
    crate::say!("rocsync: stopping ({stop})");
    let params = json!({
        "mode": "attach",
        "pid": pid,
        "duration_s": args.duration.map(|d| d.as_secs_f64()),
        "wait": args.wait,
        "agents": capture.settings.agents.to_json(),
    });
    capture.finish(session, stop, params).await?;
    Ok(0)
}
