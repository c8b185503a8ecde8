//! `/proc/PID/maps` parsing: which files a process has mapped.

use std::path::PathBuf;

/// One file-backed mapping line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    /// The device (major, minor) of the mapped file, when the line gave one.
    pub dev: Option<(u32, u32)>,
    pub inode: u64,
    /// The path as the process sees it (inside its mount namespace).
    pub path: PathBuf,
    /// The file was unlinked or replaced after it was mapped.
    pub deleted: bool,
}

/// Parses the text of a maps file; anonymous and pseudo mappings (`[heap]`, …) are skipped.
pub(crate) fn parse(text: &str) -> Vec<Mapping> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Mapping> {
    // address perms offset dev inode pathname — the pathname may contain spaces.
    let mut rest = line;
    let mut field = || {
        let trimmed = rest.trim_start();
        let end = trimmed.find(' ').unwrap_or(trimmed.len());
        let (f, r) = trimmed.split_at(end);
        rest = r;
        f
    };
    let range = field();
    let _perms = field();
    let offset = u64::from_str_radix(field(), 16).ok()?;
    let dev = field().split_once(':').and_then(|(a, b)| {
        Some((
            u32::from_str_radix(a, 16).ok()?,
            u32::from_str_radix(b, 16).ok()?,
        ))
    });
    let inode: u64 = field().parse().ok()?;
    let path = rest.trim_start();
    if inode == 0 || !path.starts_with('/') {
        return None;
    }
    let (start, end) = range.split_once('-')?;
    let (path, deleted) = match path.strip_suffix(" (deleted)") {
        Some(p) => (p, true),
        None => (path, false),
    };
    Some(Mapping {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        offset,
        dev,
        inode,
        path: PathBuf::from(path),
        deleted,
    })
}

/// Distinct mapped files (by inode) whose file name matches `wanted`.
pub(crate) fn libraries<'a>(
    maps: &'a [Mapping],
    wanted: impl Fn(&str) -> bool + 'a,
) -> impl Iterator<Item = &'a Mapping> + 'a {
    let mut seen = Vec::new();
    maps.iter().filter(move |m| {
        let name = m.path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !wanted(name) || seen.contains(&m.inode) {
            return false;
        }
        seen.push(m.inode);
        true
    })
}

/// Processes other than `except` that map the file (device, inode) — those a file-wide
/// probe on it traps in. Reads every process's maps: done once per file probed.
pub(crate) fn processes_mapping(dev: (u32, u32), inode: u64, except: &[u32]) -> Vec<u32> {
    let needle = format!(" {:02x}:{:02x} {inode} ", dev.0, dev.1);
    crate::os::procfs::pids()
        .into_iter()
        .filter(|pid| !except.contains(pid))
        .filter(|pid| crate::os::procfs::maps(*pid).is_ok_and(|m| m.contains(&needle)))
        .collect()
}

/// `libhsa-runtime64.so`, `libhsa-runtime64.so.1`, `libhsa-runtime64.so.1.5.0`, …
pub(crate) fn is_hsa_runtime(file_name: &str) -> bool {
    crate::calls::backend::is_version_of(file_name, "libhsa-runtime64.so")
}

/// The glibc dynamic loader (`ld-linux-x86-64.so.2`, `ld-2.36.so`, …).
pub(crate) fn is_dynamic_loader(file_name: &str) -> bool {
    file_name.starts_with("ld-linux") || (file_name.starts_with("ld-") && file_name.contains(".so"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0c0a00000-55d0c0a01000 r--p 00000000 fe:01 1835077                    /usr/bin/python3.11
7f3a10000000-7f3a10021000 rw-p 00000000 00:00 0 
7f3a1c800000-7f3a1c81e000 r--p 00000000 fe:01 2101283                    /usr/lib/x86_64-linux-gnu/libamdhip64.so.5.2.21153
7f3a1c81e000-7f3a1cbbc000 r-xp 0001e000 fe:01 2101283                    /usr/lib/x86_64-linux-gnu/libamdhip64.so.5.2.21153
7f3a20000000-7f3a20100000 r-xp 00010000 fe:01 3000001                    /opt/venv/lib/python3.11/site-packages/torch/lib/libamdhip64.so
7f3a30000000-7f3a30100000 r-xp 00010000 fe:01 3000002                    /tmp/my build/libamdhip64.so (deleted)
7f3a40000000-7f3a40001000 r-xp 00000000 fe:01 1000                       /usr/lib/x86_64-linux-gnu/libamdhip64_helper.so
7ffd5d1f0000-7ffd5d211000 rw-p 00000000 00:00 0                          [stack]
7f3a50000000-7f3a50020000 r-xp 00001000 fe:01 4000                       /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
";

    #[test]
    fn parses_file_mappings_and_skips_anonymous_ones() {
        let maps = parse(MAPS);
        assert_eq!(maps.len(), 7);
        assert_eq!(maps[1].start, 0x7f3a1c800000);
        assert_eq!(maps[2].offset, 0x1e000);
        assert_eq!(maps[2].inode, 2101283);
        assert!(!maps[2].deleted);
    }

    #[test]
    fn keeps_spaces_and_marks_deleted_files() {
        let maps = parse(MAPS);
        let deleted = maps.iter().find(|m| m.deleted).unwrap();
        assert_eq!(deleted.path, PathBuf::from("/tmp/my build/libamdhip64.so"));
    }

    #[test]
    fn finds_every_copy_of_the_hip_runtime_once() {
        let maps = parse(MAPS);
        let libs: Vec<_> = libraries(&maps, |n| {
            crate::calls::backend::is_version_of(n, "libamdhip64.so")
        })
        .map(|m| m.inode)
        .collect();
        assert_eq!(libs, vec![2101283, 3000001, 3000002]);
    }

    #[test]
    fn recognises_library_names() {
        let hip = |n| crate::calls::backend::is_version_of(n, "libamdhip64.so");
        assert!(hip("libamdhip64.so"));
        assert!(hip("libamdhip64.so.6.2.41133"));
        assert!(!hip("libamdhip64_helper.so"));
        assert!(!hip("libamdhip64.sox"));
        assert!(is_dynamic_loader("ld-linux-x86-64.so.2"));
        assert!(!is_dynamic_loader("ldap.so"));
    }
}
