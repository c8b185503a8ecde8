//! A scenario process arranged like a Kubernetes container, for the daemon's pod tests:
//! in a cgroup v2 directory named as kubelet's systemd driver names them
//! (`kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<UID>.slice/
//! cri-containerd-<ID>.scope`), with a mount namespace and a root of its own — a tmpfs
//! holding the host's `/usr`, `/lib`… and the test's directories (bound at the same paths),
//! its `/etc/hostname`, and the service-account namespace file reached through
//! `var/run -> /run` as in real images — entered with `pivot_root` as runc does, and
//! (unless it stands for a `hostNetwork` pod) a UTS namespace with the pod's host name.

use std::{
    ffi::CString,
    os::unix::{ffi::OsStrExt as _, process::CommandExt as _},
    path::{Path, PathBuf},
    process::Command,
    sync::Mutex,
    time::{Duration, Instant},
};

/// What the container's service-account namespace file is.
#[derive(Clone, Debug)]
pub(crate) enum NamespaceFile {
    /// The namespace, as kubelet writes it.
    Plain,
    /// A FIFO: a reader that opens it blocks until a writer comes.
    Fifo,
    /// An absolute symlink to a file of the node's (in a real `var/run` directory).
    SymlinkTo(PathBuf),
}

#[derive(Clone, Debug)]
pub(crate) struct PodSpec {
    pub namespace: String,
    pub name: String,
    pub namespace_file: NamespaceFile,
    /// A UTS namespace of its own (a `hostNetwork` pod shares the node's).
    pub own_uts: bool,
}

/// The parents every test's pod cgroup shares, made and removed under this lock.
static PARENTS: Mutex<()> = Mutex::new(());

/// A pod's cgroup, as kubelet's systemd driver names it; removed when dropped (whatever
/// is left in it killed first), its parents too once no other test's pod is in them.
pub(crate) struct PodCgroup {
    /// The cgroup v2 hierarchy's mount point.
    hierarchy: PathBuf,
    /// From the hierarchy: kubepods.slice, its QoS slice, the pod's, the container's.
    dirs: Vec<PathBuf>,
    pub uid: String,
    pub container: String,
}

impl PodCgroup {
    pub(crate) fn create(hierarchy: &Path) -> Self {
        let (uid, container) = ids();
        let pod = format!("kubepods-besteffort-pod{}.slice", uid.replace('-', "_"));
        let scope = format!("cri-containerd-{container}.scope");
        let parts = ["kubepods.slice", "kubepods-besteffort.slice", &pod, &scope];
        let mut dirs = Vec::new();
        let mut dir = hierarchy.to_path_buf();
        let _held = PARENTS.lock().unwrap_or_else(|e| e.into_inner());
        for p in parts {
            dir.push(p);
            match std::fs::create_dir(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => panic!("creating {}: {e}", dir.display()),
            }
            dirs.push(dir.clone());
        }
        PodCgroup {
            hierarchy: hierarchy.to_path_buf(),
            dirs,
            uid,
            container,
        }
    }

    fn leaf(&self) -> &Path {
        self.dirs.last().unwrap()
    }

    /// The command's process moves itself into the container's cgroup before its exec.
    pub(crate) fn enter_at_exec(&self, cmd: &mut Command) {
        let procs = CString::new(self.leaf().join("cgroup.procs").as_os_str().as_bytes()).unwrap();
        // SAFETY: between fork and exec only open/write/close, which are async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let written = libc::write(fd, b"0".as_ptr().cast(), 1);
                let error = std::io::Error::last_os_error();
                libc::close(fd);
                if written != 1 {
                    return Err(error);
                }
                Ok(())
            });
        }
    }

    /// Its path in `/proc/PID/cgroup`.
    pub(crate) fn path(&self) -> String {
        let rel = self.leaf().strip_prefix(&self.hierarchy).unwrap();
        format!("/{}", rel.display())
    }
}

impl Drop for PodCgroup {
    fn drop(&mut self) {
        let _ = std::fs::write(self.leaf().join("cgroup.kill"), "1");
        let _held = PARENTS.lock().unwrap_or_else(|e| e.into_inner());
        for (i, dir) in self.dirs.iter().enumerate().rev() {
            let start = Instant::now();
            // The pod's own dirs wait for the killed to go; a shared parent another
            // test's pod is in stays.
            while std::fs::remove_dir(dir).is_err()
                && i >= 2
                && start.elapsed() < Duration::from_secs(5)
            {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// A pod UID (a UUID, as the API server makes them) and a container id (64 hex digits),
/// new at each call.
fn ids() -> (String, String) {
    use std::hash::{BuildHasher as _, Hasher as _};
    let mut words = (0..4).map(|i| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(i);
        h.finish()
    });
    let (a, b, c, d) = (
        words.next().unwrap(),
        words.next().unwrap(),
        words.next().unwrap(),
        words.next().unwrap(),
    );
    let uid = format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        a >> 32,
        a & 0xffff,
        b & 0xfff,
        (b >> 16) & 0xfff,
        c & 0xffff_ffff_ffff
    );
    (uid, format!("{a:016x}{b:016x}{c:016x}{d:016x}"))
}

/// Builds the container's root and runs `program ARGS` in it (`sh` does the arranging,
/// then `exec`s: the command's pid is the program's).
const ARRANGE: &str = r#"set -eu
R=$1; shift
mount -t tmpfs -o mode=755 pod-root "$R"
for d in usr bin sbin lib lib32 lib64 libx32 dev proc; do
  if [ -L "/$d" ]; then ln -s "$(readlink "/$d")" "$R/$d"
  elif [ -d "/$d" ]; then mkdir "$R/$d"; mount --rbind "/$d" "$R/$d"; fi
done
for d in $POD_BIND; do [ -e "$R$d" ] || { mkdir -p "$R$d"; mount --bind "$d" "$R$d"; }; done
mkdir -p "$R/etc"
if [ -e /etc/ld.so.cache ]; then cp /etc/ld.so.cache "$R/etc/"; fi
printf '%s\n' "$POD_NAME" > "$R/etc/hostname"
SA=run/secrets/kubernetes.io/serviceaccount
mkdir -p "$R/var"
case "$POD_NS_FILE" in
  plain) mkdir -p "$R/$SA"; printf '%s' "$POD_NAMESPACE" > "$R/$SA/namespace"; ln -s /run "$R/var/run" ;;
  fifo) mkdir -p "$R/$SA"; mkfifo "$R/$SA/namespace"; ln -s /run "$R/var/run" ;;
  *) mkdir -p "$R/var/$SA"; ln -s "$POD_NS_FILE" "$R/var/$SA/namespace" ;;
esac
if [ "$POD_UTS" = own ]; then printf '%s' "$POD_NAME" > /proc/sys/kernel/hostname; fi
mkdir "$R/.old"; cd "$R"; pivot_root . .old; umount -l /.old; rmdir /.old
exec env -i HOSTNAME="$POD_NAME" SCENARIO_LOG="$POD_LOG" PATH=/usr/bin:/bin "$@"
"#;

/// `program ARGS` as a container of pod `spec` in `cgroup`, its root mounted on an empty
/// directory `mount_point`, its log `log`; `bind`: directories of the node it needs (the
/// program's, its libraries'), bound at the same paths.
pub(crate) fn in_pod(
    spec: &PodSpec,
    cgroup: &PodCgroup,
    mount_point: &Path,
    bind: &[&Path],
    log: &Path,
    program: &Path,
    args: &[&str],
) -> Command {
    std::fs::create_dir_all(mount_point).unwrap();
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private"]);
    if spec.own_uts {
        cmd.arg("--uts");
    }
    let ns_file = match &spec.namespace_file {
        NamespaceFile::Plain => "plain".into(),
        NamespaceFile::Fifo => "fifo".into(),
        NamespaceFile::SymlinkTo(p) => p.display().to_string(),
    };
    let bind: Vec<String> = bind.iter().map(|p| p.display().to_string()).collect();
    cmd.args(["sh", "-c", ARRANGE, "sh"])
        .arg(mount_point)
        .arg(program)
        .args(args)
        .env("POD_BIND", bind.join(" "))
        .env("POD_NAME", &spec.name)
        .env("POD_NAMESPACE", &spec.namespace)
        .env("POD_NS_FILE", ns_file)
        .env("POD_UTS", if spec.own_uts { "own" } else { "node" })
        .env("POD_LOG", log)
        .env(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        );
    cgroup.enter_at_exec(&mut cmd);
    cmd
}

/// The top directory of `path` (`/tmp` of `/tmp/x/y`): what a container binds whole.
pub(crate) fn top_dir(path: &Path) -> PathBuf {
    let mut c = path.components();
    let mut top = PathBuf::from(c.next().unwrap().as_os_str());
    top.push(c.next().unwrap().as_os_str());
    top
}

/// Where the cgroup v2 hierarchy is mounted (`/sys/fs/cgroup`, or
/// `/sys/fs/cgroup/unified` on a hybrid host).
pub(crate) fn cgroup2_mount() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mounts.lines().find_map(|line| {
        let (fields, fs) = line.split_once(" - ")?;
        let mount_point = fields.split(' ').nth(4)?;
        (fs.split(' ').next() == Some("cgroup2")).then(|| PathBuf::from(mount_point))
    })
}

/// The node's side of the test's pods, under `dir`: the flags that point the daemon at
/// it (`--runtime-state`, `--kubelet-root`), in place of the node's `/run` and
/// `/var/lib/kubelet`.
pub(crate) fn host_flags(dir: &Path) -> Vec<String> {
    vec![
        "--runtime-state".into(),
        dir.join("host/run").display().to_string(),
        "--kubelet-root".into(),
        dir.join("host/kubelet").display().to_string(),
    ]
}

/// Records `cgroup`'s container as containerd does for a pod `namespace/name`: its OCI
/// bundle's config, with the CRI's annotations (the pod's own files may say otherwise).
pub(crate) fn in_runtime(dir: &Path, cgroup: &PodCgroup, namespace: &str, name: &str) {
    let bundle = dir
        .join("host/run/containerd/io.containerd.runtime.v2.task/k8s.io")
        .join(&cgroup.container);
    std::fs::create_dir_all(&bundle).unwrap();
    let config = serde_json::json!({
        "ociVersion": "1.1.0",
        "annotations": {
            "io.kubernetes.cri.container-type": "container",
            "io.kubernetes.cri.sandbox-namespace": namespace,
            "io.kubernetes.cri.sandbox-name": name,
            "io.kubernetes.cri.sandbox-uid": cgroup.uid,
        }
    });
    std::fs::write(bundle.join("config.json"), config.to_string()).unwrap();
}

/// Records the service-account namespace the kubelet projects into pod `cgroup`'s
/// directory (its only name there).
pub(crate) fn in_kubelet(dir: &Path, cgroup: &PodCgroup, namespace: &str) {
    let sa = dir
        .join("host/kubelet/pods")
        .join(&cgroup.uid)
        .join("volumes/kubernetes.io~projected/kube-api-access-4xk2p");
    std::fs::create_dir_all(&sa).unwrap();
    std::fs::write(sa.join("namespace"), namespace).unwrap();
}
