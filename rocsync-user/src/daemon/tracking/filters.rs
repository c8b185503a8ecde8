//! Which processes are tracked: by executable, cgroup and user (`--include-exe`, …).

use crate::daemon::tracking::snapshot::Snapshot;

/// Which processes are tracked: an empty include list includes every process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Filters {
    /// Executables, by file name or full path.
    pub include_exe: Vec<String>,
    pub exclude_exe: Vec<String>,
    /// Cgroup paths (a pod's, a container's): a process whose cgroup path contains one.
    pub include_cgroup: Vec<String>,
    pub exclude_cgroup: Vec<String>,
    /// Users, by name or uid.
    pub users: Vec<String>,
    /// Most library files probed for one user's processes.
    pub max_files_per_user: usize,
}

/// The filters in effect, their users resolved to uids when set: a lookup per process
/// found would run the host's `getent` each time (the static build).
#[derive(Default)]
pub(crate) struct Admitting {
    filters: Filters,
    user_ids: Vec<u32>,
}

impl Admitting {
    pub(crate) fn new(filters: Filters) -> Self {
        Self {
            user_ids: user_ids(&filters.users),
            filters,
        }
    }

    pub(crate) fn filters(&self) -> &Filters {
        &self.filters
    }

    /// Whether the filters admit the process `p`.
    pub(crate) fn admits(&self, p: &Snapshot) -> bool {
        let f = &self.filters;
        let exe = p.exe();
        let name = exe.rsplit('/').next().unwrap_or_default();
        let matches_exe = |list: &[String]| list.iter().any(|e| e == exe || e == name);
        let cgroup = p.cgroup().unwrap_or_default();
        let in_cgroup = |list: &[String]| list.iter().any(|c| cgroup.contains(c.as_str()));
        let uid = p.uid();
        (f.include_exe.is_empty() || matches_exe(&f.include_exe))
            && !matches_exe(&f.exclude_exe)
            && (f.include_cgroup.is_empty() || in_cgroup(&f.include_cgroup))
            && !in_cgroup(&f.exclude_cgroup)
            && (f.users.is_empty() || uid.is_some_and(|u| self.user_ids.contains(&u)))
    }
}

/// The uids user entries name (a uid, or a user's name); a name that no longer resolves
/// (checked at load) is said and matches nothing.
fn user_ids(users: &[String]) -> Vec<u32> {
    users
        .iter()
        .filter_map(|u| match crate::os::users::user_id(u) {
            Ok(id) => Some(id),
            Err(e) => {
                crate::say!("rocsync daemon: warning: users: {e:#}");
                None
            }
        })
        .collect()
}
