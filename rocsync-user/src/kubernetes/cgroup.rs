//! A pod's UID and a container's id from a process's cgroup path, as kubelet names the
//! cgroups it makes. Two drivers, three QoS classes:
//!
//! - systemd: `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<UID>.slice/
//!   cri-containerd-<ID>.scope` (the UID's `-` written `_`; `crio-` and `docker-` scopes
//!   for the other runtimes; a guaranteed pod has no QoS level:
//!   `kubepods-pod<UID>.slice`; kubelet under a slice of its own, as kind runs it, prefixes
//!   every name: `kubelet-kubepods-…`);
//! - cgroupfs: `/kubepods/burstable/pod<UID>/<ID>` (guaranteed: `/kubepods/pod<UID>/<ID>`;
//!   CRI-O writes `crio-<ID>`).
//!
//! The path comes from the kernel, but the kernel takes the names from whoever made the
//! cgroups (a container may make its own below its scope, a user their own below a
//! delegated `user@UID.service`): the kubelet's part must start at the cgroup root (or,
//! read from inside a cgroup namespace, right after the kernel's `..`) and hold only
//! names the kubelet makes down to the pod's; only the component right after the pod's
//! is its container; every part is checked (UUID, hex) before it is used.

/// What the cgroup path says of a process in a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodCgroup {
    /// The pod's UID, as the API server writes it (`-`, lower case).
    pub uid: String,
    /// The container's id (64 hex digits); `None` in the pod's own cgroup.
    pub container: Option<String>,
}

/// Container runtimes' scope prefixes (systemd) and id prefixes (cgroupfs, CRI-O).
const RUNTIME_PREFIXES: [&str; 3] = ["cri-containerd-", "crio-", "docker-"];

/// The pod of a `/proc/PID/cgroup` text: its unified (`0::`) line first; on a host
/// where kubelet drives the v1 controllers, the pod is on their lines.
pub fn parse(text: &str) -> Option<PodCgroup> {
    let paths = text.lines().filter_map(|line| {
        let mut f = line.splitn(3, ':');
        let (id, _controllers, path) = (f.next()?, f.next()?, f.next()?);
        Some((id != "0", path))
    });
    let mut paths: Vec<(bool, &str)> = paths.collect();
    paths.sort_by_key(|(v1, _)| *v1);
    paths.into_iter().find_map(|(_, path)| of_path(path))
}

/// The pod of one cgroup path (in a cgroup namespace it may start with `/..`).
pub fn of_path(path: &str) -> Option<PodCgroup> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    // `..` only where the reader's cgroup namespace is below the root: the kernel writes
    // them, no process can.
    let climbed = parts.iter().take_while(|&&p| p == "..").count();
    let parts = &parts[climbed..];
    // At the root, the kubelet's own top cgroup; within a namespace, we are in the
    // kubelet's tree already (the daemon's pod is), so any of its names.
    let top = parts.first()?;
    let anchored = match climbed {
        0 => KUBELET_TOPS.contains(top),
        _ => kubelet_name(top),
    };
    if !anchored {
        return None;
    }
    // Down to the pod through the kubelet's names only: anyone's directory named
    // `pod…` (or `kubepods…`) below a cgroup of their own is no pod.
    let at = parts.iter().position(|p| pod_uid(p).is_some())?;
    if !parts[..at].iter().all(|p| kubelet_name(p)) {
        return None;
    }
    let uid = pod_uid(parts[at])?;
    let container = parts.get(at + 1).and_then(|p| container_id(p));
    Some(PodCgroup { uid, container })
}

/// The kubelet's top cgroups: its own (cgroupfs, systemd) and, as kind runs it, under
/// a slice of its own.
const KUBELET_TOPS: [&str; 3] = ["kubepods", "kubepods.slice", "kubelet.slice"];

/// A name the kubelet gives a cgroup above a pod's: its tops, a QoS class's (cgroupfs
/// `burstable`, systemd `kubepods-burstable.slice`, prefixed `kubelet-` under kind).
fn kubelet_name(part: &str) -> bool {
    let slice = part
        .strip_suffix(".slice")
        .map(|s| s.strip_prefix("kubelet-").unwrap_or(s));
    KUBELET_TOPS.contains(&part)
        || matches!(part, "burstable" | "besteffort")
        || slice
            .is_some_and(|s| matches!(s, "kubepods" | "kubepods-burstable" | "kubepods-besteffort"))
        || pod_uid(part).is_some()
}

/// A pod's component: `pod<UID>` (cgroupfs) or `…kubepods…-pod<UID_>.slice` (systemd).
fn pod_uid(part: &str) -> Option<String> {
    let raw = match part.strip_suffix(".slice") {
        Some(slice) => {
            let (parent, uid) = slice.rsplit_once("-pod")?;
            if !parent.contains("kubepods") {
                return None;
            }
            uid
        }
        None => part.strip_prefix("pod")?,
    };
    let uid = raw.replace('_', "-");
    is_pod_uid(&uid).then_some(uid)
}

/// A container's component: `<ID>`, `<runtime>-<ID>` or `<runtime>-<ID>.scope`.
fn container_id(part: &str) -> Option<String> {
    let part = part.strip_suffix(".scope").unwrap_or(part);
    let id = RUNTIME_PREFIXES
        .iter()
        .find_map(|p| part.strip_prefix(p))
        .unwrap_or(part);
    is_container_id(id).then(|| id.to_string())
}

/// A pod UID: a UUID as the API server makes them, or a static pod's 32 hex digits (its
/// manifest's hash).
pub fn is_pod_uid(s: &str) -> bool {
    let hex = |p: &str| {
        p.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let groups: Vec<&str> = s.split('-').collect();
    let uuid = groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12]);
    (uuid && groups.iter().all(|g| hex(g))) || (s.len() == 32 && hex(s))
}

/// A container id: 64 lower-case hex digits (containerd, CRI-O and Docker alike).
pub fn is_container_id(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "3f4c2b1a-9d8e-4f7a-b6c5-1e2d3c4b5a69";
    const ID: &str = "8d1a5f0c3e7b9a2d4c6e8f0a1b3c5d7e9f1a3b5c7d9e1f3a5b7c9d1e3f5a7b9c";

    fn pod(container: Option<&str>) -> Option<PodCgroup> {
        Some(PodCgroup {
            uid: UID.into(),
            container: container.map(String::from),
        })
    }

    fn systemd_uid() -> String {
        UID.replace('-', "_")
    }

    #[test]
    fn a_kubepods_cgroup_made_anywhere_but_the_root_is_no_pod() {
        let u = systemd_uid();
        let fake = format!("kubepods.slice/kubepods-pod{u}.slice/cri-containerd-{ID}.scope");
        // A user's delegated cgroup (systemd's user@UID.service), or any other.
        for above in [
            "/user.slice/user-1000.slice/user@1000.service",
            "/system.slice",
        ] {
            assert_eq!(of_path(&format!("{above}/{fake}")), None, "{above}");
        }
        // Made by a container below its scope: the process is its real pod's.
        let real = "00000000-0000-0000-0000-000000000000";
        let nested = format!(
            "/kubepods.slice/kubepods-pod{}.slice/cri-containerd-{ID}.scope/{fake}",
            real.replace('-', "_")
        );
        assert_eq!(of_path(&nested).unwrap().uid, real);
        // cgroupfs alike, and a pod directory under a non-kubelet name.
        assert_eq!(of_path(&format!("/home/kubepods/pod{UID}/{ID}")), None);
        assert_eq!(of_path(&format!("/kubepods/mine/pod{UID}/{ID}")), None);
        // Read from inside a cgroup namespace: after the kernel's `..`, the kubelet's
        // names only.
        assert_eq!(
            of_path(&format!(
                "/../../kubepods-burstable.slice/kubepods-burstable-pod{u}.slice/cri-containerd-{ID}.scope"
            )),
            pod(Some(ID))
        );
        assert_eq!(
            of_path(&format!(
                "/../../../user.slice/user-1000.slice/user@1000.service/{fake}"
            )),
            None
        );
    }

    #[test]
    fn systemd_driver_each_qos_class_and_runtime() {
        let u = systemd_uid();
        for (path, runtime) in [
            (
                format!(
                    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{u}.slice/cri-containerd-{ID}.scope"
                ),
                "containerd",
            ),
            (
                format!(
                    "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{u}.slice/crio-{ID}.scope"
                ),
                "CRI-O",
            ),
            // Guaranteed: no QoS level.
            (
                format!("/kubepods.slice/kubepods-pod{u}.slice/docker-{ID}.scope"),
                "Docker",
            ),
            // kubelet in a slice of its own (kind), every name prefixed.
            (
                format!(
                    "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod{u}.slice/cri-containerd-{ID}.scope"
                ),
                "kind",
            ),
        ] {
            assert_eq!(parse(&format!("0::{path}\n")), pod(Some(ID)), "{runtime}");
        }
    }

    #[test]
    fn cgroupfs_driver_each_qos_class() {
        for path in [
            format!("/kubepods/burstable/pod{UID}/{ID}"),
            format!("/kubepods/besteffort/pod{UID}/crio-{ID}"),
            format!("/kubepods/pod{UID}/{ID}"),
        ] {
            assert_eq!(of_path(&path), pod(Some(ID)), "{path}");
        }
    }

    #[test]
    fn a_static_pods_uid_is_its_manifests_hash() {
        let hash = "a1b2c3d4e5f60718293a4b5c6d7e8f90";
        let got = of_path(&format!("/kubepods/burstable/pod{hash}/{ID}")).unwrap();
        assert_eq!(got.uid, hash);
    }

    #[test]
    fn v1_controllers_and_cgroup_namespaces() {
        // A hybrid host whose kubelet drives the v1 controllers.
        let text = format!(
            "12:pids:/kubepods/burstable/pod{UID}/{ID}\n4:memory:/kubepods/burstable/pod{UID}/{ID}\n0::/system.slice/containerd.service\n"
        );
        assert_eq!(parse(&text), pod(Some(ID)));
        // Seen from inside another cgroup namespace.
        let u = systemd_uid();
        let path = format!(
            "0::/../../kubepods-besteffort.slice/kubepods-besteffort-pod{u}.slice/cri-containerd-{ID}.scope"
        );
        assert_eq!(parse(&path), pod(Some(ID)));
    }

    #[test]
    fn only_the_component_after_the_pods_is_its_container() {
        let u = systemd_uid();
        // The pod's own cgroup, and CRI-O's monitor beside the containers.
        let base =
            format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{u}.slice");
        assert_eq!(of_path(&base), pod(None));
        assert_eq!(
            of_path(&format!("{base}/crio-conmon-{ID}.scope")),
            pod(None)
        );
        // A cgroup the container made below its scope does not stand for it.
        let nested = format!("{base}/cri-containerd-{ID}.scope/init.scope");
        assert_eq!(of_path(&nested), pod(Some(ID)));
        let other = "0".repeat(64);
        assert_eq!(of_path(&format!("{base}/x/{other}")), pod(None));
    }

    #[test]
    fn outside_kubernetes_is_none() {
        for path in [
            "0::/user.slice/user-1000.slice/session-2.scope".to_string(),
            format!("0::/system.slice/docker-{ID}.scope"),
            format!("0::/pod{UID}/{ID}"),
            "0::/".into(),
            "".into(),
            "garbage".into(),
        ] {
            assert_eq!(parse(&path), None, "{path}");
        }
    }

    #[test]
    fn names_that_are_not_ids_are_refused() {
        for bad in [
            "pod3F4C2B1A-9D8E-4F7A-B6C5-1E2D3C4B5A69",
            "pod3f4c2b1a-9d8e-4f7a-b6c5-1e2d3c4b5a6",
            "pod3f4c2b1a-9d8e-4f7a-b6c5-1e2d3c4b5a69-",
            "pod../../etc",
            "pod",
            "pod\u{1b}[31m",
        ] {
            assert_eq!(of_path(&format!("/kubepods/{bad}/{ID}")), None, "{bad}");
        }
        let long = format!("{ID}0");
        let got = of_path(&format!("/kubepods/pod{UID}/{long}")).unwrap();
        assert_eq!(got.container, None);
        let upper = ID.to_uppercase();
        let got = of_path(&format!("/kubepods/pod{UID}/{upper}")).unwrap();
        assert_eq!(got.container, None);
    }
}
