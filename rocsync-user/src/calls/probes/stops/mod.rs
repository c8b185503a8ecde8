//! The targets the loader probe stops: continued by rocsync once it has probed what they
//! mapped, and on every exit path; if rocsync is killed, the kernel's exit program
//! (`release`) or, where the kernel lacks it, the watchdog reads the same maps.

pub(super) mod job;
pub(super) mod release;

use anyhow::{Context as _, Result};
use aya::{Ebpf, maps::HashMap};

use job::continue_process;

/// Long enough for a probe that read a target's settings before they changed to finish.
pub const SETTLE: std::time::Duration = std::time::Duration::from_millis(5);

/// Continues `pid` if its latest stop by this capture is not continued yet (or its
/// link-map record says it was stopped and STOPPED has no entry for it: `reported`),
/// then records that stop as continued. The probe writes only STOPPED and this only
/// CONTINUED, so whenever rocsync dies, "stopped but not continued" is exact. A stop
/// already continued (by a suspend, see `Session::suspend`) gets no second SIGCONT:
/// the process may have been stopped since by someone else. See `continue_process`
/// for a stop that job control asked for meanwhile.
pub(super) fn continue_stopped(ebpf: &mut Ebpf, pid: u32, reported: bool) -> Result<()> {
    let stop = {
        let stopped: HashMap<_, u32, u64> =
            HashMap::try_from(ebpf.map("STOPPED").context("STOPPED map missing")?)?;
        stopped.get(&pid, 0).ok()
    };
    let mut continued: HashMap<_, u32, u64> =
        HashMap::try_from(ebpf.map_mut("CONTINUED").context("CONTINUED map missing")?)?;
    let pending = stop.is_some() && continued.get(&pid, 0).ok() != stop;
    if pending || (reported && stop.is_none()) {
        continue_process(pid);
    }
    if let Some(t) = stop {
        continued.insert(pid, t, 0)?;
    }
    Ok(())
}

/// Every process a probe of this capture has stopped, continued or not.
pub(super) fn stopped_pids(ebpf: &Ebpf) -> Vec<u32> {
    match ebpf.map("STOPPED") {
        Some(m) => HashMap::<_, u32, u64>::try_from(m)
            .map(|h| h.keys().filter_map(Result::ok).collect())
            .unwrap_or_default(),
        None => Vec::new(),
    }
}

/// A hash map's descriptor, for the watchdog.
pub(super) fn hash_map_fd<'a>(ebpf: &'a Ebpf, name: &str) -> Result<std::os::fd::BorrowedFd<'a>> {
    use std::os::fd::AsFd as _;
    let map = ebpf
        .map(name)
        .with_context(|| format!("{name} map missing"))?;
    let data = match map {
        aya::maps::Map::HashMap(d) => d,
        _ => anyhow::bail!("{name} is not a hash map"),
    };
    Ok(data.fd().as_fd())
}
