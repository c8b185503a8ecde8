//! `rocsync attach -p PID[,PID…]`: trace processes that are already running.

use anyhow::{Result, bail};
use serde_json::json;

use crate::{
    capture::{Capture, launch},
    cli::AttachArgs,
    emit::processes::per_process_name,
    procfs::{self, Stat},
    signals::Signals,
};

pub async fn attach(args: AttachArgs, mut signals: Signals) -> Result<i32> {
    let mut pids: Vec<u32> = Vec::new();
    for &pid in &args.pid {
        if pid == 0 || !procfs::exists(pid) {
            bail!("no process with id {pid}");
        }
        // A zombie: nothing left to trace, though its /proc entry stays until it is reaped.
        if procfs::exited(pid) {
            bail!("process {pid} has exited (its parent has not reaped it yet)");
        }
        not_this_rocsync(pid)?;
        if !pids.contains(&pid) {
            pids.push(pid);
        }
    }
    if !args.out.no_follow {
        // A listed process that another listed one started is followed as its child
        // already (and claimed once).
        let children: Vec<u32> = pids.iter().flat_map(|&p| procfs::descendants(p)).collect();
        pids.retain(|p| !children.contains(p));
    }
    let list = pids
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    // Several targets write <stem>_<pid> files: those known now are checked now too.
    if let Some(o) = args.out.output.as_deref().filter(|_| pids.len() > 1) {
        for &pid in &pids {
            let sibling = o.with_file_name(per_process_name(o, pid));
            crate::emit::files::refuse_existing(&sibling, args.out.force)?;
        }
    }
    let what = format!("rocsync attach --pid {list}");
    let mut settings: crate::capture::CaptureSettings = args.out.into();
    settings.learn_devices = args.learn_devices;
    let mut capture = Capture::prepare(settings, &what, &pids)?;
    let exits = pids
        .iter()
        .map(|&p| launch::pidfd(p))
        .collect::<Result<Vec<_>>>()?;
    // Every target has exited.
    let exited = async {
        for exit in &exits {
            drop(exit.readable().await);
        }
    };
    let mut session = capture.open(pids[0], procfs::cmdline(pids[0]), false)?;
    let mut mapped = 0;
    for &pid in &pids {
        mapped += session.add_running(pid, capture.settings.follow)?;
    }
    let targets = match pids.len() {
        1 => format!("process {list}"),
        _ => format!("processes {list}"),
    };
    let mut waiting = None;
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
            let (children, has) = match (capture.settings.follow, pids.len()) {
                (true, 1) => (" (nor any of its children)", "has"),
                (true, _) => (" (nor any of their children)", "have"),
                (false, 1) => ("", "has"),
                (false, _) => ("", "have"),
            };
            bail!(
                "{targets}{children} {has} no {wanted} mapped; if it loads one later, add --wait to wait for it"
            );
        }
        waiting = Some(format!("rocsync: waiting for {targets} to load {wanted}"));
    }
    session.arm()?;
    // Said once armed: what the targets do from here on (a runtime loaded included) is
    // held for the probes.
    if let Some(waiting) = waiting {
        crate::say!("{waiting}");
    }
    crate::say!("rocsync: tracing pid {list}; Ctrl-C to stop");
    let stop = capture
        .trace(&mut session, &mut signals, args.duration, exited)
        .await?;
    crate::say!("rocsync: stopping ({stop})");
    let params = json!({
        "mode": "attach",
        "pid": pids[0],
        "pids": pids,
        "duration_s": args.duration.map(|d| d.as_secs_f64()),
        "wait": args.wait,
        "agents": capture.settings.agents.to_json(),
        "learn_devices_ms": capture.settings.learn_devices.as_millis() as u64,
    });
    capture.finish(session, stop, params).await?;
    Ok(0)
}

/// Refuses rocsync itself (as strace refuses its own pid) and an ancestor blocked waiting
/// for its child to end (the shell that typed `rocsync attach -p $$`, or `sudo`'s): that
/// process makes no GPU call before rocsync ends, so the trace would be empty, and with
/// `--wait` rocsync would wait for ever. An ancestor that goes on running (a script that
/// started rocsync in the background to trace itself) is traced as any process.
fn not_this_rocsync(pid: u32) -> Result<()> {
    if pid == std::process::id() {
        bail!(
            "process {pid} is this rocsync: it cannot trace itself (give the pid of the process \
             to trace, or start the command with `rocsync run CMD`)"
        );
    }
    let mut ancestor = Stat::of_self().map(|s| s.ppid);
    while let Some(a) = ancestor.filter(|&a| a > 1) {
        if a == pid {
            let waiting = procfs::read(a, "wchan").is_ok_and(|w| w.trim() == "do_wait");
            if waiting {
                let name = procfs::read(a, "comm").unwrap_or_default();
                bail!(
                    "process {pid} ({}) started this rocsync and is waiting for it to end: it can \
                     make no GPU call while traced (an empty trace; with --wait, no end). Attach \
                     from another terminal, or start the command with `rocsync run CMD`",
                    name.trim()
                );
            }
            return Ok(());
        }
        ancestor = Stat::of(a).map(|s| s.ppid);
    }
    Ok(())
}
