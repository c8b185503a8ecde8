//! A process's Kubernetes identity — namespace, pod name, pod UID, container id — from
//! what the node itself shows of it, with no API server:
//!
//! - **pod UID and container id**: its cgroup path (`/proc/PID/cgroup`), as kubelet names
//!   the cgroups it makes ([`cgroup`]: both cgroup drivers, every QoS class, v2 or v1).
//!   A process whose path names no pod is not in Kubernetes: [`pod_of`] says `None`, and
//!   nothing of its root or environment is read.
//! - **namespace**: the service-account file kubelet mounts into every container,
//!   `/var/run/secrets/kubernetes.io/serviceaccount/namespace`, read inside the process's
//!   own root ([`root`]). A pod with `automountServiceAccountToken: false` (or whose
//!   service account says so) has none: its namespace is unknown.
//! - **pod name**: `HOSTNAME` in its environment (the runtime sets it to the pod's host
//!   name, which kubelet makes the pod's name), else its `/etc/hostname` (kubelet's file,
//!   the same name). Not the pod's name where the host name is not: `spec.hostname` set
//!   (that name is reported), a name longer than 63 characters (kubelet cuts the host name
//!   there), and `hostNetwork: true` pods, which share the node's UTS namespace and so its
//!   host name — recognised (their UTS namespace is PID 1's) and reported unknown.
//!
//! Unknown parts are `None` here, `null` in `rocsync status --json` and in traces, `?` in
//! `rocsync status`, and empty label values in `/metrics`. Everything read from the
//! process's side (its root, its environment) is the process's to forge: it is bounded,
//! checked as the API server checks names (DNS-1123), and read off the caller's thread
//! with a deadline, since a container's own file system (FUSE) may never answer.

pub mod cgroup;
pub mod root;

use std::{
    os::{fd::AsFd as _, unix::fs::MetadataExt as _},
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use serde::{Deserialize, Serialize};

use crate::{environ, procfs};

/// Where kubelet mounts the pod's service-account namespace in each container.
pub const NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
/// How long a process's files may take to read before its names are taken as unknown.
const READ_WITHIN: Duration = Duration::from_millis(250);
/// Reads that never returned (a file system that does not answer) park a thread each;
/// past this many, names are no longer read at all.
const MAX_PARKED: usize = 8;

/// A process's pod, as far as the node shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pod {
    /// `None`: no service-account namespace file (see the module's notes).
    pub namespace: Option<String>,
    /// `None`: no host name that is the pod's (see the module's notes).
    pub name: Option<String>,
    /// The pod's UID.
    pub uid: String,
    /// The container's id; `None` for a process in the pod's own cgroup.
    pub container: Option<String>,
}

impl Pod {
    /// `NAMESPACE/NAME`, `?` for a part unknown.
    pub fn shown(&self) -> String {
        let part = |p: &Option<String>| p.clone().unwrap_or_else(|| "?".into());
        format!("{}/{}", part(&self.namespace), part(&self.name))
    }

    /// Whether it is the pod `namespace`/`name` (both known, both equal).
    pub fn is(&self, namespace: &str, name: &str) -> bool {
        self.namespace.as_deref() == Some(namespace) && self.name.as_deref() == Some(name)
    }
}

/// A pod as a user names it: `NAMESPACE/NAME` (`rocsync trace --pod`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodName {
    pub namespace: String,
    pub name: String,
}

impl PodName {
    /// From `NAMESPACE/NAME`, each checked as the API server checks them.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (namespace, name) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?}: expected NAMESPACE/NAME"))?;
        let pod = Self {
            namespace: namespace.into(),
            name: name.into(),
        };
        pod.check()?;
        Ok(pod)
    }

    /// Whether both parts are names Kubernetes gives (a request may come from anyone).
    pub fn check(&self) -> Result<(), String> {
        if !is_dns_label(&self.namespace) {
            return Err(format!(
                "namespace {:?}: not a Kubernetes namespace (a DNS-1123 label)",
                self.namespace
            ));
        }
        if !is_dns_subdomain(&self.name) {
            return Err(format!(
                "pod name {:?}: not a Kubernetes pod name (a DNS-1123 subdomain)",
                self.name
            ));
        }
        Ok(())
    }
}

impl std::fmt::Display for PodName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The Kubernetes pod of process `pid`, or `None` when its cgroup names no pod (not in
/// Kubernetes, or gone). Blocks at most about [`READ_WITHIN`].
pub fn pod_of(pid: u32) -> Option<Pod> {
    let ids = cgroup::parse(&procfs::cgroup(pid)?)?;
    let (namespace, name) = within(move || (namespace_of(pid), name_of(pid))).unwrap_or_default();
    Some(Pod {
        namespace,
        name,
        uid: ids.uid,
        container: ids.container,
    })
}

/// The service-account namespace in the process's root.
fn namespace_of(pid: u32) -> Option<String> {
    let root = root::of_process(pid)?;
    let text = root::read_small(root.as_fd(), NAMESPACE_FILE)?;
    checked(&text, is_dns_label)
}

/// The pod's name: its host name, unless that is the node's.
fn name_of(pid: u32) -> Option<String> {
    if !own_uts_namespace(pid) {
        return None;
    }
    if let Some(name) = environ::variable(pid, "HOSTNAME") {
        return checked(&name, is_dns_subdomain);
    }
    let root = root::of_process(pid)?;
    checked(
        &root::read_small(root.as_fd(), "/etc/hostname")?,
        is_dns_subdomain,
    )
}

/// Whether the process has a UTS namespace (host name) of its own, not the node's: PID
/// 1's (the daemon runs in the node's PID namespace), or — where PID 1's cannot be read
/// (a sandbox's init may refuse even root) — the caller's own.
fn own_uts_namespace(pid: u32) -> bool {
    let ns = |p: &str| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    let node = ns("/proc/1/ns/uts").or_else(|| ns("/proc/self/ns/uts"));
    match (ns(&format!("/proc/{pid}/ns/uts")), node) {
        (Some(own), Some(node)) => own != node,
        _ => false,
    }
}

/// A name from a file or a variable: one line (a final newline allowed), as `valid`.
fn checked(bytes: &[u8], valid: fn(&str) -> bool) -> Option<String> {
    let text = std::str::from_utf8(bytes).ok()?;
    let text = text.strip_suffix('\n').unwrap_or(text);
    valid(text).then(|| text.to_string())
}

/// A DNS-1123 label, as namespaces are: 1 to 63 of `a-z`, `0-9`, `-`, alphanumeric at
/// both ends.
pub fn is_dns_label(s: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    (1..=63).contains(&s.len())
        && s.bytes().all(|b| alnum(b) || b == b'-')
        && s.bytes().next().is_some_and(alnum)
        && s.bytes().last().is_some_and(alnum)
}

/// A DNS-1123 subdomain, as pod names are: labels joined by `.`, at most 253 in all.
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// `read()` on a thread of its own, its answer if it comes within [`READ_WITHIN`]; a read
/// that never returns keeps its thread (at most [`MAX_PARKED`] of them: then `None` at
/// once).
fn within<T: Send + 'static>(read: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    if IN_FLIGHT.fetch_add(1, Ordering::SeqCst) >= MAX_PARKED {
        IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
        return None;
    }
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let spawned = std::thread::Builder::new()
        .name("rocsync-pod".into())
        .spawn(move || {
            let answer = read();
            IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
            let _ = tx.send(answer);
        });
    if spawned.is_err() {
        IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
        return None;
    }
    rx.recv_timeout(READ_WITHIN).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_as_the_api_server_checks_them() {
        for good in [
            "default",
            "ml-team",
            "a",
            "kube-system",
            "a".repeat(63).as_str(),
        ] {
            assert!(is_dns_label(good), "{good}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "ML",
            "a_b",
            "a.b",
            "a b",
            "a\n",
            "\u{1b}[31m",
            "a".repeat(64).as_str(),
        ] {
            assert!(!is_dns_label(bad), "{bad:?}");
        }
        assert!(is_dns_subdomain("trainer-0.workers"));
        assert!(!is_dns_subdomain("trainer..0"));
        assert!(!is_dns_subdomain(&["a"; 128].join(".")));
        assert_eq!(
            checked(b"ml-team\n", is_dns_label).as_deref(),
            Some("ml-team")
        );
        assert_eq!(checked(b"ml-team\n\n", is_dns_label), None);
        assert_eq!(checked(b"\xff", is_dns_label), None);
    }

    #[test]
    fn a_pod_is_named_namespace_slash_name() {
        let p = PodName::parse("ml-team/trainer-0").unwrap();
        assert_eq!(
            (p.namespace.as_str(), p.name.as_str()),
            ("ml-team", "trainer-0")
        );
        assert_eq!(p.to_string(), "ml-team/trainer-0");
        for bad in ["trainer-0", "/x", "ml/", "ML/x", "ml/x/y", "ml/a_b"] {
            assert!(PodName::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_read_that_never_returns_is_given_up() {
        let start = std::time::Instant::now();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        assert_eq!(within(move || rx.recv().is_ok()), None);
        assert!(start.elapsed() < READ_WITHIN * 4);
        drop(tx);
        assert_eq!(within(|| 7), Some(7));
    }

    #[test]
    fn a_process_outside_kubernetes_has_no_pod() {
        // This test's own cgroup names no pod (CI does not run in Kubernetes here; where
        // it does, the answer must at least be whole).
        if let Some(p) = pod_of(std::process::id()) {
            assert!(cgroup::is_pod_uid(&p.uid));
        }
        assert_eq!(pod_of(u32::MAX), None);
        let p = Pod {
            namespace: None,
            name: Some("trainer-0".into()),
            uid: "u".into(),
            container: None,
        };
        assert_eq!(p.shown(), "?/trainer-0");
        assert!(!p.is("default", "trainer-0"));
    }
}
