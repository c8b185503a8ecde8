//! Files on a user's FUSE mount are never read by the daemon. Reading one is asking
//! the user's server, which may never answer: the daemon's thread then waits in the
//! kernel, uninterruptibly, and with it the whole node's metrics and traces (measured:
//! 67 s parked until the server was killed). The kernel refuses root's reads of such a
//! mount unless the mount allows others (`allow_other`, which `user_allow_other` in
//! `/etc/fuse.conf` lets users set): that is the case kept out here. A mount of root's
//! (`user_id=0`: squashfuse for containers, say) is read as any file. Only files on an
//! anonymous device (major 0) can be a user's FUSE files: `fuseblk` sits on a block
//! device, which only root may mount.

/// The most of a process's mount table read: a namespace of its own can hold many
/// mounts, and a table cut short is said (see [`user_mount`]).
pub(crate) const MAX_MOUNTINFO: u64 = 1 << 20;

/// `pid`'s mount table (`/proc/PID/mountinfo`), at most [`MAX_MOUNTINFO`] of it; one cut
/// short ends in a line that says so.
pub(crate) fn mount_table(pid: u32) -> String {
    use std::io::Read as _;
    let mut table = String::new();
    let read = std::fs::File::open(crate::os::procfs::path(pid, "mountinfo"))
        .and_then(|f| f.take(MAX_MOUNTINFO + 1).read_to_string(&mut table));
    if read.is_ok() && table.len() as u64 > MAX_MOUNTINFO {
        table.push_str(CUT_SHORT);
    }
    table
}

/// The last line of a mount table read only in part.
const CUT_SHORT: &str = "\n(cut short)";

/// The owner of a FUSE mount that says none, or of a mount no table lists.
pub(crate) const UNKNOWN_OWNER: u32 = u32::MAX;

/// Who owns the mount of anonymous device `dev`, by the target's own table, else the
/// host's (init's: a container's file can sit on a host mount its table lacks, as
/// overlay's layers on btrfs); `None`: not a user's FUSE mount. A device neither lists
/// is not trusted: a mount detached lazily (`fusermount -u -z`) still backs the
/// mappings made from it, and its server may be a user's that never answers.
pub(crate) fn owner(target: &str, host: impl FnOnce() -> String, dev: (u32, u32)) -> Option<u32> {
    match lookup(target, dev) {
        Lookup::Listed(user) => user,
        Lookup::CutShort => Some(UNKNOWN_OWNER),
        Lookup::Absent => match lookup(&host(), dev) {
            Lookup::Listed(user) => user,
            Lookup::CutShort | Lookup::Absent => Some(UNKNOWN_OWNER),
        },
    }
}

/// A device's entry in one mount table.
enum Lookup {
    /// Listed: the uid of a user's FUSE mount, or `None`.
    Listed(Option<u32>),
    /// Not listed, in a table read only in part.
    CutShort,
    Absent,
}

fn lookup(mountinfo: &str, dev: (u32, u32)) -> Lookup {
    match user_mount(mountinfo, dev) {
        Some(found) => Lookup::Listed(found),
        None if mountinfo.ends_with(CUT_SHORT) => Lookup::CutShort,
        None => Lookup::Absent,
    }
}

/// The uid that mounted the FUSE file system on device `dev` (major, minor) in the
/// mount table `mountinfo` (`/proc/PID/mountinfo`), when it is FUSE and not root's;
/// `None` when the table does not list the device.
fn user_mount(mountinfo: &str, dev: (u32, u32)) -> Option<Option<u32>> {
    let want = format!("{}:{}", dev.0, dev.1);
    mountinfo.lines().find_map(|line| {
        // ID PARENT MAJ:MIN ROOT POINT OPTIONS [TAGS…] - FSTYPE SOURCE SUPER_OPTIONS
        let mut fields = line.split(' ');
        if fields.nth(2)? != want {
            return None;
        }
        // The device's mount: FUSE of a user's, or not.
        let (_, after) = line.split_once(" - ")?;
        let mut after = after.split(' ');
        let fstype = after.next()?;
        if fstype != "fuse" && !fstype.starts_with("fuse.") && fstype != "fuseblk" {
            return Some(None);
        }
        let options = after.nth(1).unwrap_or_default();
        // A FUSE mount always says who mounted it; unsaid, it is no one's to trust.
        let uid = options
            .split(',')
            .find_map(|o| o.strip_prefix("user_id="))
            .and_then(|u| u.parse().ok())
            .unwrap_or(UNKNOWN_OWNER);
        Some((uid != 0).then_some(uid))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p1 rw
90 22 0:52 / /home/u/mnt rw,nosuid,nodev,relatime shared:40 - fuse.sshfs u@h:/ rw,user_id=1001,group_id=1001,allow_other
91 22 0:53 / /opt/img rw,relatime shared:41 - fuse.squashfuse img.sif rw,user_id=0,group_id=0,allow_other
92 22 0:54 / /odd rw - fuse odd rw,group_id=0
93 22 0:55 / /tmp rw - tmpfs tmpfs rw";

    #[test]
    fn a_users_fuse_mount_is_named_and_roots_or_others_are_not() {
        let none = String::new;
        assert_eq!(owner(TABLE, none, (0, 52)), Some(1001));
        assert_eq!(owner(TABLE, none, (0, 53)), None, "root's squashfuse");
        assert_eq!(
            owner(TABLE, none, (0, 54)),
            Some(UNKNOWN_OWNER),
            "no user_id: not trusted"
        );
        assert_eq!(owner(TABLE, none, (0, 55)), None, "tmpfs");
        assert_eq!(owner(TABLE, none, (259, 1)), None);
        // Past a table cut short, a device is not trusted; in it, as before.
        let cut = format!("{TABLE}{CUT_SHORT}");
        assert_eq!(owner(&cut, none, (0, 99)), Some(UNKNOWN_OWNER));
        assert_eq!(owner(&cut, none, (0, 53)), None);
    }

    #[test]
    fn a_device_no_table_lists_is_not_trusted_and_the_hosts_table_is_asked() {
        // Detached (listed nowhere): a user's server may hold it.
        let host = || "22 1 259:1 / / rw - ext4 /dev/sda rw".to_string();
        assert_eq!(owner(TABLE, host, (0, 99)), Some(UNKNOWN_OWNER));
        // A host mount the target's table lacks answers for it.
        let host = || format!("{TABLE}\n94 22 0:99 / /var/lib/c rw - btrfs /dev/sdb rw");
        assert_eq!(owner(TABLE, host, (0, 99)), None);
        let host = || format!("{TABLE}\n94 22 0:99 / /m rw - fuse.x x rw,user_id=7");
        assert_eq!(owner(TABLE, host, (0, 99)), Some(7));
        // The host's table is read only when the target's does not answer.
        assert_eq!(owner(TABLE, || unreachable!(), (0, 52)), Some(1001));
    }
}
