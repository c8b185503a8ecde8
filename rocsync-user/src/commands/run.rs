//! `rocsync run -- CMD`: launch a command and trace it from its first HIP call.
//!
//! The child is forked but held before `exec` until its dynamic loader is hooked: every
//! link-map change (start-up, each `dlopen`) then stops it until new HIP libraries are
//! probed, so linked and `dlopen`ed runtimes are both traced from their first call.

use std::path::PathBuf;

use anyhow::{Result, anyhow, bail};
use rocsync_common::Backend;
use serde_json::json;

use crate::{
    backend::Runtime,
    capture::{
        Session, Signals, StopReason, clock,
        launch::{self, Child},
        session::async_ring,
    },
    cli::RunArgs,
    emit::{outputs::Outputs, raw::Header},
    probes::{Probes, ld_so, library::OpenedLibrary},
};

pub async fn run(args: RunArgs, mut signals: Signals) -> Result<i32> {
    let program = &args.command[0];
    let exe =
        ld_so::find_in_path(program).ok_or_else(|| anyhow!("command not found: {program}"))?;
    let interp = ld_so::of_executable(&exe)?;
    if let Some(lib) = &args.hip_lib {
        // Fail on a bad --hip-lib before anything starts.
        crate::probes::elf::lookup(lib, &[])?;
    }
    crate::preflight::check()?;
    let what = format!("rocsync run -- {}", args.command.join(" "));
    let _agents = crate::daemon::client::claim_for(&args.out, &what)?;
    let mut outputs = Outputs::reserve(&args.out)?;

    let mut probes = Probes::load(args.out.probe_options())?;
    let ring = probes.take_ring()?;

    let user = args
        .user
        .as_deref()
        .map(launch::Identity::of_user)
        .transpose()?;
    let held = launch::spawn_held(&exe, &args.command, user.as_ref())?;
    outputs.name_after(held.pid);
    let clock_offset_ns = clock::realtime_offset_ns();
    let header = Header {
        clock_offset_ns,
        start_ns: clock::monotonic_ns() as u64,
        command: args.command.clone(),
        from_start: true,
    };
    let sink = match outputs.open(header) {
        Ok(s) => s,
        Err(e) => {
            held.kill();
            return Err(e);
        }
    };
    let mut session = Session::new(probes, &args.out, sink, true);
    if let Err(e) = prepare(&mut session, held.pid, interp, args.hip_lib.clone()) {
        held.kill();
        return Err(e);
    }
    let mut ring = async_ring(ring)?;
    session.arm()?;
    let child = held.release()?;
    let stop = session
        .run(&mut ring, &mut signals, None, exit_of(&child))
        .await?;
    if let StopReason::Signal(s) = stop {
        crate::say!("rocsync: stopping ({s}); waiting for {program} to exit");
        if s == "SIGTERM" {
            // SAFETY: kill(2) on our own child, by its pid.
            unsafe { libc::kill(child.pid as i32, libc::SIGTERM) };
        }
    }
    let captured = session.finish(ring, stop).await?;
    let agents = args.out.agents.as_ref().map(ToString::to_string);
    let params =
        json!({ "mode": "run", "pid": child.pid, "hip_lib": args.hip_lib, "agents": agents });
    let written = super::write_outputs(outputs, captured, params);
    // The command's status, whatever became of the outputs.
    let status = child.wait().await?;
    if let Err(e) = written {
        crate::say!("rocsync: error: {e:#}");
    }
    Ok(status)
}

async fn exit_of(child: &Child) {
    let _ = child.exit_ready().await;
}

fn prepare(
    session: &mut Session,
    pid: u32,
    interp: Option<PathBuf>,
    hip_lib: Option<PathBuf>,
) -> Result<()> {
    if interp.is_none() && hip_lib.is_none() {
        bail!(
            "the command is statically linked, so it cannot load libamdhip64 dynamically; \
             pass --hip-lib if it does"
        );
    }
    let loader = interp.as_deref().map(OpenedLibrary::at).transpose()?;
    session.add_target(pid, loader)?;
    if let Some(lib) = hip_lib {
        let lib = OpenedLibrary::at(&lib)?;
        session.attach_library(Runtime::of(Backend::Hip), &lib, pid, false)?;
    }
    Ok(())
}
