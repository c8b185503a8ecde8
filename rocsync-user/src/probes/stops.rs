//! The targets the loader probe stops: continued by rocsync once it has probed what they
//! mapped, and on every exit path; the watchdog reads the same map if rocsync is killed.

use anyhow::{Context as _, Result};
use aya::maps::HashMap;
use rocsync_common::Switch;

use super::Probes;

/// Long enough for a probe that read a target's settings before they changed to finish.
pub const SETTLE: std::time::Duration = std::time::Duration::from_millis(5);

/// Continues `pid`, which a probe of rocsync stopped. A SIGCONT discards the stops
/// pending for a process: a Ctrl-Z (SIGTSTP, or SIGTTIN/SIGTTOU) that reached it while it
/// was held is sent again after it, so its job is suspended as its user asked (or, in an
/// orphaned group, the kernel ignores it, as it would have).
pub fn continue_process(pid: u32) {
    let job_stops = pending_job_stops(pid);
    // SAFETY: kill(2) on a process rocsync's probe stopped, then the signals it was sent.
    unsafe {
        libc::kill(pid as i32, libc::SIGCONT);
        for sig in job_stops {
            libc::kill(pid as i32, sig);
        }
    }
}

/// The job-control stops pending for the whole process (`ShdPnd` in /proc/PID/status).
fn pending_job_stops(pid: u32) -> Vec<i32> {
    let mask = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            let hex = s.lines().find_map(|l| l.strip_prefix("ShdPnd:"))?;
            u64::from_str_radix(hex.trim(), 16).ok()
        })
        .unwrap_or(0);
    [libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU]
        .into_iter()
        .filter(|s| mask & (1 << (s - 1)) != 0)
        .collect()
}

impl Probes {
    /// Continues `pid` if its latest stop by this capture is not continued yet (or its
    /// link-map record says it was stopped and STOPPED has no entry for it: `reported`),
    /// then records that stop as continued. The probe writes only STOPPED and this only
    /// CONTINUED, so whenever rocsync dies, "stopped but not continued" is exact. A stop
    /// already continued (by a suspend, see `Session::suspend`) gets no second SIGCONT:
    /// the process may have been stopped since by someone else.
    pub fn continue_stopped(&mut self, pid: u32, reported: bool) -> Result<()> {
        let stop = {
            let stopped: HashMap<_, u32, u64> =
                HashMap::try_from(self.ebpf.map("STOPPED").context("STOPPED map missing")?)?;
            stopped.get(&pid, 0).ok()
        };
        let mut continued: HashMap<_, u32, u64> = HashMap::try_from(
            self.ebpf
                .map_mut("CONTINUED")
                .context("CONTINUED map missing")?,
        )?;
        let pending = stop.is_some() && continued.get(&pid, 0).ok() != stop;
        if pending || (reported && stop.is_none()) {
            continue_process(pid);
        }
        if let Some(t) = stop {
            continued.insert(pid, t, 0)?;
        }
        Ok(())
    }

    /// Stops every capture in the kernel and continues every process a probe stopped
    /// and nothing continued yet. Runs on every exit path (see `Drop`).
    pub fn release_targets(&mut self) {
        let _ = self.set_switch(Switch::default());
        self.clear_targets();
        // A probe that read the old settings may still be stopping a target: let it.
        std::thread::sleep(SETTLE);
        for pid in self.stopped_pids() {
            let _ = self.continue_stopped(pid, false);
        }
    }

    /// Every process a probe of this capture has stopped, continued or not.
    pub fn stopped_pids(&self) -> Vec<u32> {
        match self.ebpf.map("STOPPED") {
            Some(m) => HashMap::<_, u32, u64>::try_from(m)
                .map(|h| h.keys().filter_map(Result::ok).collect())
                .unwrap_or_default(),
            None => Vec::new(),
        }
    }

    /// A hash map's descriptor, for the watchdog.
    pub fn map_fd(&self, name: &str) -> Result<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd as _;
        let map = self
            .ebpf
            .map(name)
            .with_context(|| format!("{name} map missing"))?;
        let data = match map {
            aya::maps::Map::HashMap(d) => d,
            _ => anyhow::bail!("{name} is not a hash map"),
        };
        Ok(data.fd().as_fd())
    }
}

impl Drop for Probes {
    /// Whatever ends the capture — an error, a panic, the normal end — no target stays
    /// stopped by it.
    fn drop(&mut self) {
        self.release_targets();
    }
}
