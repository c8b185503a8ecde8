//! The targets the loader probe stops: continued by rocsync once it has probed what they
//! mapped, and on every exit path; if rocsync is killed, the kernel's exit program
//! (`release`) or, where the kernel lacks it, the watchdog reads the same maps.

pub(super) mod job;
pub(super) mod release;

use anyhow::{Context as _, Result};
use aya::maps::HashMap;
use rocsync_common::Switch;

use super::{Probes, continue_process};

/// Long enough for a probe that read a target's settings before they changed to finish.
pub const SETTLE: std::time::Duration = std::time::Duration::from_millis(5);

impl Probes {
    /// Continues `pid` if its latest stop by this capture is not continued yet (or its
    /// link-map record says it was stopped and STOPPED has no entry for it: `reported`),
    /// then records that stop as continued. The probe writes only STOPPED and this only
    /// CONTINUED, so whenever rocsync dies, "stopped but not continued" is exact. A stop
    /// already continued (by a suspend, see `Session::suspend`) gets no second SIGCONT:
    /// the process may have been stopped since by someone else. See `continue_process`
    /// for a stop that job control asked for meanwhile.
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
