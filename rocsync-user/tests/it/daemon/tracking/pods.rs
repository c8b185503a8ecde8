//! Kubernetes identity without an API server: a scenario process in its own cgroup and
//! mount namespace arranged like a Kubernetes container (`common::pod`), its container
//! recorded on the node's side as containerd records it, is named by the real daemon —
//! in `rocsync status`, in the trace `rocsync trace --pod` writes, and in `/metrics` with
//! `--metric-labels namespace,pod`, whose counts per pod are the scenario's log; a pod
//! whose own files are hostile or forged (a FIFO, a symlink out of its root, another
//! pod's names) is named by the node's side only, and the daemon keeps answering. Needs root (eBPF, mounts, cgroups), a cgroup v2 hierarchy, `unshare`, and
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
    let mut flags = host_flags(dir.0.path());
    flags.extend(["--metric-labels".into(), "namespace,pod".into()]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let (daemon, mut lines) = start_daemon(&dir, &exe, &flags);
    let (addr, sock) = (metrics_addr(&lines), dir.path("rocsync.sock"));

    let cgroup = PodCgroup::create(&hierarchy);
    in_runtime(dir.0.path(), &cgroup, "ml-team", "trainer-0");
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
    let err = stderr_of(&none);
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
    assert!(stderr_of(&bad).contains("expected NAMESPACE/NAME"));

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
    let unlabelled: f64 = m
        .samples
        .iter()
        .filter(|s| s.0 == "rocsync_unlabelled_calls_total")
        .map(|s| s.2)
        .sum();
    assert_eq!(unlabelled, 0.0, "every pod's calls under its labels");
    stop(daemon);
    drop(cgroup);
}

/// One pod cannot take every labelled series: past `--max-series-per-pod` its calls are
/// counted in the node's series (and as unlabelled), so every call is still counted,
/// once, and the pod has exactly its cap of labelled series.
#[test]
fn a_pod_has_at_most_its_cap_of_labelled_series_and_every_call_is_counted() {
    let name = "a_pod_has_at_most_its_cap_of_labelled_series_and_every_call_is_counted";
    let Some((dir, exe, python)) = metrics_test(name) else {
        return;
    };
    let Some(hierarchy) = pod_test(name) else {
        return;
    };
    let mut flags = host_flags(dir.0.path());
    flags.extend(["--metric-labels", "pod", "--max-series-per-pod", "2"].map(String::from));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let (daemon, mut lines) = start_daemon(&dir, &exe, &flags);
    let addr = metrics_addr(&lines);
    let cgroup = PodCgroup::create(&hierarchy);
    in_runtime(dir.0.path(), &cgroup, "ml-team", "greedy-0");
    let greedy = spec("ml-team", "greedy-0", NamespaceFile::Plain, true);
    let mut pod = start_in_pod(
        &dir,
        &exe,
        &greedy,
        &cgroup,
        &["gated", "loop", "1500", "2"],
    );
    pod.open_when_tracked(&mut lines);
    assert!(wait_within(&mut pod.child, Duration::from_secs(20), "the pod").success());

    let m = Metrics::scrape(&python, &addr);
    let mut labelled = 0;
    let mut counted: BTreeMap<String, usize> = BTreeMap::new();
    for (metric, l, v) in &m.samples {
        if metric == "rocsync_sync_calls_total" {
            labelled += usize::from(l["pod"] == "greedy-0");
            *counted
                .entry(l["api"].as_str().unwrap().into())
                .or_default() += *v as usize;
        }
    }
    let mut logged: BTreeMap<String, usize> = BTreeMap::new();
    let log = read_log(&dir.path("greedy-0.log"));
    for l in probed(&log) {
        *logged.entry(l.api).or_default() += 1;
    }
    // A series per API and device: its APIs alone are more than its cap.
    assert!(logged.len() > 2, "the scenario calls {logged:?}");
    assert_eq!(labelled, 2, "the pod's labelled series");
    assert_eq!(counted, logged, "calls per API: /metrics, then the log");
    // Said why: the pod's cap, not the kernel's room.
    let unlabelled = |reason: &str| {
        m.samples
            .iter()
            .find(|(metric, l, _)| {
                metric == "rocsync_unlabelled_calls_total" && l["reason"] == reason
            })
            .map(|s| s.2 as usize)
    };
    let past_cap: usize = m
        .samples
        .iter()
        .filter(|(metric, l, _)| metric == "rocsync_sync_calls_total" && l["pod"] == "")
        .map(|s| s.2 as usize)
        .sum();
    assert!(past_cap > 0);
    assert_eq!(unlabelled("pod_cap"), Some(past_cap));
    assert_eq!(unlabelled("series_full"), Some(0));
    stop(daemon);
    drop(cgroup);
}

#[test]
fn a_pod_is_named_by_the_node_never_by_its_own_files() {
    let name = "a_pod_is_named_by_the_node_never_by_its_own_files";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let Some(hierarchy) = pod_test(name) else {
        return;
    };
    let flags = host_flags(dir.0.path());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let (daemon, mut lines) = start_daemon(&dir, &exe, &flags);
    let sock = dir.path("rocsync.sock");
    // A file of the node's, outside every container's root (its /run is its own).
    let node = tempfile::Builder::new()
        .prefix("rocsync-pod-escape")
        .tempdir_in("/run")
        .unwrap();
    let shadow = node.path().join("namespace");
    std::fs::write(&shadow, "kube-system").unwrap();

    // Both claim to be kube-system/etcd-0 (HOSTNAME, /etc/hostname, a namespace file
    // that is a FIFO, or a symlink to the node's file). The node says: the first is
    // ml-team/trainer-0 (containerd's bundle), the second is of ml-team, its name not
    // recorded (the kubelet's projected namespace only).
    let fifo = spec("kube-system", "etcd-0", NamespaceFile::Fifo, true);
    let escape = spec(
        "kube-system",
        "etcd-0",
        NamespaceFile::SymlinkTo(shadow.clone()),
        false,
    );
    let (named, unnamed) = (PodCgroup::create(&hierarchy), PodCgroup::create(&hierarchy));
    in_runtime(dir.0.path(), &named, "ml-team", "trainer-0");
    in_kubelet(dir.0.path(), &unnamed, "ml-team");
    let mut pods = Vec::new();
    for (spec, cgroup) in [(&fifo, &named), (&escape, &unnamed)] {
        let mut pod = start_in_pod(&dir, &exe, spec, cgroup, &["gated", "loop", "6000"]);
        let start = std::time::Instant::now();
        pod.open_when_tracked(&mut lines);
        assert!(start.elapsed() < Duration::from_secs(5), "tracking waited");
        pods.push(pod);
    }
    let (named_pid, unnamed_pid) = (pods[0].child.id(), pods[1].child.id());
    assert_eq!(
        tracked(&sock, named_pid)["pod"],
        json!({
            "namespace": "ml-team",
            "name": "trainer-0",
            "uid": named.uid,
            "container": named.container,
        })
    );
    assert_eq!(
        tracked(&sock, unnamed_pid)["pod"],
        json!({
            "namespace": "ml-team",
            "name": null,
            "uid": unnamed.uid,
            "container": unnamed.container,
        })
    );
    assert!(lines.1.iter().any(|l| l.ends_with(&format!(
        "tracking pid {named_pid} ({}) in pod ml-team/trainer-0",
        exe.display()
    ))));
    // Asking for the pod they claim to be finds neither.
    let none = rocsync()
        .args(["trace", "--pod", "kube-system/etcd-0", "--socket"])
        .arg(&sock)
        .output()
        .unwrap();
    let err = stderr_of(&none);
    assert!(!none.status.success());
    assert!(err.contains("ml-team/?, ml-team/trainer-0"), "{err}");
    // The one known by its UID alone is asked for by its UID.
    let out = ask_daemon(
        &sock,
        &["trace", "--pod", &unnamed.uid, "--duration", "200ms"],
    );
    let t = read_json(Path::new(out.trim()));
    assert_eq!(t["rocsync"]["pid"], unnamed_pid);
    assert_eq!(t["rocsync"]["pod"]["uid"], unnamed.uid.as_str());
    let out = ask_daemon(
        &sock,
        &["trace", "--pod", "ml-team/trainer-0", "--duration", "200ms"],
    );
    let t = read_json(Path::new(out.trim()));
    assert_eq!(t["rocsync"]["pid"], named_pid);
    assert_eq!(t["rocsync"]["pod"]["name"], "trainer-0");
    for mut pod in pods {
        assert!(wait_within(&mut pod.child, Duration::from_secs(20), "a pod").success());
    }
    stop(daemon);
}
