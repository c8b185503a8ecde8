//! Processes already running, as `attach` takes them: each checked (alive, not this
//! rocsync nor a shell waiting for it), and said when none maps a runtime yet.

use std::collections::BTreeSet;

use anyhow::{Result, bail};

use crate::{
    capture::CaptureSettings,
    os::{procfs, procfs::Stat},
};

/// The processes `asked` names, checked, each once; with `follow`, without those another
/// of them started (followed as its children already, and claimed once).
pub(crate) fn targets(asked: &[u32], follow: bool) -> Result<Vec<u32>> {
    let mut pids: Vec<u32> = Vec::new();
    for &pid in asked {
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
    if follow {
        let children: Vec<u32> = pids.iter().flat_map(|&p| procfs::descendants(p)).collect();
        pids.retain(|p| !children.contains(p));
    }
    Ok(pids)
}

/// None of `pids` maps a runtime: an error, or (`wait`) what to say while waiting for
/// one to be loaded.
pub(crate) fn nothing_mapped(
    settings: &CaptureSettings,
    pids: &[u32],
    wait: bool,
    excluded: &BTreeSet<&'static str>,
) -> Result<String> {
    let left_out = super::front::excluded_said(excluded, &settings.runtimes);
    let list = (pids.iter().map(u32::to_string))
        .collect::<Vec<_>>()
        .join(",");
    let targets = match pids.len() {
        1 => format!("process {list}"),
        _ => format!("processes {list}"),
    };
    let mut wanted: Vec<&str> = settings.runtimes.iter().map(|r| r.library).collect();
    wanted.push("libhsa-runtime64");
    let wanted = wanted.join(" or ");
    if let (Some(said), false) = (&left_out, wait) {
        bail!(
            "{targets} maps {said}: nothing to trace (drop --backend, or name the runtime it uses)"
        );
    }
    if !wait {
        let (children, has) = match (settings.follow, pids.len()) {
            (true, 1) => (" (nor any of its children)", "has"),
            (true, _) => (" (nor any of their children)", "have"),
            (false, 1) => ("", "has"),
            (false, _) => ("", "have"),
        };
        bail!(
            "{targets}{children} {has} no {wanted} mapped; if it loads one later, add --wait to wait for it"
        );
    }
    let note = left_out.map_or(String::new(), |s| format!(" (it maps {s})"));
    Ok(format!(
        "rocsync: waiting for {targets} to load {wanted}{note}"
    ))
}

/// Looks at an ancestor's wait, 25 ms apart: half a second.
const WAIT_LOOKS: u32 = 20;

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
            // A shell that started this rocsync in the foreground may not be in its wait
            // yet (on a loaded machine the child runs first): looked at for a while.
            let in_wait = || procfs::read(a, "wchan").is_ok_and(|w| w.trim() == "do_wait");
            let waiting = (0..WAIT_LOOKS).any(|i| {
                if i > 0 {
                    std::thread::sleep(std::time::Duration::from_millis(25));
                }
                in_wait()
            });
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
