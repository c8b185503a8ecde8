//! Retention's bounds and its log, on real folders.

use super::*;

/// A folder swapped for a link to someone's files is not looked in, and the files
/// kept are known whatever path named them (a state directory reached through a
/// link had every file of the trace just written removed).
#[test]
fn only_the_daemons_folders_are_looked_in_and_kept_files_are_known_by_inode() {
    use std::os::unix::fs::PermissionsExt as _;
    let root = tempfile::tempdir().unwrap();
    let dir = |name: &str| {
        let d = root.path().join(name);
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        d
    };
    let (traces, victim) = (dir("traces"), dir("victim"));
    let dyno = root.path().join("dyno");
    std::os::unix::fs::symlink(&victim, &dyno).unwrap();
    let write = |p: &Path| std::fs::write(p, vec![b'x'; 64 << 10]).unwrap();
    let (old, new, theirs) = (
        traces.join("old.json"),
        traces.join("new.json"),
        victim.join("a.json"),
    );
    for p in [&old, &new, &theirs] {
        write(p);
    }
    // The new trace named through a link to its folder.
    let via = root.path().join("via");
    std::os::unix::fs::symlink(&traces, &via).unwrap();
    let limit = Retention {
        max_bytes: Some(0),
        max_age: None,
    };
    let mut log = Quiet::new("retention removals");
    limit.apply(&[traces.clone(), dyno], &[&via.join("new.json")], &mut log);
    assert!(!old.exists(), "over the limit: removed");
    assert!(new.exists(), "the trace just written stays");
    assert!(theirs.exists(), "a linked folder's file was removed");
}

/// A daemon's own traces folder (mode 0700) in a temporary one.
fn traces_folder() -> (tempfile::TempDir, PathBuf) {
    use std::os::unix::fs::PermissionsExt as _;
    let root = tempfile::tempdir().unwrap();
    let traces = root.path().join("traces");
    std::fs::create_dir(&traces).unwrap();
    std::fs::set_permissions(&traces, std::fs::Permissions::from_mode(0o700)).unwrap();
    (root, traces)
}

/// The case on disk: `nobody`'s flood of traces (one still waiting for its
/// upload) over a bound that root's single, oldest, trace fits the share of. Node-wide
/// "oldest first" removed root's first.
#[test]
fn a_users_flood_never_removes_anothers_trace_and_a_waiting_one_removed_is_lost() {
    let (_root, traces) = traces_folder();
    let now = SystemTime::now();
    let trace = |name: &str, age_s: u64| {
        let path = traces.join(format!("{name}.json"));
        std::fs::write(&path, vec![b'x'; 64 << 10]).unwrap();
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(now - Duration::from_secs(age_s)).unwrap();
        path.display().to_string()
    };
    let mut files = vec![trace("root-hang", 3600)];
    files.extend((1..=6).map(|i| trace(&format!("flood-{i}"), 600 - i * 60)));
    let pids: Vec<Option<u32>> = (0..7).map(Some).collect();
    let owners: Owners = (0..7)
        .map(|p| (p, if p == 0 { 0 } else { 65534 }))
        .collect();
    record_owners(&files, &pids, &owners);
    // The oldest of nobody's waits for its upload; a trace removed by hand left its
    // owner file.
    std::fs::write(format!("{}.upload", files[1]), "p/node/flood-1.json").unwrap();
    std::fs::write(traces.join("by-hand.json.owner"), "0\n").unwrap();
    // Room for two: one each.
    use std::os::unix::fs::MetadataExt as _;
    let unit = std::fs::metadata(&files[0]).unwrap().blocks() * 512;
    let limit = Retention {
        max_bytes: Some(2 * unit),
        max_age: None,
    };
    let newest = Path::new(&files[6]);
    let mut log = Quiet::new("retention removals");
    let lost = limit.apply(std::slice::from_ref(&traces), &[newest], &mut log);
    let left: Vec<bool> = files.iter().map(|f| Path::new(f).exists()).collect();
    let expected = [true, false, false, false, false, false, true];
    assert_eq!(left, expected, "root's and the newest stay");
    assert_eq!(lost, 1, "flood-1 was removed before its upload");
    let mut names: Vec<String> = std::fs::read_dir(&traces)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let expected = [
        "flood-6.json",
        "flood-6.json.owner",
        "root-hang.json",
        "root-hang.json.owner",
    ];
    assert_eq!(
        names, expected,
        "owner and upload files go with their trace"
    );
    let removal = Removal {
        path: "/s/traces/flood-1.json".into(),
        waiting: true,
        why: Why::Share {
            owner: Some(65534),
            bytes: 7,
            share: 1,
            users: 2,
        },
    };
    assert_eq!(whose(&removal), "uid 65534's share, before their upload");
    assert_eq!(
        said(&removal, Some(2)),
        "rocsync daemon: warning: uid 65534 held 7 bytes, over its share (2 between 2 users: \
         1 each): retention removed /s/traces/flood-1.json before its upload"
    );
}

/// A flood of one user's traces, removed for size: its first lines said, the rest
/// counted for one line (one per removal was ~3 000 in the 10-minute soak).
#[test]
fn a_floods_removals_are_said_within_a_burst_and_the_rest_counted() {
    let (_root, traces) = traces_folder();
    let n = crate::daemon::quiet::BURST as usize + 9;
    let files: Vec<String> = (0..=n)
        .map(|i| {
            let path = traces.join(format!("t-{i:03}.json"));
            std::fs::write(&path, vec![b'x'; 4096]).unwrap();
            path.display().to_string()
        })
        .collect();
    let pids: Vec<Option<u32>> = (0..=n as u32).map(Some).collect();
    let owners: Owners = (0..=n as u32)
        .map(|p| (p, if p == 0 { 0 } else { 65534 }))
        .collect();
    record_owners(&files, &pids, &owners);
    let limit = Retention {
        max_bytes: Some(0),
        max_age: None,
    };
    let mut log = Quiet::new("retention removals");
    limit.apply(
        std::slice::from_ref(&traces),
        &[Path::new(&files[n])],
        &mut log,
    );
    let left = files.iter().filter(|f| Path::new(f).exists()).count();
    // Root's over an empty share too, apart: its one trace removed and said.
    assert_eq!(left, 1, "only the newest stays");
    assert_eq!(log.held("uid 0's share"), 0);
    let burst = u64::from(crate::daemon::quiet::BURST);
    assert_eq!(log.held("uid 65534's share"), (n - 1) as u64 - burst);
}

/// Traces removed by age in one pass: each user's lines are bounded apart, so that
/// another user's aged traces never hide root's removal in their count.
#[test]
fn aged_removals_are_said_per_user() {
    let (_root, traces) = traces_folder();
    let n = crate::daemon::quiet::BURST as usize + 9;
    let hours_ago = std::time::SystemTime::now() - Duration::from_secs(2 * 3600);
    let files: Vec<String> = (0..=n)
        .map(|i| {
            let path = traces.join(format!("t-{i:03}.json"));
            std::fs::write(&path, b"{}").unwrap();
            let at = hours_ago + Duration::from_secs(i as u64);
            let file = std::fs::File::options().write(true).open(&path).unwrap();
            file.set_modified(at).unwrap();
            path.display().to_string()
        })
        .collect();
    let pids: Vec<Option<u32>> = (0..=n as u32).map(Some).collect();
    // nobody's, then root's (the newest but one), then the trace just written.
    let owners: Owners = (0..=n as u32)
        .map(|p| (p, if p as usize == n - 1 { 0 } else { 65534 }))
        .collect();
    record_owners(&files, &pids, &owners);
    let limit = Retention {
        max_bytes: None,
        max_age: Some(Duration::from_secs(3600)),
    };
    let mut log = Quiet::new("retention removals");
    limit.apply(
        std::slice::from_ref(&traces),
        &[Path::new(&files[n])],
        &mut log,
    );
    assert!(
        !Path::new(&files[n - 1]).exists(),
        "root's aged trace removed"
    );
    assert_eq!(log.held("uid 0's aged traces"), 0, "root's removal said");
    let burst = u64::from(crate::daemon::quiet::BURST);
    assert_eq!(log.held("uid 65534's aged traces"), (n - 1) as u64 - burst);
    assert_eq!(log.held("the limits"), 0);
}
