//! What `rocsync status` shows of each tracked process: its executable, pod,
//! communicators (as the probes keep them) and what its probes cost.

use crate::daemon::{
    budget::Budget,
    serving::protocol::{Communicator, ProbeCost, Tracked},
    tracking::discovery::Tracker,
};

/// Each process `tracker` tracks, with its probes' share of its CPU from `budget`.
pub(crate) fn tracked(tracker: &Tracker, budget: &Budget) -> Vec<Tracked> {
    let comms = tracker.probes.comms();
    (tracker.tracked.iter())
        .map(|&pid| Tracked {
            exe: (crate::os::procfs::exe(pid).map(|p| p.display().to_string())).unwrap_or_default(),
            pid,
            pod: tracker.pods.pod(pid).cloned(),
            communicators: communicators(&comms, pid),
            probes: budget.share(pid).map(|share| ProbeCost {
                cpu_share: share,
                priced: match tracker.files.single_stepped(pid).pairs {
                    true => "single_stepped",
                    false => "emulated",
                }
                .into(),
                polls_shed_at: budget.shed_at(pid, tracker),
            }),
        })
        .collect()
}

/// `pid`'s communicators, as the probes keep them, for `rocsync status`.
fn communicators(comms: &[(u32, u64, rocsync_common::CommState)], pid: u32) -> Vec<Communicator> {
    let known = |v: u32| (v != u32::MAX).then_some(v);
    comms
        .iter()
        .filter(|c| c.0 == pid)
        .map(|(_, _, c)| Communicator {
            comm: (c.id != 0).then(|| format!("{:#x}", c.id)),
            rank: known(c.rank),
            nranks: known(c.nranks),
            seq: c.seq,
        })
        .collect()
}
