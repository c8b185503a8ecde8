//! The front door of every standalone capture: what `run` and `attach` share, in order —
//! preflight, the claims (the target, the daemon's agents), the outputs reserved, the
//! probes loaded with their watchdog, the session opened over the outputs, the loop, and
//! at the end the outputs written and the summary printed. The commands say only what
//! differs: launching a command, or finding a running process.

use std::future::Future;

use anyhow::{Result, bail};
use aya::maps::{MapData, RingBuf};
use serde_json::Value;
use tokio::io::unix::AsyncFd;

use super::{Captured, Session, StopReason, claim, settings::CaptureSettings, watchdog::Watchdog};
use crate::{
    calls::{
        backend::Runtime,
        emit::{
            outputs::{Outputs, Report},
            raw::Header,
        },
        probes::{Probes, async_ring},
    },
    daemon::remote,
    os::{clock, signals::Signals},
};

pub struct Capture {
    pub settings: CaptureSettings,
    outputs: Outputs,
    /// Until the session takes them.
    probes: Option<Probes>,
    ring: AsyncFd<RingBuf<MapData>>,
    /// Held for the capture's life: the target's lock (`attach`), the agents' claim.
    _targets: Vec<claim::Claim>,
    _agents: Option<remote::Claim>,
}

impl Capture {
    /// Everything before the target: `what` names the capture to a running daemon;
    /// `targets`, the running processes to lock against a second capture.
    pub fn prepare(settings: CaptureSettings, what: &str, targets: &[u32]) -> Result<Self> {
        crate::os::preflight::check()?;
        // Before anything is claimed, loaded or started.
        for named in settings.output.iter().chain(&settings.raw) {
            crate::calls::emit::files::refuse_existing(named, settings.force)?;
        }
        let targets = targets
            .iter()
            .map(|&pid| claim::claim(pid))
            .collect::<Result<Vec<_>>>()?;
        let agents = remote::claim_for(
            &settings.daemon_socket,
            &settings.agents,
            what,
            settings.verbose,
        )?;
        let outputs = Outputs::reserve(settings.output.clone(), settings.raw.clone())?;
        let mut probes = Probes::load(settings.probes)?;
        let ring = probes.take_ring()?;
        // Continues whatever the probes stopped if rocsync is killed, where the kernel
        // does not do it at rocsync's exit (no BTF, no `bpf_send_signal_task`): the
        // watchdog dies with rocsync when its whole cgroup is killed.
        if !probes.releases_at_exit() {
            let watchdog = Watchdog::spawn(
                probes.map_fd("STOPPED")?,
                probes.map_fd("TARGETS")?,
                probes.map_fd("CONTINUED")?,
            )?;
            probes.hold(watchdog);
        }
        Ok(Self {
            settings,
            outputs,
            probes: Some(probes),
            ring: async_ring(ring)?,
            _targets: targets,
            _agents: agents,
        })
    }

    /// Opens the outputs, named after `pid`, and the session over them; `command` is the
    /// target's, for the raw capture's header.
    pub fn open(&mut self, pid: u32, command: Vec<String>, from_start: bool) -> Result<Session> {
        self.outputs.name_after(pid);
        let header = Header {
            clock_offset_ns: clock::realtime_offset_ns(),
            start_ns: clock::monotonic_ns() as u64,
            command,
            from_start,
        };
        let sink = self.outputs.open(header)?;
        // Taken only now: on an error above, the probes (and their watchdog) stay with
        // the capture until the caller has dealt with its target.
        let probes = self.probes.take().expect("one session per capture");
        Ok(Session::new(probes, &self.settings, sink, from_start))
    }

    /// Runs an armed session until a signal, the duration, or `target_exit`.
    pub async fn trace(
        &mut self,
        session: &mut Session,
        signals: &mut Signals,
        duration: Option<std::time::Duration>,
        target_exit: impl Future<Output = ()>,
    ) -> Result<StopReason> {
        session
            .run(&mut self.ring, signals, duration, target_exit)
            .await
    }

    /// Stops the session and writes the outputs and the summary; `parameters` are the
    /// command's, for the trace's `rocsync` object.
    pub async fn finish(self, session: Session, stop: StopReason, parameters: Value) -> Result<()> {
        let captured = session.finish(self.ring, stop).await?;
        // Waited for a runtime that never came, to the target's end or the duration: an
        // error, and no trace of nothing. (A user who stops the wait gets what the trace
        // says, a suspension included, as of any capture.)
        let gave_up = !matches!(stop, StopReason::Signal(_));
        if self.settings.waited && gave_up && captured.libraries.is_empty() {
            captured.detaching.wait();
            let wanted: Vec<&str> = (self.settings.runtimes.iter().map(|r| r.library))
                .chain(["libhsa-runtime64"])
                .collect();
            bail!(
                "the target never loaded {} ({stop}): nothing was traced, and no trace was \
                 written",
                wanted.join(" or ")
            );
        }
        let ring =
            (self.settings.probes.call_ring_bytes).unwrap_or(super::settings::CALL_RING_BYTES);
        let remedy = super::remedy::said(&captured.stats, ring);
        let written = write_outputs(self.outputs, captured, parameters, &self.settings);
        if let Some(remedy) = remedy {
            crate::say!("{remedy}");
        }
        written
    }
}

/// The runtimes the targets mapped that `--backend` left out, if any, as said after
/// "mapped": `libamdhip64 (--backend hip), which --backend cuda left out`.
pub(super) fn excluded_said(
    excluded: &std::collections::BTreeSet<&'static str>,
    chosen: &[&'static Runtime],
) -> Option<String> {
    if excluded.is_empty() {
        return None;
    }
    let libraries: Vec<String> = (excluded.iter())
        .filter_map(|n| Runtime::by_name(n))
        .map(|r| format!("{} (--backend {})", r.library, r.name))
        .collect();
    let chosen: Vec<&str> = chosen.iter().map(|r| r.name).collect();
    Some(format!(
        "{}, which --backend {} left out",
        libraries.join(" and "),
        chosen.join(",")
    ))
}

/// Closes a live capture's outputs and prints its summary, once its probes are detached.
fn write_outputs(
    outputs: Outputs,
    captured: Captured,
    mut parameters: Value,
    settings: &CaptureSettings,
) -> Result<()> {
    let Captured {
        error,
        processes,
        sink,
        stats,
        libraries,
        excluded,
        call_probe_links,
        detaching,
        recorded,
        ..
    } = captured;
    let mut stats = stats;
    parameters["call_probe_links"] = call_probe_links.into();
    // The span its calls were recorded over, named as the daemon's traces name it.
    parameters["recorded_from_unix_us"] = recorded.0.into();
    parameters["recorded_until_unix_us"] = recorded.1.into();
    stats.recorded = recorded.0.zip(recorded.1);
    // Cut short at its size bound: said as the daemon's traces say it.
    let cut = sink.trace().left_out().map(|left_out| {
        let largest = sink.trace().largest_file();
        parameters["truncated"] = serde_json::json!({
            "reason": "size", "max_bytes": settings.max_bytes,
            "bytes_when_ended": largest, "left_out": left_out,
        });
        format!(
            "rocsync: the trace was cut short: a file reached --trace-max-bytes ({} bytes); \
             the {left_out} rows, packets and queues that came after were left out (counted in \
             its parameters.truncated), and the capture ended",
            settings.max_bytes
        )
    });
    let report = Report {
        parameters,
        libraries: libraries
            .iter()
            .map(|l| l.path.display().to_string())
            .collect(),
        single_stepped: libraries
            .iter()
            .flat_map(|l| &l.probed)
            .filter(|(p, _)| !p.emulated)
            .map(|(p, names)| format!("{} ({})", names.join(" = "), p.probed))
            .collect(),
        processes,
    };
    let written = match error {
        None => outputs.finish(sink, &stats, report).map(drop),
        Some(e) => outputs.salvage(sink, &stats, e),
    };
    detaching.wait();
    if let Some(cut) = cut {
        crate::say!("{cut}");
    }
    // A capture of nothing says so, as `perf record` reports "0 samples", and exits 0
    // as perf and strace do: tracing worked, the target just made no call to record
    // (exit statuses stay for failures, and `run`'s is its command's).
    if libraries.is_empty() {
        match excluded_said(&excluded, &settings.runtimes) {
            Some(said) => crate::say!(
                "rocsync: warning: the target mapped {said}: nothing was traced (drop --backend, \
                 or name the runtime it uses)"
            ),
            None => crate::say!(
                "rocsync: warning: the target never mapped a GPU runtime library that rocsync traces"
            ),
        }
    } else if stats.calls() == 0 && stats.packets.is_empty() {
        crate::say!(
            "rocsync: warning: nothing was captured: no probed GPU call was made while traced \
             (the trace holds no call)"
        );
    }
    written
}
