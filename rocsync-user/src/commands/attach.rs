//! `rocsync attach --pid PID`: trace a process that is already running.

use anyhow::{Result, bail};
use serde_json::json;

use crate::{
    capture::{Capture, launch},
    cli::AttachArgs,
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
    if session.add_running(pid, capture.settings.follow)? == 0 {
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
        "learn_devices_ms": capture.settings.learn_devices.as_millis() as u64,
    });
    capture.finish(session, stop, params).await?;
    Ok(0)
}
