//! Which tracked processes a trace records: those it names, each tracked and alive, or
//! every live one (of a cgroup, of a pod); never none.

use anyhow::{Result, bail};

use crate::daemon::{
    tracking::discovery::Tracker, triggers::origin::TraceSpec, untrusted::pods_shown,
};

/// Tracked processes are forgotten some seconds after they end (the prune); a trace
/// asks now. A zombie has ended too: its parent has not reaped it yet.
pub(crate) fn alive(pid: u32) -> bool {
    !crate::os::procfs::exited(pid)
}

/// The live tracked processes a request names: its pids (each must be tracked and
/// alive), else every live tracked one (in its cgroup or its pod, when it names one);
/// never none.
pub(crate) fn matched(tracker: &Tracker, req: &TraceSpec) -> Result<Vec<u32>> {
    let pids: Vec<u32> = if req.pids.is_empty() {
        let cgroup = |p: u32| crate::os::procfs::cgroup(p).unwrap_or_default();
        let live = tracker.tracked.iter().copied().filter(|&p| {
            alive(p)
                && req
                    .cgroup
                    .as_ref()
                    .is_none_or(|c| cgroup(p).contains(c.as_str()))
        });
        match &req.pod {
            Some(pod) => tracker.pods.of_pod(live, pod),
            None => live.collect(),
        }
    } else {
        for &p in &req.pids {
            if !crate::os::procfs::exists(p) {
                bail!("pid {p} does not exist");
            }
            if !tracker.tracked.contains(&p) {
                bail!(
                    "pid {p} is not tracked: it maps no GPU runtime (HIP, CUDA or HSA), or the daemon's filters exclude it"
                );
            }
            if !alive(p) {
                bail!("pid {p} has exited");
            }
        }
        req.pids.clone()
    };
    if pids.is_empty() {
        match (&req.cgroup, &req.pod) {
            (Some(c), _) => bail!("no tracked process is in a cgroup matching {c:?}"),
            (_, Some(pod)) => bail!(
                "no tracked process is in pod {pod}; pods of tracked processes: {}",
                pods_shown(&tracker.pods.known())
            ),
            _ => bail!("no process is tracked"),
        }
    }
    Ok(pids)
}
