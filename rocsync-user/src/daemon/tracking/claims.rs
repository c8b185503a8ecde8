//! Who held each communicator id on this node, kept after their processes end. A
//! trace's upload key names a job (`job-<id>/`) only when no process of another user or
//! cgroup claims the id: one joining a job's unique id once the job's own ranks here
//! had ended found no one alive to contradict it, and its trace went under the job's
//! key (issue 60, item 6). Bounded per user, so one user's flood of ids pushes out only
//! its own.

use std::collections::{BTreeSet, HashMap, VecDeque};

use rocsync_common::CommState;

use crate::daemon::triggers::collectives::{self, Owner};

/// Ids remembered of one user's ended processes: as many as the probes keep of one
/// user's live communicators and streams.
const PER_USER: usize = 1024;

#[derive(Default)]
pub(crate) struct Claims {
    /// Each tracked process's owner, read once when it was tracked.
    live: HashMap<u32, Owner>,
    /// Each id's owners, as seen.
    past: HashMap<u64, BTreeSet<Owner>>,
    /// Each user's remembered (id, owner), oldest first.
    by_user: HashMap<u32, VecDeque<(u64, Owner)>>,
}

impl Claims {
    /// `pid` is tracked from now.
    pub(crate) fn tracked(&mut self, pid: u32) {
        if let Some(owner) = collectives::owner(pid) {
            self.live.insert(pid, owner);
        }
    }

    /// The ids each tracked process holds in `comms` now are remembered as its owner's
    /// (a job's ranks destroy their communicators before they exit: what is read at
    /// their exit is nothing); `gone` have ended.
    pub(crate) fn seen(&mut self, comms: &[(u32, u64, CommState)], gone: &[u32]) {
        for (pid, _, c) in comms.iter().filter(|(_, _, c)| c.id != 0) {
            if let Some(owner) = self.live.get(pid).cloned() {
                self.remember(c.id, owner);
            }
        }
        for pid in gone {
            self.live.remove(pid);
        }
    }

    fn remember(&mut self, id: u64, owner: Owner) {
        if !self.past.entry(id).or_default().insert(owner.clone()) {
            return;
        }
        let theirs = self.by_user.entry(owner.uid).or_default();
        theirs.push_back((id, owner));
        if theirs.len() > PER_USER
            && let Some((old, owner)) = theirs.pop_front()
            && let Some(owners) = self.past.get_mut(&old)
        {
            owners.remove(&owner);
            if owners.is_empty() {
                self.past.remove(&old);
            }
        }
    }

    /// The owners of processes that held `id`, ended or not.
    pub(crate) fn past_owners(&self, id: u64) -> impl Iterator<Item = &Owner> {
        self.past.get(&id).into_iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(uid: u32) -> Owner {
        Owner {
            uid,
            cgroup: "/job".into(),
        }
    }

    #[test]
    fn one_users_flood_of_ids_pushes_out_only_its_own() {
        let mut c = Claims::default();
        c.remember(7, owner(0));
        for id in 100..100 + 3 * PER_USER as u64 {
            c.remember(id, owner(65534));
        }
        assert_eq!(c.past_owners(7).collect::<Vec<_>>(), [&owner(0)]);
        assert_eq!(c.past_owners(100).count(), 0);
        assert_eq!(c.past.len(), 1 + PER_USER);
    }
}
