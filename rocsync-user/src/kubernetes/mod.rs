//! A process's Kubernetes identity — namespace, pod name, pod UID, container id — from
//! what the node itself shows of it, with no API server, and nothing of what the process
//! could write:
//!
//! - **pod UID and container id**: its cgroup path (`/proc/PID/cgroup`), as kubelet names
//!   the cgroups it makes ([`cgroup`]: both cgroup drivers, every QoS class, v2 or v1,
//!   anchored at the root: a user's own cgroups are no pod's). A process whose path names
//!   no pod is not in Kubernetes: [`pod_of`] says `None`.
//! - **namespace and name**: the container runtime's state for that container (the CRI's
//!   annotations in the OCI bundle it made, their pod UID checked against the cgroup's),
//!   else the namespace the kubelet projects into the pod's directory ([`host`]).
//!   Never the pod's own service-account file or `HOSTNAME`: any container can write
//!   those, and name itself `kube-system/etcd-0`.
//!
//! Unknown parts are `None` here, `null` in `rocsync status --json` and in traces, `?` in
//! `rocsync status`, and empty label values in `/metrics`; the pod's UID is then its
//! identity (upload keys, `rocsync trace --pod UID`).

pub mod cgroup;
pub mod host;
mod names;

use serde::{Deserialize, Serialize};

use crate::os::procfs;

pub use host::{DEFAULT_KUBELET_ROOT, DEFAULT_RUNTIME_STATE, HostState};
pub use names::{is_dns_label, is_dns_subdomain};

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

    /// Whether it is the pod a user named: by its UID, or by namespace and name (both
    /// known, both equal).
    pub fn is(&self, named: &PodName) -> bool {
        match &named.uid {
            Some(uid) => &self.uid == uid,
            None => {
                self.namespace.as_deref() == Some(named.namespace.as_str())
                    && self.name.as_deref() == Some(named.name.as_str())
            }
        }
    }

    /// Its parts in object keys: `NAMESPACE/NAME` where both are known, else `_uid/UID`
    /// (`_` is in no namespace's name: no key of a named pod can be taken).
    pub fn key_parts(&self) -> (String, String) {
        match (&self.namespace, &self.name) {
            (Some(ns), Some(name)) => (ns.clone(), name.clone()),
            _ => ("_uid".into(), self.uid.clone()),
        }
    }
}

/// A pod as a user names it: `NAMESPACE/NAME`, or its UID (`rocsync trace --pod`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodName {
    pub namespace: String,
    pub name: String,
    /// Named by its UID instead (`namespace` and `name` empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

impl PodName {
    /// From `NAMESPACE/NAME` or a pod UID, checked as the API server checks them.
    pub fn parse(s: &str) -> Result<Self, String> {
        if cgroup::is_pod_uid(s) {
            return Ok(Self {
                namespace: String::new(),
                name: String::new(),
                uid: Some(s.into()),
            });
        }
        let (namespace, name) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?}: expected NAMESPACE/NAME or a pod UID"))?;
        let pod = Self {
            namespace: namespace.into(),
            name: name.into(),
            uid: None,
        };
        pod.check()?;
        Ok(pod)
    }

    /// Whether both parts are names Kubernetes gives (a request may come from anyone).
    pub fn check(&self) -> Result<(), String> {
        if let Some(uid) = &self.uid {
            return match cgroup::is_pod_uid(uid) && self.namespace.is_empty() {
                true => Ok(()),
                false => Err(format!("pod UID {uid:?}: not a pod UID")),
            };
        }
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
        match &self.uid {
            Some(uid) => write!(f, "{uid}"),
            None => write!(f, "{}/{}", self.namespace, self.name),
        }
    }
}

/// The Kubernetes pod of process `pid`, or `None` when its cgroup names no pod (not in
/// Kubernetes, or gone); its names as `host` says them.
pub fn pod_of(pid: u32, host: &HostState) -> Option<Pod> {
    pod_of_cgroup(&procfs::cgroup(pid)?, host)
}

/// The pod a process's `/proc/PID/cgroup` text names, its names as `host` says them.
pub fn pod_of_cgroup(cgroup: &str, host: &HostState) -> Option<Pod> {
    let ids = cgroup::parse(cgroup)?;
    let (namespace, name) = host.names(&ids.uid, ids.container.as_deref());
    Some(Pod {
        namespace,
        name,
        uid: ids.uid,
        container: ids.container,
    })
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
    fn a_process_outside_kubernetes_has_no_pod() {
        // This test's own cgroup names no pod (CI does not run in Kubernetes here; where
        // it does, the answer must at least be whole).
        if let Some(p) = pod_of(std::process::id(), &HostState::default()) {
            assert!(cgroup::is_pod_uid(&p.uid));
        }
        assert_eq!(pod_of(u32::MAX, &HostState::default()), None);
        let p = Pod {
            namespace: None,
            name: Some("trainer-0".into()),
            uid: "u".into(),
            container: None,
        };
        assert_eq!(p.shown(), "?/trainer-0");
        assert!(!p.is(&PodName::parse("default/trainer-0").unwrap()));
        // Known by its UID alone: that is its identity, in keys and in --pod.
        let uid = "3f4c2b1a-9d8e-4f7a-b6c5-1e2d3c4b5a69";
        let p = Pod {
            namespace: None,
            name: None,
            uid: uid.into(),
            container: None,
        };
        assert!(p.is(&PodName::parse(uid).unwrap()));
        assert_eq!(p.key_parts(), ("_uid".into(), uid.into()));
    }
}
