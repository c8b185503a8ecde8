//! Kubernetes identity without an API server: a scenario process in its own cgroup and
//! mount namespace arranged like a Kubernetes container (`common::pod`) is named by the
//! real daemon — in `rocsync status`, in the trace `rocsync trace --pod` writes, and in
//! `/metrics` with `--metric-labels namespace,pod`, whose counts per pod are the
//! scenario's log; a pod whose files are hostile (a FIFO, a symlink out of its root, the
//! node's host name) is named only as far as can be trusted, and the daemon keeps
//! answering. Needs root (eBPF, mounts, cgroups), a cgroup v2 hierarchy, `unshare`, and
//! `ROCSYNC_HTA_PYTHON` (prometheus_client) for the metrics.

use std::{collections::BTreeMap, path::Path, process::Command, time::Duration};

use serde_json::{Value, json};

use crate::common::{daemon::*, pod::*, *};
use rocsync_tests::read_log;

/// What a test needs to put a process in a pod: the cgroup v2 hierarchy, or a skip.
pub(crate) fn pod_test(name: &str) -> Option<std::path::PathBuf> {
    let hierarchy = cgroup2_mount();
    if hierarchy.is_none() {
        rocsync_tests::skip(name, "no cgroup v2 hierarchy is mounted");
    }
    hierarchy
}

/// The scenario `exe` run as `args` in pod `spec` (its own cgroup), held at its gate.
pub(crate) fn start_in_pod(
    dir: &TempDir,
    exe: &Path,
    spec: &PodSpec,
    cgroup: &PodCgroup,
    args: &[&str],
) -> Gated {
    // The test's directory (the program's copy) and the libraries' (the scenario's).
    let bind = [top_dir(dir.0.path()), top_dir(&rocsync_tests::scenario())];
    let bind: Vec<&Path> = bind.iter().map(|p| p.as_path()).collect();
    let log = dir.path(&format!("{}.log", spec.name));
    let root = dir.path(&format!("root-{}", spec.name));
    Gated::start(&mut in_pod(spec, cgroup, &root, &bind, &log, exe, args))
}

pub(crate) fn spec(
    namespace: &str,
    name: &str,
    namespace_file: NamespaceFile,
    own_uts: bool,
) -> PodSpec {
    PodSpec {
        namespace: namespace.into(),
        name: name.into(),
        namespace_file,
        own_uts,
    }
}

/// The daemon's status entry of `pid`.
fn tracked(sock: &Path, pid: u32) -> Value {
    let status = daemon_status(sock);
    status["tracked"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["pid"] == pid)
        .cloned()
        .unwrap_or_else(|| panic!("pid {pid} not tracked: {status}"))
}

#[test]
fn a_pods_process_is_named_in_status_traces_and_labelled_metrics() {
    let name = "a_pods_process_is_named_in_status_traces_and_labelled_metrics";
    let Some((dir, exe, python)) = metrics_test(name) else {
        return;
    };
    let Some(hierarchy) = pod_test(name) else {
        return;
    };
    let labels = ["--metric-labels", "namespace,pod"];
    let (daemon, mut lines) = start_daemon(&dir, &exe, &labels);
    let (addr, sock) = (metrics_addr(&lines), dir.path("rocsync.sock"));

    let cgroup = PodCgroup::create(&hierarchy);
    let trainer = spec("ml-team", "trainer-0", NamespaceFile::Plain, true);
    let mut pod = start_in_pod(&dir, &exe, &trainer, &cgroup, &["gated", "loop", "8000"]);
    let pid = pod.child.id();
    pod.open_when_tracked(&mut lines);
    let said = lines.1.last().unwrap().clone();
    assert!(said.ends_with(" in pod ml-team/trainer-0"), "{said}");
    // Beside it, a process outside Kubernetes.
    let outside_log = dir.path("outside.log");
    let mut outside = Gated::start(
        Command::new(&exe)
            .args(["gated", "basic"])
            .env("SCENARIO_LOG", &outside_log),
    );
    outside.open_when_tracked(&mut lines);
    assert!(!lines.1.last().unwrap().contains(" in pod "));

    // `rocsync status`: the pod in full (JSON), and its names (text).
    let identity = json!({
        "namespace": "ml-team",
        "name": "trainer-0",
        "uid": cgroup.uid,
        "container": cgroup.container,
    });
    assert!(
        std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
            .unwrap()
            .contains(&cgroup.path())
    );
    assert_eq!(tracked(&sock, pid)["pod"], identity);
    let other = tracked(&sock, outside.child.id());
    assert!(other.get("pod").is_none(), "{other}");
    let text = ask_daemon(&sock, &["status"]);
    let line = format!(
        "  {pid}  {}  pod ml-team/trainer-0  container {}",
        exe.display(),
        &cgroup.container[..12]
    );
    assert!(text.lines().any(|l| l == line), "{line:?} not in\n{text}");

    // `rocsync trace --pod`: that process's trace, the pod in its metadata.
    let out = ask_daemon(
        &sock,
        &["trace", "--pod", "ml-team/trainer-0", "--duration", "300ms"],
    );
    let files: Vec<&str> = out.lines().collect();
    assert_eq!(files.len(), 1, "{out}");
    let t = read_json(Path::new(files[0]));
    assert_eq!(t["rocsync"]["pid"], pid);
    assert_eq!(t["rocsync"]["pod"], identity);
    let rows = runtime_rows(&t);
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|r| r["pid"] == pid));
    // No such pod: the error names the pods there are.
    let none = rocsync()
        .args(["trace", "--pod", "ml-team/trainer-9", "--socket"])
        .arg(&sock)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&none.stderr);
    assert!(!none.status.success());
    assert!(
        err.contains("no tracked process is in pod ml-team/trainer-9")
            && err.contains("pods of tracked processes: ml-team/trainer-0"),
        "{err}"
    );
    let bad = rocsync()
        .args(["trace", "--pod", "trainer-0"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&bad.stderr).contains("expected NAMESPACE/NAME"));

    assert!(wait_within(&mut pod.child, Duration::from_secs(20), "the pod").success());
    assert!(wait_within(&mut outside.child, Duration::from_secs(20), "outside").success());

    // `/metrics`: every series labelled; per pod, the counts of its log.
    let m = Metrics::scrape(&python, &addr);
    let mut counted: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (metric, l, v) in &m.samples {
        if metric == "rocsync_sync_calls_total" {
            let who =
                l["namespace"].as_str().unwrap().to_string() + "/" + l["pod"].as_str().unwrap();
            *counted
                .entry((who, l["api"].as_str().unwrap().into()))
                .or_default() += *v as usize;
        }
    }
    let mut logged: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (who, log) in [
        ("ml-team/trainer-0", dir.path("trainer-0.log")),
        ("/", outside_log),
    ] {
        for l in probed(&read_log(&log)) {
            *logged.entry((who.into(), l.api)).or_default() += 1;
        }
    }
    assert!(logged.keys().any(|(who, _)| who == "/"));
    assert_eq!(
        counted, logged,
        "calls per pod and API: /metrics, then the logs"
    );
    let unlabelled = m
        .samples
        .iter()
        .find(|s| s.0 == "rocsync_unlabelled_calls_total");
    assert_eq!(
        unlabelled.map(|s| s.2),
        Some(0.0),
        "every pod's calls under its labels"
    );
    stop(daemon);
    drop(cgroup);
}

#[test]
fn a_hostile_pods_files_leave_its_names_unknown_and_the_daemon_answering() {
    let name = "a_hostile_pods_files_leave_its_names_unknown_and_the_daemon_answering";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let Some(hierarchy) = pod_test(name) else {
        return;
    };
    let (daemon, mut lines) = start_daemon(&dir, &exe, &[]);
    let sock = dir.path("rocsync.sock");
    // A file of the node's, outside every container's root (its /run is its own).
    let node = tempfile::Builder::new()
        .prefix("rocsync-pod-escape")
        .tempdir_in("/run")
        .unwrap();
    let shadow = node.path().join("namespace");
    std::fs::write(&shadow, "kube-system").unwrap();

    // A FIFO for the namespace file; a symlink to the node's file, in a pod on the
    // node's UTS namespace (hostNetwork: its host name is the node's, whatever HOSTNAME
    // says).
    let fifo = spec("ml-team", "fifo-pod", NamespaceFile::Fifo, true);
    let escape = spec(
        "ml-team",
        "escape-pod",
        NamespaceFile::SymlinkTo(shadow.clone()),
        false,
    );
    let (fifo_cgroup, escape_cgroup) =
        (PodCgroup::create(&hierarchy), PodCgroup::create(&hierarchy));
    let mut pods = Vec::new();
    for (spec, cgroup) in [(&fifo, &fifo_cgroup), (&escape, &escape_cgroup)] {
        let mut pod = start_in_pod(&dir, &exe, spec, cgroup, &["gated", "loop", "6000"]);
        let start = std::time::Instant::now();
        pod.open_when_tracked(&mut lines);
        assert!(start.elapsed() < Duration::from_secs(5), "tracking waited");
        pods.push(pod);
    }
    let fifo_pid = pods[0].child.id();
    assert_eq!(
        tracked(&sock, fifo_pid)["pod"],
        json!({
            "namespace": null,
            "name": "fifo-pod",
            "uid": fifo_cgroup.uid,
            "container": fifo_cgroup.container,
        })
    );
    assert_eq!(
        tracked(&sock, pods[1].child.id())["pod"],
        json!({
            "namespace": null,
            "name": null,
            "uid": escape_cgroup.uid,
            "container": escape_cgroup.container,
        })
    );
    assert!(lines.1.iter().any(|l| l.ends_with(&format!(
        "tracking pid {fifo_pid} ({}) in pod ?/fifo-pod",
        exe.display()
    ))));
    // Named by what is known only; the daemon still answers and still traces.
    let none = rocsync()
        .args(["trace", "--pod", "kube-system/escape-pod", "--socket"])
        .arg(&sock)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&none.stderr).contains("?/?, ?/fifo-pod"));
    let out = ask_daemon(
        &sock,
        &[
            "trace",
            "--pid",
            &fifo_pid.to_string(),
            "--duration",
            "200ms",
        ],
    );
    let t = read_json(Path::new(out.trim()));
    assert_eq!(t["rocsync"]["pod"]["name"], "fifo-pod");
    for mut pod in pods {
        assert!(wait_within(&mut pod.child, Duration::from_secs(20), "a pod").success());
    }
    stop(daemon);
}
