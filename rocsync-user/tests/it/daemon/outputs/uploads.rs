//! Traces leave the node: with `--upload`, every trace the daemon writes arrives in a
//! real S3-compatible server (moto's, started here) under `PREFIX/NODE/FILE` with the
//! bytes on disk; with the server down, traces wait on disk (counted as pending, the
//! failures counted) and are uploaded once it is back — by the same daemon, and by the
//! next one after a restart (its keys from `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`,
//! the others' from the shared credentials file); a pod's trace under
//! `PREFIX/NODE/NAMESPACE/POD/FILE`. The objects are read back with boto3, AWS's own
//! client, not through rocsync's. Needs root and `ROCSYNC_HTA_PYTHON`'s venv with moto.

use std::{
    collections::BTreeMap,
    ffi::OsStr,
    io::{Read as _, Write as _},
    net::{TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

use crate::common::{daemon::*, *};

const BUCKET: &str = "rocsync-traces";

/// moto's S3 server on `port`, with the bucket made.
pub(crate) struct Store {
    server: Child,
    port: u16,
}

impl Store {
    pub(crate) fn start(bin: &Path, port: u16) -> Store {
        let server = Command::new(bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let store = Store { server, port };
        until(30, "moto's server answers", || {
            TcpStream::connect(store.addr()).is_ok()
        });
        let made = store.request("PUT", &format!("/{BUCKET}"));
        assert!(made.0 == 200, "making the bucket: {made:?}");
        store
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// One unsigned request (moto does not check signatures); its status.
    fn request(&self, method: &str, path: &str) -> (u32, String) {
        let mut s = TcpStream::connect(self.addr()).unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.addr()
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        (out.split(' ').nth(1).unwrap().parse().unwrap(), out)
    }

    /// Every object in the bucket, by key, read with boto3 (AWS's own client, signed
    /// as moto requires for reading objects), not through rocsync's client.
    pub(crate) fn objects(&self, python: &OsStr, into: &Path) -> BTreeMap<String, Vec<u8>> {
        let _ = std::fs::remove_dir_all(into);
        std::fs::create_dir_all(into).unwrap();
        let script = r#"
import boto3, os, sys
s3 = boto3.client("s3", endpoint_url=sys.argv[1], aws_access_key_id="testing",
                  aws_secret_access_key="testing", region_name="us-east-1")
for o in s3.list_objects_v2(Bucket=sys.argv[2]).get("Contents", []):
    path = os.path.join(sys.argv[3], o["Key"].replace("/", "%"))
    s3.download_file(sys.argv[2], o["Key"], path)
"#;
        run_ok(
            Command::new(python)
                .args(["-c", script, &format!("http://{}", self.addr()), BUCKET])
                .arg(into),
        );
        std::fs::read_dir(into)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let key = e.file_name().to_string_lossy().replace('%', "/");
                (key, std::fs::read(e.path()).unwrap())
            })
            .collect()
    }

    fn stop(mut self) {
        self.server.end();
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.server.end();
    }
}

pub(crate) fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Where an uploading daemon finds its keys.
#[derive(Clone, Copy)]
pub(crate) enum Keys {
    /// The shared credentials file of a home of its own (no `AWS_*` in its environment).
    File,
    /// `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`, in a home holding no credentials
    /// file and with instance metadata asked at a closed port (this host may answer on
    /// 169.254.169.254): a daemon that ignored them would have no keys, and moto, which
    /// accepts any signature, would receive nothing.
    Environment,
}

/// A daemon uploading to `port` under `fleet/node-a`, its keys from `keys`.
pub(crate) fn uploading_daemon(
    dir: &TempDir,
    exe: &Path,
    port: u16,
    extra: &[&str],
    keys: Keys,
) -> (Daemon, Lines) {
    let home = dir.path(match keys {
        Keys::File => "home",
        Keys::Environment => "home-without-keys",
    });
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    if let Keys::File = keys {
        std::fs::write(
            home.join(".aws/credentials"),
            "[default]\naws_access_key_id = testing\naws_secret_access_key = testing\n",
        )
        .unwrap();
    }
    let endpoint = format!("http://127.0.0.1:{port}");
    let args = [
        "--upload",
        "s3://rocsync-traces/fleet",
        "--upload-endpoint",
        &endpoint,
        "--node-name",
        "node-a",
    ];
    let args: Vec<&str> = args.iter().chain(extra).copied().collect();
    let mut cmd = daemon_command(dir, exe, &args);
    cmd.env("HOME", &home);
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("AWS_")) {
        cmd.env_remove(k);
    }
    if let Keys::Environment = keys {
        cmd.env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_METADATA_ENDPOINT", "http://127.0.0.1:1");
    }
    let mut daemon = Daemon(spawn_piped(&mut cmd));
    let mut lines = Lines::of(daemon.stderr.take().unwrap());
    lines.wait_for("SIGTERM stops");
    (daemon, lines)
}

/// A 200 ms trace of `pid`: its file.
fn trace(sock: &Path, pid: u32) -> PathBuf {
    let out = ask_daemon(
        sock,
        &["trace", "--pid", &pid.to_string(), "--duration", "200ms"],
    );
    let files: Vec<&str> = out.lines().collect();
    assert_eq!(files.len(), 1, "{out}");
    PathBuf::from(files[0])
}

fn key_of(file: &Path) -> String {
    format!(
        "fleet/node-a/{}",
        file.file_name().unwrap().to_string_lossy()
    )
}

/// The store holds exactly `files`, each under its key with its bytes.
fn assert_stored(store: &Store, python: &OsStr, dir: &TempDir, files: &[&PathBuf]) {
    let objects = store.objects(python, &dir.path("objects"));
    let keys: Vec<&String> = objects.keys().collect();
    assert_eq!(objects.len(), files.len(), "{keys:?}");
    for f in files {
        let key = key_of(f);
        let bytes = objects
            .get(&key)
            .unwrap_or_else(|| panic!("{key} not in {keys:?}"));
        assert!(*bytes == std::fs::read(f).unwrap(), "{key}'s bytes");
    }
}

#[test]
fn traces_reach_the_store_and_wait_on_disk_while_it_is_down() {
    let name = "traces_reach_the_store_and_wait_on_disk_while_it_is_down";
    let Some((dir, exe, python)) = metrics_test(name) else {
        return;
    };
    let moto = Path::new(&python).with_file_name("moto_server");
    assert!(
        moto.exists(),
        "{} (cargo xtask test installs it)",
        moto.display()
    );
    let port = free_port();
    let store = Store::start(&moto, port);
    let (daemon, mut lines) = uploading_daemon(&dir, &exe, port, &[], Keys::File);
    let addr = metrics_addr(&lines);
    let sock = dir.path("rocsync.sock");
    let mut target = tracked_loop(&dir, &exe, &mut lines, 60_000);
    let pid = target.id();

    // Up: the trace arrives with its bytes.
    let first = trace(&sock, pid);
    until(30, "the first upload", || {
        metric(&addr, "rocsync_uploads_total") == 1.0
    });
    assert_stored(&store, &python, &dir, &[&first]);
    assert!(metric(&addr, "rocsync_upload_bytes_total") as u64 == first.metadata().unwrap().len());

    // Down: the trace waits, failures are counted; back: it arrives.
    store.stop();
    let second = trace(&sock, pid);
    until(30, "a failed upload counted", || {
        metric(&addr, "rocsync_upload_failures_total") >= 1.0
    });
    assert_eq!(metric(&addr, "rocsync_upload_pending"), 1.0);
    assert!(second.exists());
    let store = Store::start(&moto, port);
    until(60, "the upload once the store is back", || {
        metric(&addr, "rocsync_uploads_total") == 2.0
    });
    assert_eq!(metric(&addr, "rocsync_upload_pending"), 0.0);
    // moto forgot the first object with its restart: only the second is there.
    assert_stored(&store, &python, &dir, &[&second]);

    // Down across a restart of the daemon: the next one uploads what waited, with its
    // keys from the environment this time.
    store.stop();
    let third = trace(&sock, pid);
    until(30, "a failed upload counted", || {
        metric(&addr, "rocsync_upload_failures_total") >= 2.0
    });
    stop(daemon);
    let store = Store::start(&moto, port);
    let (daemon, lines) = uploading_daemon(&dir, &exe, port, &[], Keys::Environment);
    let addr = metrics_addr(&lines);
    until(60, "the waiting trace uploaded by the next daemon", || {
        metric(&addr, "rocsync_uploads_total") == 1.0
    });
    assert_stored(&store, &python, &dir, &[&third]);
    assert_eq!(metric(&addr, "rocsync_upload_lost_total"), 0.0);
    // Every trace written is still on disk: retention is off.
    for f in [&first, &second, &third] {
        assert!(f.exists(), "{}", f.display());
    }
    target.end();
    stop(daemon);
    drop(store);
}

#[test]
fn a_waiting_trace_retention_must_remove_is_counted_lost() {
    let name = "a_waiting_trace_retention_must_remove_is_counted_lost";
    let Some((dir, exe, python)) = metrics_test(name) else {
        return;
    };
    let moto = Path::new(&python).with_file_name("moto_server");
    let port = free_port();
    // No store yet: every trace waits; retention keeps only the newest.
    let (daemon, mut lines) = uploading_daemon(
        &dir,
        &exe,
        port,
        &["--retention-max-bytes", "1"],
        Keys::File,
    );
    let addr = metrics_addr(&lines);
    let sock = dir.path("rocsync.sock");
    let mut target = tracked_loop(&dir, &exe, &mut lines, 60_000);
    let first = trace(&sock, target.id());
    let second = trace(&sock, target.id());
    until(10, "the first trace counted lost", || {
        metric(&addr, "rocsync_upload_lost_total") == 1.0
    });
    assert!(!first.exists() && second.exists());
    let store = Store::start(&moto, port);
    until(60, "the second trace uploaded", || {
        metric(&addr, "rocsync_uploads_total") == 1.0
    });
    assert_eq!(metric(&addr, "rocsync_upload_pending"), 0.0);
    assert_stored(&store, &python, &dir, &[&second]);
    target.end();
    stop(daemon);
}

#[test]
fn a_pods_trace_is_uploaded_under_its_namespace_and_pod() {
    let name = "a_pods_trace_is_uploaded_under_its_namespace_and_pod";
    let Some((dir, exe, python)) = metrics_test(name) else {
        return;
    };
    let Some(hierarchy) = crate::daemon::tracking::pods::pod_test(name) else {
        return;
    };
    let moto = Path::new(&python).with_file_name("moto_server");
    let port = free_port();
    let store = Store::start(&moto, port);
    let host = crate::common::pod::host_flags(dir.0.path());
    let host: Vec<&str> = host.iter().map(String::as_str).collect();
    let (daemon, mut lines) = uploading_daemon(&dir, &exe, port, &host, Keys::File);
    let addr = metrics_addr(&lines);
    let cgroup = crate::common::pod::PodCgroup::create(&hierarchy);
    // The node says ml-team/trainer-0; the pod's own files claim another's name, which
    // must not reach the key (nor replace that pod's objects).
    crate::common::pod::in_runtime(dir.0.path(), &cgroup, "ml-team", "trainer-0");
    let spec = crate::daemon::tracking::pods::spec(
        "kube-system",
        "etcd-0",
        crate::common::pod::NamespaceFile::Plain,
        true,
    );
    let args = ["gated", "loop", "6000"];
    let mut pod = crate::daemon::tracking::pods::start_in_pod(&dir, &exe, &spec, &cgroup, &args);
    pod.open_when_tracked(&mut lines);
    let sock = dir.path("rocsync.sock");
    let out = ask_daemon(
        &sock,
        &["trace", "--pod", "ml-team/trainer-0", "--duration", "200ms"],
    );
    let file = PathBuf::from(out.trim());
    until(30, "the pod's trace uploaded", || {
        metric(&addr, "rocsync_uploads_total") == 1.0
    });
    let objects = store.objects(&python, &dir.path("objects"));
    let key = format!(
        "fleet/node-a/ml-team/trainer-0/{}",
        file.file_name().unwrap().to_string_lossy()
    );
    let keys: Vec<&String> = objects.keys().collect();
    assert_eq!(keys, [&key]);
    assert!(
        objects[&key] == std::fs::read(&file).unwrap(),
        "{key}'s bytes"
    );
    assert!(pod.child.wait().unwrap().success());
    stop(daemon);
}
