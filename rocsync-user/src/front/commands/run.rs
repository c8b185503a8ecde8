//! `rocsync run -- CMD`: launch a command and trace it from its first HIP call.
//!
//! The child is forked but held before `exec` until its dynamic loader is hooked: every
//! link-map change (start-up, each `dlopen`) then stops it until new HIP libraries are
//! probed, so linked and `dlopen`ed runtimes are both traced from their first call.

use anyhow::{Result, anyhow};
use serde_json::json;

use crate::{
    calls::probes::attach::ld_so,
    capture::{Capture, StopReason, launch},
    front::cli::RunArgs,
    os::{signals::Signals, users::Identity},
};

pub async fn run(args: RunArgs, mut signals: Signals) -> Result<i32> {
    let program = &args.command[0];
    let exe =
        ld_so::find_in_path(program).ok_or_else(|| anyhow!("command not found: {program}"))?;
    let interp = ld_so::of_executable(&exe)?;
    if let Some(lib) = &args.hip_lib {
        // Fail on a bad --hip-lib before anything starts.
        crate::calls::probes::elf::lookup(lib, &[])?;
    }
    let what = format!("rocsync run -- {}", args.command.join(" "));
    let mut capture = Capture::prepare(args.out.into(), &what, &[])?;
    let user = args.user.as_deref().map(Identity::of_user).transpose()?;
    let held = launch::spawn_held(&exe, &args.command, user.as_ref())?;
    let pid = held.pid;
    // On an error the held child goes first: it holds the watchdog's pipe (forked
    // after it), so dropping the probes before it would wait for ever.
    let mut session = match capture.open(pid, args.command.clone(), true) {
        Ok(s) => s,
        Err(e) => {
            held.kill();
            return Err(e);
        }
    };
    let hooked = session
        .claim(pid)
        .and_then(|()| launch::hook(&mut session, pid, interp, args.hip_lib.as_deref()));
    if let Err(e) = hooked {
        held.kill();
        return Err(e);
    }
    session.arm()?;
    let child = held.release()?;
    let exited = async { drop(child.exit_ready().await) };
    let stop = capture
        .trace(&mut session, &mut signals, args.duration, exited)
        .await?;
    if matches!(stop, StopReason::Duration | StopReason::SizeBound) {
        crate::say!("rocsync: stopping ({stop}); {program} goes on untraced");
    }
    if let StopReason::Signal(s) = stop {
        crate::say!("rocsync: stopping ({s}); waiting for {program} to exit");
        if s == "SIGTERM" {
            // SAFETY: kill(2) on our own child, by its pid.
            unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        }
    }
    let agents = capture.settings.agents.to_json();
    let params = json!({
        "mode": "run", "pid": pid, "hip_lib": args.hip_lib, "agents": agents,
        "duration_s": args.duration.map(|d| d.as_secs_f64()),
    });
    let written = capture.finish(session, stop, params).await;
    // The command's status, whatever became of the outputs.
    let status = child.wait().await?;
    if let Err(e) = written {
        crate::say!("rocsync: error: {e:#}");
    }
    Ok(status)
}
