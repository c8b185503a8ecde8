//! The trace files of a folder and of its subfolders (a job's uploads, `NODE/[NS/POD/]FILE`),
//! read as a neighbour may have planted them: no symbolic link followed (a link to a
//! root-only trace is not read), nothing but a regular file opened for reading (checked
//! before the open, and the open itself `O_NONBLOCK`, so a FIFO never blocks it), a bounded
//! depth. What is passed over is said, by name and reason; at most one folder per level is
//! open at a time, whatever the files number.

use std::{
    ffi::{OsStr, OsString},
    fs::File,
    os::{fd::OwnedFd, unix::ffi::OsStrExt as _},
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};

/// Folders read below the one named: `NODE/NAMESPACE/POD/` of an upload.
pub const MAX_DEPTH: usize = 3;

/// A name passed over, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Passed {
    /// Its path below the folder named.
    pub path: PathBuf,
    pub why: &'static str,
}

/// What a walk found besides its files.
#[derive(Debug, Default)]
pub struct Walked {
    pub passed: Vec<Passed>,
    /// Files of other names (not a trace's), counted.
    pub others: u64,
}

/// Hands each regular file under `dir` whose name ends in one of `ends` to `each` (its
/// path below `dir`, and the file opened), names sorted in each folder; what it passes
/// over, it says.
pub fn each_file(dir: &Path, ends: &[&str], mut each: impl FnMut(&Path, File)) -> Result<Walked> {
    let flags = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC;
    let fd = rustix::fs::open(dir, flags, Mode::empty())
        .with_context(|| format!("cannot open the folder {}", dir.display()))?;
    let mut walked = Walked::default();
    walk(&fd, Path::new(""), 0, ends, &mut each, &mut walked)
        .with_context(|| format!("reading {}", dir.display()))?;
    Ok(walked)
}

fn walk(
    dir: &OwnedFd,
    below: &Path,
    depth: usize,
    ends: &[&str],
    each: &mut impl FnMut(&Path, File),
    walked: &mut Walked,
) -> Result<()> {
    let mut names: Vec<OsString> = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let name = OsStr::from_bytes(entry?.file_name().to_bytes()).to_os_string();
        if name != "." && name != ".." {
            names.push(name);
        }
    }
    names.sort();
    for name in names {
        let path = below.join(&name);
        let pass = |walked: &mut Walked, why| {
            walked.passed.push(Passed {
                path: path.clone(),
                why,
            })
        };
        let Ok(st) = rustix::fs::statat(dir, &name, AtFlags::SYMLINK_NOFOLLOW) else {
            pass(walked, "gone or unreadable while the folder was read");
            continue;
        };
        let traced = {
            let n = name.to_string_lossy();
            ends.iter().any(|e| n.ends_with(e))
        };
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Symlink => pass(walked, "a symbolic link, not followed"),
            FileType::Directory if depth >= MAX_DEPTH => {
                pass(walked, "a folder deeper than the report reads (3 levels)")
            }
            FileType::Directory => match open(dir, &name, OFlags::DIRECTORY) {
                Ok(sub) => walk(&sub, &path, depth + 1, ends, each, walked)?,
                Err(why) => pass(walked, why),
            },
            FileType::RegularFile if traced => match open(dir, &name, OFlags::empty()) {
                Ok(fd) => each(&path, File::from(fd)),
                Err(why) => pass(walked, why),
            },
            _ if traced => pass(walked, "not a regular file (a FIFO, device or socket)"),
            _ => walked.others += 1,
        }
    }
    Ok(())
}

/// Opens `name` of `dir` as what it was seen to be: never through a link, never blocking,
/// and the same kind once open (a name swapped meanwhile is passed over).
fn open(dir: &OwnedFd, name: &OsStr, kind: OFlags) -> Result<OwnedFd, &'static str> {
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(dir, name, flags | kind, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::LOOP) => return Err("a symbolic link, not followed"),
        Err(rustix::io::Errno::ACCESS | rustix::io::Errno::PERM) => {
            return Err("not readable by this user");
        }
        Err(_) => return Err("could not be opened"),
    };
    let st = rustix::fs::fstat(&fd).map_err(|_| "could not be opened")?;
    let want = match kind.contains(OFlags::DIRECTORY) {
        true => FileType::Directory,
        false => FileType::RegularFile,
    };
    if FileType::from_raw_mode(st.st_mode) != want {
        return Err("not a regular file (a FIFO, device or socket)");
    }
    rustix::fs::fcntl_setfl(&fd, OFlags::empty()).map_err(|_| "could not be opened")?;
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_fifos_and_deep_folders_are_passed_over_and_said() {
        let root = std::env::temp_dir().join(format!("rocsync-walk-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let deep = root.join("node-a/ns/pod/deeper");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(root.join("b.json"), "{}").unwrap();
        std::fs::write(root.join("node-a/ns/pod/a.json.gz"), "x").unwrap();
        std::fs::write(deep.join("c.json"), "{}").unwrap();
        std::fs::write(root.join("notes.txt"), "").unwrap();
        std::os::unix::fs::symlink(root.join("b.json"), root.join("link.json")).unwrap();
        std::os::unix::fs::symlink(root.join("node-a"), root.join("node-b")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            root.join("fifo.json"),
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let mut seen = Vec::new();
        let walked = each_file(&root, &[".json", ".json.gz"], |p, _| {
            seen.push(p.to_path_buf())
        })
        .unwrap();
        assert_eq!(
            seen,
            [
                PathBuf::from("b.json"),
                PathBuf::from("node-a/ns/pod/a.json.gz")
            ]
        );
        let passed: Vec<(String, &str)> = (walked.passed.iter())
            .map(|p| (p.path.display().to_string(), p.why))
            .collect();
        assert_eq!(
            passed,
            [
                (
                    "fifo.json".into(),
                    "not a regular file (a FIFO, device or socket)"
                ),
                ("link.json".into(), "a symbolic link, not followed"),
                (
                    "node-a/ns/pod/deeper".into(),
                    "a folder deeper than the report reads (3 levels)"
                ),
                ("node-b".into(), "a symbolic link, not followed"),
            ]
        );
        assert_eq!(walked.others, 1);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
