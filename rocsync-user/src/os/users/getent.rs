//! User and group lookups of the static binary: the host's `getent` (its C library, its
//! nsswitch.conf: files, LDAP, sssd alike), or `/etc/passwd` and `/etc/group` where the
//! host has no `getent` (a minimal container).

use std::{path::Path, process::Command};

use anyhow::{Context as _, Result, bail};

/// Where a host keeps `getent`; never looked up on PATH (root runs it).
const GETENT: [&str; 2] = ["/usr/bin/getent", "/bin/getent"];
/// More is not a passwd or group entry.
const MOST: usize = 1 << 20;

/// A user's uid, primary gid and every group it is in.
pub(super) fn user(name: &str) -> Result<Option<(u32, u32, Vec<u32>)>> {
    check(name)?;
    let Some(entry) = lookup("passwd", name)? else {
        return Ok(None);
    };
    let f: Vec<&str> = entry.split(':').collect();
    let (Some(uid), Some(gid)) = (id(f.get(2).copied()), id(f.get(3).copied())) else {
        bail!("the passwd entry of {name:?} is malformed: {entry:?}");
    };
    let mut groups = match getent() {
        Some(bin) => initgroups(bin, name)?,
        None => member_of(&read("/etc/group")?, name),
    };
    if !groups.contains(&gid) {
        groups.insert(0, gid);
    }
    Ok(Some((uid, gid, groups)))
}

/// A group's gid.
pub(super) fn group(name: &str) -> Result<Option<u32>> {
    check(name)?;
    let Some(entry) = lookup("group", name)? else {
        return Ok(None);
    };
    let gid = id(entry.split(':').nth(2));
    gid.map(Some)
        .with_context(|| format!("the group entry of {name:?} is malformed: {entry:?}"))
}

/// Names go to a subprocess's argument list: nothing that could read as an option.
fn check(name: &str) -> Result<()> {
    if name.is_empty() || name.starts_with('-') || name.contains([':', '\n', '\0']) {
        bail!("{name:?} is not a user or group name");
    }
    Ok(())
}

fn id(field: Option<&str>) -> Option<u32> {
    field?.parse().ok()
}

fn getent() -> Option<&'static str> {
    GETENT.into_iter().find(|p| Path::new(p).is_file())
}

/// `name`'s entry in `database` (passwd or group).
fn lookup(database: &str, name: &str) -> Result<Option<String>> {
    let text = match getent() {
        Some(bin) => match run(bin, database, name)? {
            Some(t) => t,
            None => return Ok(None),
        },
        None => read(&format!("/etc/{database}"))?,
    };
    Ok(text
        .lines()
        .find(|l| l.split(':').next() == Some(name))
        .map(str::to_string))
}

/// `getent DATABASE NAME`'s output; `None` when it knows no such key (status 2).
fn run(bin: &str, database: &str, name: &str) -> Result<Option<String>> {
    let out = Command::new(bin)
        .args([database, "--", name])
        .env_clear()
        .output()
        .with_context(|| format!("running {bin}"))?;
    match out.status.code() {
        Some(0) if out.stdout.len() <= MOST => {
            Ok(Some(String::from_utf8_lossy(&out.stdout).into()))
        }
        Some(2) => Ok(None),
        _ => bail!(
            "{bin} {database} {name}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
    }
}

/// Every group `name` is in, as the host's NSS says (`getent initgroups`).
fn initgroups(bin: &str, name: &str) -> Result<Vec<u32>> {
    let text = run(bin, "initgroups", name)?.unwrap_or_default();
    Ok(text
        .split_whitespace()
        .skip(1)
        .filter_map(|g| g.parse().ok())
        .collect())
}

fn read(path: &str) -> Result<String> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    if text.len() > MOST {
        bail!("{path} is over {MOST} bytes");
    }
    Ok(text)
}

/// The gids of the groups in `/etc/group` text listing `name` as a member.
fn member_of(groups: &str, name: &str) -> Vec<u32> {
    groups
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            let members = f.get(3)?;
            members
                .split(',')
                .any(|m| m == name)
                .then(|| id(f.get(2).copied()))
                .flatten()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_users_groups_from_a_group_file() {
        let groups = "root:x:0:\nvideo:x:44:ann,bob\nrender:x:105:bob\nann:x:1000:\n";
        assert_eq!(member_of(groups, "bob"), [44, 105]);
        assert_eq!(member_of(groups, "ann"), [44]);
        assert!(member_of(groups, "carl").is_empty());
    }

    #[test]
    fn the_hosts_own_users_and_an_option_refused() {
        let (uid, gid, groups) = user("root").unwrap().unwrap();
        assert_eq!((uid, gid), (0, 0));
        assert!(groups.contains(&0));
        assert_eq!(group("root").unwrap(), Some(0));
        assert_eq!(user("no-such-user-rocsync").unwrap(), None);
        assert!(user("--help").is_err());
    }
}
