//! Files an unprivileged user maps cannot starve the daemon: a 1 GiB sparse file named
//! like the runtime is read only as far as its headers, and once; copies of a real
//! runtime lose their probes (links, descriptors) when their processes end, and each
//! user has a cap of files probed that never touches another user's. The neighbour runs
//! as `nobody` (`setpriv`); needs root.

use std::{
    io::{BufRead as _, BufReader, Write as _},
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    process::{Child, ChildStdout, Command, Stdio},
    time::{Duration, Instant},
};

use crate::common::{daemon::*, *};

/// `map_wait FILES…` as nobody, once it has mapped them.
pub(super) struct Neighbour {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl Neighbour {
    pub(super) fn start(program: &Path, files: &[&Path]) -> Self {
        let mut child = Command::new("setpriv")
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
            .arg(program)
            .args(files)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let mut n = Self { child, out };
        n.expect("mapped");
        n
    }

    fn expect(&mut self, word: &str) {
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), word);
    }

    /// A library load (a link-map change the daemon looks at), done.
    pub(super) fn load(&mut self) {
        writeln!(self.child.stdin.as_mut().unwrap()).unwrap();
        self.expect("loaded");
    }

    pub(super) fn end(mut self) {
        drop(self.child.stdin.take());
        assert!(self.child.wait().unwrap().success());
    }
}

/// A directory nobody can enter, with `map_wait` in it (the daemon's filter names it).
pub(super) fn open_dir(dir: &TempDir) -> PathBuf {
    std::fs::set_permissions(dir.path(""), std::fs::Permissions::from_mode(0o755)).unwrap();
    let program = dir.path("map_wait");
    std::fs::copy(rocsync_tests::map_wait(), &program).unwrap();
    program
}

/// `DIR/NAME/libamdhip64.so`, sparse, of `size` bytes, and a real copy of the simulated
/// runtime at `DIR/real/libamdhip64.so` (whose probing says the daemon has looked).
pub(super) fn sparse_and_real(dir: &TempDir, name: &str, size: u64) -> (PathBuf, PathBuf) {
    std::fs::create_dir(dir.path(name)).unwrap();
    let sparse = dir.path(&format!("{name}/libamdhip64.so"));
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(size)
        .unwrap();
    std::fs::create_dir(dir.path("real")).unwrap();
    let real = dir.path("real/libamdhip64.so");
    std::fs::copy(rocsync_tests::sim_hip(), &real).unwrap();
    (sparse, real)
}

fn status_kib(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = text.lines().find(|l| l.starts_with(field)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The daemon's descriptors, and among them its BPF links (their fdinfo has a link id).
fn fds_and_links(pid: u32) -> (usize, usize) {
    let (mut fds, mut links) = (0, 0);
    for e in std::fs::read_dir(format!("/proc/{pid}/fdinfo"))
        .unwrap()
        .flatten()
    {
        fds += 1;
        let info = std::fs::read_to_string(e.path()).unwrap_or_default();
        links += usize::from(info.contains("link_id:"));
    }
    (fds, links)
}

#[test]
fn a_huge_sparse_runtime_is_read_only_as_far_as_its_headers_and_once() {
    let name = "a_huge_sparse_runtime_is_read_only_as_far_as_its_headers_and_once";
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    let program = open_dir(&dir);
    let (huge, real) = sparse_and_real(&dir, "huge", 1 << 30);
    let (daemon, mut lines) = start_daemon(&dir, &program, &[]);
    let addr = metrics_addr(&lines);
    let pid = daemon.id();
    let before = status_kib(pid, "VmHWM:");

    let mut a = Neighbour::start(&program, &[&huge]);
    a.load();
    let unusable = "rocsync_files_refused_total{reason=\"unusable\"}";
    until(20, "the sparse file was never refused", || {
        let t = Instant::now();
        assert!(get(&addr, "/healthz").contains("ok"));
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "/healthz took {:?}",
            t.elapsed()
        );
        metric(&addr, unusable) == 1.0
    });
    // Two more looks at it: a load in the same process, and a second process that maps it
    // beside a real copy (whose probing says the daemon has looked).
    a.load();
    let mut b = Neighbour::start(&program, &[&huge, &real]);
    b.load();
    lines.wait_for(&format!("probing {}", real.display()));
    assert_eq!(metric(&addr, unusable), 1.0);
    let grew = status_kib(pid, "VmHWM:").saturating_sub(before);
    assert!(grew < 32 << 10, "the daemon's peak RSS grew by {grew} KiB");
    let said = lines
        .drain()
        .iter()
        .filter(|l| l.contains("huge/libamdhip64.so"))
        .count();
    assert_eq!(said, 1, "{:#?}", lines.1);
    a.end();
    b.end();
    stop(daemon);
}

#[test]
fn copies_of_a_runtime_are_released_with_their_processes_and_capped_per_user() {
    let name = "copies_of_a_runtime_are_released_with_their_processes_and_capped_per_user";
    let Some((dir, scenario)) = daemon_test(name) else {
        return;
    };
    let program = open_dir(&dir);
    let config = dir.path("rocsync.toml");
    std::fs::write(&config, "max_files_per_user = 3\n").unwrap();
    let copies: Vec<PathBuf> = (0..8)
        .map(|i| {
            let d = dir.path(&format!("copy{i}"));
            std::fs::create_dir(&d).unwrap();
            let lib = d.join("libamdhip64.so");
            std::fs::copy(rocsync_tests::sim_hip(), &lib).unwrap();
            lib
        })
        .collect();
    let include = format!("--include-exe={}", program.display());
    let config_arg = format!("--config={}", config.display());
    let (daemon, mut lines) = start_daemon(&dir, &scenario, &[&include, &config_arg]);
    let addr = metrics_addr(&lines);
    let pid = daemon.id();
    // Root's own process, counted throughout.
    let mut root = tracked_loop(&dir, &scenario, &mut lines, 8000);
    let probed = |addr: &str| metric(addr, "rocsync_probed_files");
    let root_files = probed(&addr);
    assert!(root_files >= 1.0);
    let (fds, links) = fds_and_links(pid);

    let mut n = Neighbour::start(
        &program,
        &copies.iter().map(PathBuf::as_path).collect::<Vec<_>>(),
    );
    n.load();
    let capped = "rocsync_files_refused_total{reason=\"per_user_limit\"}";
    until(20, "no copy was refused for nobody's cap", || {
        metric(&addr, capped) == 5.0
    });
    assert_eq!(probed(&addr), root_files + 3.0);
    let during = fds_and_links(pid);
    assert!(
        during.1 > links,
        "nobody's copies were not probed: {during:?}"
    );
    // nobody's cap is not root's: root's process is still counted.
    let calls = |addr: &str| metric(addr, "rocsync_sync_calls_total");
    let now = calls(&addr);
    until(20, "root's calls stopped being counted", || {
        calls(&addr) > now
    });

    n.end();
    until(60, "nobody's copies kept their probes", || {
        let (f, l) = fds_and_links(pid);
        f <= fds && l <= links && probed(&addr) <= root_files
    });
    assert!(root.wait().unwrap().success());
    stop(daemon);
}

/// Copies churned faster than the kernel detaches their probes (each unregistration
/// waits for it) stay within their user's cap: a released file counts until its links
/// are gone, so the daemon never holds more of nobody's links than the cap allows.
#[test]
fn churned_copies_count_against_their_user_until_their_links_are_gone() {
    let name = "churned_copies_count_against_their_user_until_their_links_are_gone";
    let Some((dir, scenario)) = daemon_test(name) else {
        return;
    };
    let program = open_dir(&dir);
    let config = dir.path("rocsync.toml");
    std::fs::write(&config, "max_files_per_user = 4\n").unwrap();
    let copies: Vec<PathBuf> = (0..8)
        .map(|i| {
            let d = dir.path(&format!("copy{i}"));
            std::fs::create_dir(&d).unwrap();
            let lib = d.join("libamdhip64.so");
            std::fs::copy(rocsync_tests::sim_hip(), &lib).unwrap();
            lib
        })
        .collect();
    let paths: Vec<&Path> = copies.iter().map(PathBuf::as_path).collect();
    let include = format!("--include-exe={}", program.display());
    let config_arg = format!("--config={}", config.display());
    let (daemon, lines) = start_daemon(&dir, &scenario, &[&include, &config_arg]);
    let addr = metrics_addr(&lines);
    let pid = daemon.id();
    let (_, links) = fds_and_links(pid);
    let probed = || metric(&addr, "rocsync_probed_files");

    let done = std::sync::atomic::AtomicBool::new(false);
    let (most, per_cap) = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut most = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                most = most.max(fds_and_links(pid).1);
                std::thread::sleep(Duration::from_millis(5));
            }
            most
        });
        // A full cap's worth, released (the prune hands their links to be detached)...
        let mut first = Neighbour::start(&program, &paths[..4]);
        first.load();
        until(20, "nobody's first copies were not probed", || {
            probed() == 4.0
        });
        let per_cap = fds_and_links(pid).1 - links;
        first.end();
        until(20, "nobody's first copies were never released", || {
            probed() == 0.0
        });
        // ...and at once as many new ones, while the kernel is still detaching.
        let mut second = Neighbour::start(&program, &paths[4..]);
        second.load();
        until(60, "nobody's first copies kept their probes", || {
            fds_and_links(pid).1 <= links + per_cap
        });
        second.end();
        until(60, "nobody's copies kept their probes", || {
            probed() == 0.0 && fds_and_links(pid).1 <= links
        });
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        (sampler.join().unwrap(), per_cap)
    });
    assert!(per_cap > 0);
    // A link or two besides the files' may come and go (a loader hook attached at the
    // neighbour's first sight, seen once in a loaded run): far fewer than one file's ~32,
    // which the daemon held on top of a full cap before released files were counted.
    assert!(
        most <= links + per_cap + 2,
        "the daemon held {} of nobody's links at once, its cap's worth being {per_cap}",
        most - links
    );
    stop(daemon);
}

/// A FUSE server of one file, `libamdhip64.so` (the simulated runtime), mounted at
/// argv[1] as uid 65534 with `allow_other`: it stops answering once argv[2] exists.
const FUSE_SERVER: &str = r#"
import os, struct, ctypes, sys
mnt, freeze, lib = sys.argv[1], sys.argv[2], sys.argv[3]
data = open(lib, 'rb').read()
fd = os.open('/dev/fuse', os.O_RDWR)
libc = ctypes.CDLL(None, use_errno=True)
opts = f"fd={fd},rootmode=40000,user_id=65534,group_id=65534,allow_other".encode()
if libc.mount(b"hold", mnt.encode(), b"fuse", ctypes.c_ulong(6), opts) != 0:
    print("mount failed", ctypes.get_errno(), flush=True); sys.exit(1)
print("mounted", flush=True)
def attr(ino):
    if ino == 1: return struct.pack("<QQQQQQIIIIIIIIII", 1,0,0,0,0,0,0,0,0,0o40755,2,0,0,0,4096,0)
    return struct.pack("<QQQQQQIIIIIIIIII", 2,len(data),(len(data)+511)//512,0,0,0,0,0,0,0o100755,1,0,0,0,4096,0)
def reply(uniq, err=0, body=b""): os.write(fd, struct.pack("<IiQ", 16+len(body), -err, uniq) + body)
while True:
    try: buf = os.read(fd, 1 << 20)
    except OSError as e:
        if e.errno == 19: break
        continue
    ln, op, uniq, node = struct.unpack_from("<IIQQ", buf); body = buf[40:]
    if os.path.exists(freeze): continue
    if op == 26:
        maj, mi, ra, fl = struct.unpack_from("<IIII", body)
        reply(uniq, 0, struct.pack("<IIIIHHIIHHI7I", 7, 31, ra, 0, 16, 12, 1 << 17, 1, 32, 0, 0, *([0]*7)))
    elif op == 1:
        name = body.split(b"\0")[0]
        if node == 1 and name == b"libamdhip64.so": reply(uniq, 0, struct.pack("<QQQQII", 2,0,0,0,0,0) + attr(2))
        else: reply(uniq, 2)
    elif op == 3: reply(uniq, 0, struct.pack("<QII", 0,0,0) + attr(node))
    elif op in (14, 27): reply(uniq, 0, struct.pack("<QII", 0,0,0))
    elif op == 15:
        fh, off, size = struct.unpack_from("<QQI", body); reply(uniq, 0, data[off:off+size])
    elif op in (18, 29, 25, 28): reply(uniq, 0)
    elif op in (2, 42, 36): pass
    elif op == 38: reply(uniq, 0); break
    else: reply(uniq, 38)
"#;

/// A runtime on a user's FUSE mount is never read: its server could stop answering and
/// hold the daemon's thread in the kernel (it held it 67 s, every scrape and request
/// unanswered, until the server was killed). The file is refused, said once and
/// counted, and the daemon goes on answering while the server holds every request.
#[test]
fn a_runtime_on_a_users_fuse_mount_is_never_read() {
    on_a_frozen_fuse_mount("a_runtime_on_a_users_fuse_mount_is_never_read", false);
}

/// The same mount detached (`umount -l`, as `fusermount -u -z`) once the neighbour
/// mapped its file: the mapping stays, its device in no mount table. Trusted as such,
/// the daemon opened the file and its one thread waited on the server for good.
#[test]
fn a_runtime_on_a_detached_fuse_mount_is_never_read() {
    on_a_frozen_fuse_mount("a_runtime_on_a_detached_fuse_mount_is_never_read", true);
}

/// One frozen mount at a time: a daemon looks at every process at its start, and would
/// say the other test's refusal (its mount's device number recycled by the next mount,
/// CI saw the line for the other's process and none for its own).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The frozen server killed and its mount detached however the test ends: a failed
/// assertion left the mount for the temporary folder's removal, which waited on the
/// server for good (CI hung).
struct Unfrozen(std::process::Child, std::path::PathBuf);

impl Drop for Unfrozen {
    fn drop(&mut self) {
        self.0.end();
        let _ = Command::new("umount").arg("-l").arg(&self.1).status();
    }
}

fn on_a_frozen_fuse_mount(name: &str, detached: bool) {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    let program = open_dir(&dir);
    let (daemon, mut lines) = start_daemon(&dir, &program, &[]);
    let addr = metrics_addr(&lines);
    let mnt = dir.path("fuse");
    std::fs::create_dir(&mnt).unwrap();
    std::fs::set_permissions(&mnt, std::fs::Permissions::from_mode(0o755)).unwrap();
    let freeze = dir.path("freeze");
    let mut server = Command::new("python3")
        .args(["-c", FUSE_SERVER])
        .arg(&mnt)
        .arg(&freeze)
        .arg(rocsync_tests::sim_hip())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = String::new();
    let out = server.stdout.take().unwrap();
    let server = Unfrozen(server, mnt.clone());
    BufReader::new(out).read_line(&mut said).unwrap();
    assert_eq!(said.trim(), "mounted");
    let lib = mnt.join("libamdhip64.so");
    let mut n = Neighbour::start(&program, &[&lib]);
    if detached {
        run_ok(Command::new("umount").arg("-l").arg(&mnt));
    }
    // From now on the server answers nothing.
    std::fs::write(&freeze, "").unwrap();
    n.load();
    // Detached, it is of no known owner; the daemon may have seen it mounted first.
    lines.wait_for_all(&[match detached {
        true => "not probed",
        false => "is on a FUSE mount of uid 65534",
    }]);
    let refused = "rocsync_files_refused_total{reason=\"user_fuse\"}";
    for _ in 0..3 {
        let t = Instant::now();
        assert_eq!(metric(&addr, refused), 1.0);
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "a scrape took {:?}",
            t.elapsed()
        );
        n.load();
    }
    let status = ask_daemon(&dir.path("rocsync.sock"), &["status"]);
    assert!(status.contains("tracked processes: 0"), "{status}");
    // The server gone, its requests fail and the neighbour ends.
    drop(server);
    n.child.end();
    stop(daemon);
}
