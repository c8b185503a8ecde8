//! [`super`]: outputs appear whole, with the umask mode, never through links.

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};

use rustix::fs::CWD;

use super::*;

#[test]
fn files_appear_only_when_complete_with_the_umask_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    let f = PendingFile::create(&path).unwrap();
    assert!(!path.exists());
    let mut w = f.stream().unwrap();
    w.write_all(b"{}").unwrap();
    w.close().unwrap();
    f.persist().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"{}");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o666 & !umask());
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no temporary left"
    );
}

#[test]
fn an_abandoned_output_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    drop(PendingFile::create(&dir.path().join("t.json")).unwrap());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn links_fifos_devices_and_directories_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("victim");
    std::fs::write(&target, b"keep").unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let fifo = dir.path().join("fifo.json");
    rustix::fs::mknodat(CWD, &fifo, FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
    for (p, word) in [
        (link.as_path(), "symbolic link"),
        (fifo.as_path(), "not a regular file"),
        (Path::new("/dev/null"), "not a regular file"),
        (dir.path(), "directory"),
    ] {
        let err = format!("{:#}", PendingFile::create(p).err().expect("refused"));
        assert!(err.contains(word), "{p:?}: {err}");
    }
    assert_eq!(std::fs::read(&target).unwrap(), b"keep");
}

#[test]
fn a_link_swapped_in_before_the_rename_is_replaced_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"keep").unwrap();
    let path = dir.path().join("t.json");
    let f = PendingFile::create(&path).unwrap();
    std::os::unix::fs::symlink(&victim, &path).unwrap();
    // The swap is caught at persist: refused, the victim untouched.
    assert!(f.persist().is_err());
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    assert_eq!(std::fs::metadata(&victim).unwrap().nlink(), 1);
}

#[test]
fn a_new_file_never_replaces_one_there_before_or_after() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    std::fs::write(&path, b"keep").unwrap();
    let err = PendingFile::create_new(&path).err().expect("refused");
    assert!(err.to_string().contains("exists"), "{err}");
    let other = dir.path().join("u.json");
    let f = PendingFile::create_new(&other).unwrap();
    assert!(
        f.sibling("t.json").is_err(),
        "a sibling of a new file is new too"
    );
    // One that appears meanwhile stays.
    std::fs::write(&other, b"first").unwrap();
    let inode = std::fs::metadata(&other).unwrap().ino();
    assert!(f.persist().is_err());
    assert_eq!(std::fs::read(&other).unwrap(), b"first");
    assert_eq!(std::fs::metadata(&other).unwrap().ino(), inode);
}

#[test]
fn a_cut_output_is_kept_up_to_its_last_complete_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.jsonl");
    let f = PendingFile::create(&path).unwrap();
    let mut w = f.stream().unwrap();
    w.write_all(b"{\"a\":1}\n{\"b\":2}\n{\"c\":").unwrap();
    w.close().unwrap();
    f.cut_to_last_line().unwrap();
    f.persist().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"{\"a\":1}\n{\"b\":2}\n");
}
