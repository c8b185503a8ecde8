//! POSIX access lists: with one, a file's mode no longer says who may write it (its group
//! bits are the list's mask), so a folder `root:root 0775` may still be writable by a
//! user (`setfacl -m u:nobody:rwx`). Checks of "others may write" ask here too.

use std::path::Path;

/// A user or group other than root that `p`'s access list lets write (`follow`: the
/// link's target's list, else the name's own), as `uid N` or `gid N`; `None` without a
/// list or a writer.
pub(crate) fn writer(p: &Path, follow: bool) -> Option<String> {
    const ACL_USER: u16 = 2;
    const ACL_GROUP: u16 = 8;
    const ACL_MASK: u16 = 0x10;
    const NAME: &str = "system.posix_acl_access";
    let mut list = [0u8; 4096];
    let n = match follow {
        true => rustix::fs::getxattr(p, NAME, &mut list[..]),
        false => rustix::fs::lgetxattr(p, NAME, &mut list[..]),
    }
    .ok()?;
    // A 4-byte version, then (tag, permissions, id) entries.
    let (mut mask_writes, mut writer) = (true, None);
    for e in list.get(4..n)?.chunks_exact(8) {
        let tag = u16::from_le_bytes([e[0], e[1]]);
        let writes = u16::from_le_bytes([e[2], e[3]]) & 2 != 0;
        let id = u32::from_le_bytes([e[4], e[5], e[6], e[7]]);
        match tag {
            ACL_MASK => mask_writes = writes,
            ACL_USER if writes && id != 0 => writer = writer.or(Some(format!("uid {id}"))),
            ACL_GROUP if writes && id != 0 => writer = writer.or(Some(format!("gid {id}"))),
            _ => {}
        }
    }
    writer.filter(|_| mask_writes)
}

/// Sets `dir`'s access list to `setfacl -m u:UID:rwx` on a `0755` folder (mask `rwx`):
/// for tests of the checks above.
#[cfg(test)]
pub(crate) fn let_user_write(dir: &Path, uid: u32) -> rustix::io::Result<()> {
    // (tag, permissions, id): owner, the user, the group, the mask, others.
    let entries = [
        (1u16, 7u16, u32::MAX),
        (2, 7, uid),
        (4, 5, u32::MAX),
        (0x10, 7, u32::MAX),
        (0x20, 5, u32::MAX),
    ];
    let mut list = 2u32.to_le_bytes().to_vec();
    for (tag, perm, id) in entries {
        list.extend(tag.to_le_bytes());
        list.extend(perm.to_le_bytes());
        list.extend(id.to_le_bytes());
    }
    let flags = rustix::fs::XattrFlags::empty();
    rustix::fs::setxattr(dir, "system.posix_acl_access", &list, flags)
}
