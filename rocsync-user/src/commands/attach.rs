//! `rocsync attach --pid PID`: trace a process that is already running.

use std::path::Path;

use anyhow::{Result, bail};
use serde_json::json;

use crate::{
    capture::{Session, Signals, clock, launch, session::async_ring},
    cli::AttachArgs,
    emit::{outputs::Outputs, raw::Header},
    probes::{Probes, ld_so, maps},
};

pub async fn attach(args: AttachArgs, mut signals: Signals) -> Result<i32> {
    let pid = args.pid;
    if pid == 0 || !Path::new(&format!("/proc/{pid}")).exists() {
        bail!("no process with id {pid}");
    }
    crate::preflight::check()?;
    let _claim = crate::capture::claim::claim(pid)?;
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
    if session.scan(pid)? == 0 {
        if !args.wait {
            bail!(
                "process {pid} has no {} mapped; if it loads one later, add --wait to wait for it",
                wanted.join(" or ")
            );
        }
        eprintln!(
            "rocsync: waiting for process {pid} to load {}",
            wanted.join(" or ")
        );
    }
    eprintln!("rocsync: tracing pid {pid}; Ctrl-C to stop");
    let mut ring = async_ring(ring)?;
    session.arm()?;
    let stop = session
        .run(&mut ring, &mut signals, args.duration, exited)
        .await?;
    eprintln!("rocsync: stopping ({})", describe(stop));
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
