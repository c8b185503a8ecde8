//! `rocsync attach -p PID[,PID…]`: trace processes that are already running.

use anyhow::Result;
use serde_json::json;

use crate::{
    calls::emit::processes::per_process_name,
    capture::{Capture, launch, running},
    front::cli::AttachArgs,
    os::{procfs, signals::Signals},
};

pub async fn attach(args: AttachArgs, mut signals: Signals) -> Result<i32> {
    let pids = running::targets(&args.pid, !args.out.no_follow)?;
    let list = pids
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    // Several targets write <stem>_<pid> files: those known now are checked now too.
    if let Some(o) = args.out.output.as_deref().filter(|_| pids.len() > 1) {
        for &pid in &pids {
            let sibling = o.with_file_name(per_process_name(o, pid));
            crate::calls::emit::files::refuse_existing(&sibling, args.out.force)?;
        }
    }
    let what = format!("rocsync attach --pid {list}");
    let mut settings: crate::capture::CaptureSettings = args.out.into();
    settings.learn_devices = args.learn_devices;
    settings.waited = args.wait;
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
    let waiting = match mapped {
        0 => Some(running::nothing_mapped(
            &capture.settings,
            &pids,
            args.wait,
            session.excluded(),
        )?),
        _ => None,
    };
    session.arm()?;
    // Recorded from here: what the targets do once this is said is in the trace.
    session.start_recording()?;
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
