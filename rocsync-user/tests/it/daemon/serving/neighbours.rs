//! The daemon next to others on its node: one daemon per node, a socket removed only by
//! the daemon that made it, a claim connection that cannot grow the daemon's memory, and
//! listeners that rest, not spin, when the daemon is out of descriptors. Needs root.

use std::{
    io::{BufRead as _, BufReader, Write as _},
    os::unix::net::{UnixListener, UnixStream},
    time::{Duration, Instant},
};

use crate::common::{TempDir, assert_ok, daemon::*, stderr_of};

/// A `Name:` field of `/proc/PID/status`, in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .unwrap();
    line.split_whitespace().next().unwrap().parse().unwrap()
}

/// User and system CPU time of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// What a daemon that should refuse to start said, once it exited (killed, and the test
/// failed, if it ran on).
fn exits(mut cmd: std::process::Command) -> std::process::Output {
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("a second daemon started: {:?}", child.wait_with_output());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(30), "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_second_daemon_is_refused_and_the_first_keeps_answering() {
    let Some((dir, exe)) = daemon_test("a_second_daemon_is_refused_and_the_first_keeps_answering")
    else {
        return;
    };
    let (first, _lines) = start_daemon(&dir, &exe, &[]);
    // Another socket and state directory, the same node lock.
    let other = TempDir::new();
    let lock = dir.path("daemon.lock");
    let second = exits(daemon_command(
        &other,
        &exe,
        &["--lock", lock.to_str().unwrap()],
    ));
    let said = stderr_of(&second);
    assert!(!second.status.success(), "{said}");
    assert!(
        said.contains(&format!(
            "another rocsync daemon runs on this node (pid {}",
            first.id()
        )),
        "{said}"
    );
    assert!(
        !other.path("rocsync.sock").exists(),
        "the second listened anyway"
    );
    // Nor may a second take over the first's socket.
    let mut third = daemon_command(&other, &exe, &["--lock", lock.to_str().unwrap()]);
    third.args(["--socket", dir.path("rocsync.sock").to_str().unwrap()]);
    let third = exits(third);
    assert!(!third.status.success());
    assert!(ask_daemon(&dir.path("rocsync.sock"), &["status"]).contains("tracked processes: "));
    stop(first);
}

#[test]
fn a_daemon_removes_only_the_socket_it_made() {
    let Some((dir, exe)) = daemon_test("a_daemon_removes_only_the_socket_it_made") else {
        return;
    };
    let (daemon, _lines) = start_daemon(&dir, &exe, &[]);
    let sock = dir.path("rocsync.sock");
    std::fs::rename(&sock, dir.path("moved.sock")).unwrap();
    let someone_elses = UnixListener::bind(&sock).unwrap();
    stop(daemon);
    assert!(sock.exists(), "the daemon removed a socket it did not make");
    UnixStream::connect(&sock).unwrap();
    drop(someone_elses);
}

#[test]
fn what_follows_a_claim_is_read_and_dropped() {
    let Some((dir, exe)) = daemon_test("what_follows_a_claim_is_read_and_dropped") else {
        return;
    };
    let (daemon, _lines) = start_daemon(&dir, &exe, &[]);
    let sock = dir.path("rocsync.sock");
    let mut conn = UnixStream::connect(&sock).unwrap();
    conn.write_all(b"{\"claim\":{\"name\":\"flood\",\"agents\":null}}\n")
        .unwrap();
    let mut answer = String::new();
    BufReader::new(&conn).read_line(&mut answer).unwrap();
    assert!(answer.contains("claimed"), "{answer}");
    let peak = status_kib(daemon.id(), "VmHWM");
    let chunk = vec![b'x'; 1 << 20];
    for _ in 0..256 {
        conn.write_all(&chunk).unwrap();
    }
    conn.shutdown(std::net::Shutdown::Write).unwrap();
    // Released once the daemon read to the end of what was sent.
    wait_until("the claim released", || {
        daemon_status(&sock)["claims"]
            .as_array()
            .is_some_and(|c| c.is_empty())
    });
    let grew = status_kib(daemon.id(), "VmHWM").saturating_sub(peak);
    assert!(
        grew < 64 << 10,
        "256 MiB after a claim grew the daemon's peak memory by {grew} KiB"
    );
    stop(daemon);
}

#[test]
fn a_listener_out_of_descriptors_rests_instead_of_spinning() {
    let Some((dir, exe)) = daemon_test("a_listener_out_of_descriptors_rests_instead_of_spinning")
    else {
        return;
    };
    let (daemon, mut lines) = start_daemon(&dir, &exe, &[]);
    let pid = daemon.id();
    let open = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count() as u64;
    // The soft limit only: raising a hard limit back needs CAP_SYS_RESOURCE.
    let limit = |soft: Option<u64>| -> u64 {
        let mut old = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: prlimit on the daemon this test started, with valid pointers.
        let rc =
            unsafe { libc::prlimit(pid as i32, libc::RLIMIT_NOFILE, std::ptr::null(), &mut old) };
        assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
        if let Some(soft) = soft {
            let new = libc::rlimit {
                rlim_cur: soft,
                rlim_max: old.rlim_max,
            };
            // SAFETY: as above.
            let rc = unsafe {
                libc::prlimit(pid as i32, libc::RLIMIT_NOFILE, &new, std::ptr::null_mut())
            };
            assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
        }
        old.rlim_cur
    };
    let soft = limit(None);
    limit(Some(open + 2));
    // Connections that send nothing: the first take the last descriptors, the rest wait
    // in the backlog, and accepting them fails until some close.
    let sock = dir.path("rocsync.sock");
    let _idle: Vec<UnixStream> = (0..16)
        .map(|_| UnixStream::connect(&sock).unwrap())
        .collect();
    lines.wait_for("cannot accept connections");
    let before = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_ticks(pid) - before;
    // A loop retrying accept at once burns the whole 2 s (200 ticks at 100 Hz).
    assert!(used < 50, "the daemon used {used} ticks in 2 s");
    limit(Some(soft));
    stop(daemon);
}

/// `n` connections to `target` (`ADDR:PORT`, or a unix socket's path) held idle by a
/// process of nobody's, until it is dropped; returned once they are made.
struct IdleAsNobody(std::process::Child);

impl IdleAsNobody {
    fn hold(target: &str, n: usize) -> Self {
        const HOLD: &str = r#"
import socket, sys
target, n = sys.argv[1], int(sys.argv[2])
held = []
for _ in range(n):
    if target.startswith('/'):
        s = socket.socket(socket.AF_UNIX)
        s.connect(target)
    else:
        host, port = target.rsplit(':', 1)
        s = socket.create_connection((host, int(port)))
    held.append(s)
print('holding', flush=True)
sys.stdin.read()
"#;
        let mut child = std::process::Command::new("setpriv")
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
            // Debian's (scripts/setup installs it): nobody cannot run root's pyenv.
            .args(["/usr/bin/python3", "-c", HOLD, target, &n.to_string()])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut said = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut said)
            .unwrap();
        assert_eq!(said.trim(), "holding");
        Self(child)
    }
}

impl Drop for IdleAsNobody {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        let _ = self.0.wait();
    }
}

#[test]
fn one_users_idle_connections_take_no_one_elses_slots() {
    let Some((dir, exe)) = daemon_test("one_users_idle_connections_take_no_one_elses_slots") else {
        return;
    };
    // nobody may use the socket (nogroup), so it can stall it too; it may reach it.
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(dir.0.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let (daemon, lines) = start_daemon(&dir, &exe, &["--group", "nogroup"]);
    let metrics = metrics_addr(&lines);
    let sock = dir.path("rocsync.sock");
    // As many idle connections as a listener reads at once, on each listener.
    let _scrapes = IdleAsNobody::hold(&metrics, 64);
    let _requests = IdleAsNobody::hold(sock.to_str().unwrap(), 64);
    for _ in 0..10 {
        let health = get(&metrics, "/healthz");
        assert!(
            health.ends_with("ok\n"),
            "a scrape was turned away: {health:?}"
        );
    }
    assert!(ask_daemon(&sock, &["status"]).contains("tracked processes: "));
    stop(daemon);
}

#[test]
fn roots_trace_ends_a_group_members_trace_of_the_same_agents() {
    let name = "roots_trace_ends_a_group_members_trace_of_the_same_agents";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(dir.0.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let (daemon, mut lines) = start_daemon(&dir, &exe, &["--group", "nogroup"]);
    let target = tracked_loop(&dir, &exe, &mut lines, 30_000);
    let pid = target.id().to_string();
    let sock = dir.path("rocsync.sock");
    // A group member's trace of every agent, for ten minutes (an hour is allowed).
    let member = std::process::Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_rocsync"))
        .args(["trace", "-p", &pid, "--duration", "10m", "--socket"])
        .arg(&sock)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    lines.wait_for(&format!("recording pid(s) [{pid}]"));
    // Root's trace of the same agents is not refused: the member's ends, written.
    let roots = ask_daemon(&sock, &["trace", "-p", &pid, "--duration", "200ms"]);
    assert!(roots.trim().ends_with(".json"), "{roots}");
    let out = member.wait_with_output().unwrap();
    assert_ok(&out);
    let theirs = String::from_utf8(out.stdout).unwrap();
    let t = crate::common::read_json(std::path::Path::new(theirs.trim()));
    let truncated = &t["rocsync"]["parameters"]["truncated"];
    assert_eq!(truncated["reason"], "preempted", "{truncated}");
    lines.wait_for_all(&["(asked by uid 65534) ends early: root asked for its agents"]);
    drop(target);
    stop(daemon);
}

/// This node's first address that is not loopback (`ip -4 -o addr show scope global`).
fn own_address() -> Option<String> {
    let out = std::process::Command::new("ip")
        .args(["-4", "-o", "addr", "show", "scope", "global"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let cidr = text.lines().next()?.split_whitespace().nth(3)?;
    Some(cidr.split('/').next()?.to_string())
}

/// A local peer is its uid, whatever address of the node it connects from: told by its
/// address instead (issue 60, round after 43671db), nobody's idle connections from the
/// node's own address took the share of root's from there (a scraper, a health probe
/// on the node's address), and each address of the node gave nobody another share.
#[test]
fn a_local_peer_on_the_nodes_own_address_is_told_by_its_uid() {
    const NAME: &str = "a_local_peer_on_the_nodes_own_address_is_told_by_its_uid";
    let Some((dir, exe)) = daemon_test(NAME) else {
        return;
    };
    let Some(own) = own_address() else {
        rocsync_tests::skip(NAME, "no address other than loopback");
        return;
    };
    let listen = format!("{own}:0");
    let (daemon, lines) = start_daemon(&dir, &exe, &["--metrics-addr", listen.as_str()]);
    let metrics = metrics_addr(&lines);
    assert!(metrics.starts_with(&own), "{metrics}");
    // From the node's own address (the kernel's source for a local destination).
    let _scrapes = IdleAsNobody::hold(&metrics, 64);
    for _ in 0..10 {
        let health = get(&metrics, "/healthz");
        assert!(
            health.ends_with("ok\n"),
            "root's scrape from {own} was turned away: {health:?}"
        );
    }
    stop(daemon);
}
