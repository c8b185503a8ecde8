//! A pod's namespace and name as the node's own components wrote them, never as the pod
//! says (its files and its environment are its own to forge):
//!
//! 1. the container runtime's state for the container the cgroup names — the OCI bundle
//!    it made, whose annotations the CRI sets from the pod it runs: containerd's
//!    `RUNTIME_STATE/containerd/io.containerd.runtime.v2.task/k8s.io/<ID>/config.json`
//!    (`io.kubernetes.cri.sandbox-namespace`, `…-name`, `…-uid`), CRI-O's
//!    `RUNTIME_STATE/containers/storage/overlay-containers/<ID>/userdata/config.json`
//!    (`io.kubernetes.pod.namespace`, `…name`, `…uid`); the UID there must be the
//!    cgroup's pod UID, or nothing of it is used;
//! 2. else the kubelet's own directory of the pod, `KUBELET_ROOT/pods/<UID>/`: the
//!    namespace in the service-account volume it projects there (the pod's name is not
//!    there: its `etc-hosts` holds the host name, which a pod's author may set).
//!
//! `RUNTIME_STATE` is `/run` and `KUBELET_ROOT` `/var/lib/kubelet` (kubelet's
//! `--root-dir`) unless the daemon is told otherwise (`--runtime-state`,
//! `--kubelet-root`: a DaemonSet mounts the node's there). What is unknown stays `None`:
//! the pod UID is then its identity.

use std::{
    io::Read as _,
    path::{Path, PathBuf},
};

use serde_json::Value;

use super::names::{is_dns_label, is_dns_subdomain};

/// The longest OCI config read (containerd's are a few tens of KiB).
const MAX_CONFIG: u64 = 4 << 20;
/// The longest namespace file read.
const MAX_NAME: u64 = 256;

/// Where the node's components keep their state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostState {
    /// The container runtimes' state (`/run`).
    pub runtime_state: PathBuf,
    /// The kubelet's root directory (`/var/lib/kubelet`).
    pub kubelet_root: PathBuf,
}

impl Default for HostState {
    fn default() -> Self {
        Self {
            runtime_state: PathBuf::from(DEFAULT_RUNTIME_STATE),
            kubelet_root: PathBuf::from(DEFAULT_KUBELET_ROOT),
        }
    }
}

pub const DEFAULT_RUNTIME_STATE: &str = "/run";
pub const DEFAULT_KUBELET_ROOT: &str = "/var/lib/kubelet";

/// Each runtime's bundle config of a container, and its annotations' keys: namespace,
/// name, UID.
const RUNTIMES: [(&str, &str, [&str; 3]); 2] = [
    (
        "containerd/io.containerd.runtime.v2.task/k8s.io",
        "config.json",
        [
            "io.kubernetes.cri.sandbox-namespace",
            "io.kubernetes.cri.sandbox-name",
            "io.kubernetes.cri.sandbox-uid",
        ],
    ),
    (
        "containers/storage/overlay-containers",
        "userdata/config.json",
        [
            "io.kubernetes.pod.namespace",
            "io.kubernetes.pod.name",
            "io.kubernetes.pod.uid",
        ],
    ),
];

impl HostState {
    /// The namespace and name of pod `uid`, whose container `container` is (when the
    /// cgroup names one), as far as the node's state says.
    pub fn names(&self, uid: &str, container: Option<&str>) -> (Option<String>, Option<String>) {
        if let Some(names) = container.and_then(|c| self.in_runtime_bundle(uid, c)) {
            return names;
        }
        (self.namespace_from_kubelet(uid), None)
    }

    fn in_runtime_bundle(
        &self,
        uid: &str,
        container: &str,
    ) -> Option<(Option<String>, Option<String>)> {
        RUNTIMES
            .iter()
            .find_map(|(dir, file, [ns, name, pod_uid])| {
                let path = self.runtime_state.join(dir).join(container).join(file);
                let config: Value =
                    serde_json::from_slice(&read_bounded(&path, MAX_CONFIG)?).ok()?;
                let a = config.get("annotations")?;
                let get = |k: &str| a.get(k).and_then(Value::as_str);
                // Another pod's container under this id is no answer for this one.
                if get(pod_uid)? != uid {
                    return None;
                }
                let namespace = get(ns).filter(|s| is_dns_label(s)).map(String::from);
                let name = get(name).filter(|s| is_dns_subdomain(s)).map(String::from);
                Some((namespace, name))
            })
    }

    /// The namespace in the service-account volume the kubelet projects for the pod.
    fn namespace_from_kubelet(&self, uid: &str) -> Option<String> {
        let projected = self
            .kubelet_root
            .join("pods")
            .join(uid)
            .join("volumes/kubernetes.io~projected");
        let mut volumes: Vec<PathBuf> = std::fs::read_dir(projected)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .collect();
        volumes.sort();
        volumes.iter().find_map(|v| {
            let text = read_bounded(&v.join("namespace"), MAX_NAME)?;
            let text = String::from_utf8(text).ok()?;
            let text = text.trim_end_matches('\n');
            is_dns_label(text).then(|| text.to_string())
        })
    }
}

/// A regular file's content, at most `max` bytes (else `None`); opened without blocking
/// (what is no regular file is not read).
fn read_bounded(path: &Path, max: u64) -> Option<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= max).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "3f4c2b1a-9d8e-4f7a-b6c5-1e2d3c4b5a69";
    const ID: &str = "8d1a5f0c3e7b9a2d4c6e8f0a1b3c5d7e9f1a3b5c7d9e1f3a5b7c9d1e3f5a7b9c";

    fn state(dir: &Path) -> HostState {
        HostState {
            runtime_state: dir.join("run"),
            kubelet_root: dir.join("kubelet"),
        }
    }

    fn bundle(dir: &Path, runtime: usize, annotations: Value) {
        let (d, f, _) = RUNTIMES[runtime];
        let path = dir.join("run").join(d).join(ID).join(f);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let config = serde_json::json!({ "ociVersion": "1.0.2", "annotations": annotations });
        std::fs::write(path, config.to_string()).unwrap();
    }

    #[test]
    fn containerd_and_cri_o_bundles_name_the_pod() {
        for (i, [ns, name, uid]) in RUNTIMES.iter().map(|r| r.2).enumerate() {
            let dir = tempfile::tempdir().unwrap();
            bundle(
                dir.path(),
                i,
                serde_json::json!({ ns: "ml-team", name: "trainer-0", uid: UID }),
            );
            let got = state(dir.path()).names(UID, Some(ID));
            assert_eq!(got, (Some("ml-team".into()), Some("trainer-0".into())));
        }
    }

    #[test]
    fn a_bundle_of_another_pod_or_with_bad_names_is_not_taken() {
        let dir = tempfile::tempdir().unwrap();
        let [ns, name, uid] = RUNTIMES[0].2;
        bundle(
            dir.path(),
            0,
            serde_json::json!({ ns: "kube-system", name: "etcd-0", uid: "another" }),
        );
        assert_eq!(state(dir.path()).names(UID, Some(ID)), (None, None));
        bundle(
            dir.path(),
            0,
            serde_json::json!({ ns: "Kube System", name: "etcd\n0", uid: UID }),
        );
        assert_eq!(state(dir.path()).names(UID, Some(ID)), (None, None));
    }

    #[test]
    fn the_kubelets_projected_namespace_without_a_bundle() {
        let dir = tempfile::tempdir().unwrap();
        let sa = dir
            .path()
            .join("kubelet/pods")
            .join(UID)
            .join("volumes/kubernetes.io~projected/kube-api-access-x2z7q");
        std::fs::create_dir_all(&sa).unwrap();
        std::fs::write(sa.join("namespace"), "ml-team").unwrap();
        assert_eq!(
            state(dir.path()).names(UID, Some(ID)),
            (Some("ml-team".into()), None)
        );
        assert_eq!(state(dir.path()).names("other", None), (None, None));
    }
}
