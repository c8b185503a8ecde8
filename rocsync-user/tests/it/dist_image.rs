//! The container image `cargo xtask dist` builds (`$ROCSYNC_DIST/rocsync-VERSION.oci.tar`):
//! an OCI archive whose layout, manifest and config hold what the DaemonSet runs; and the
//! image run as the DaemonSet runs it, tracking a scenario started outside it, with
//! `/metrics` counting the scenario's calls exactly as its log says.
//!
//! How it runs: a real container runtime, Debian's runc (no daemon), on the bundle umoci
//! unpacks from the archive (the image config turned into a runtime config, as containerd
//! does). Then the pod's settings from deploy/kubernetes/daemonset.yaml: the host's pid
//! namespace, exactly its added capabilities (checked in /proc), no new privileges, a read-only
//! root, the ConfigMap's file at /etc/rocsync, /run/rocsync and /var/lib/rocsync from the
//! "node" (directories of this test), /sys/kernel/btf. What differs from a pod: the host's
//! network namespace (the test reads /metrics on 127.0.0.1, and other tests' daemons run
//! beside it, so `--metrics-addr 127.0.0.1:0` and `--include-exe` are appended to the
//! image's command), no seccomp profile and no memory limit. crun (podman's runtime) cannot
//! run here: it refuses this machine's hybrid cgroup v1/v2 layout; runc runs it.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use serde_json::{Value, json};

use crate::common::{daemon::*, *};
use rocsync_tests::read_log;

const VERSION: &str = env!("CARGO_PKG_VERSION");

#[test]
fn the_image_runs_the_daemonset_daemon_which_counts_a_host_process_exactly() {
    let name = "the_image_runs_the_daemonset_daemon_which_counts_a_host_process_exactly";
    let Some(dist) = std::env::var_os("ROCSYNC_DIST") else {
        rocsync_tests::skip(name, "ROCSYNC_DIST is not set (cargo xtask test sets it)");
        return;
    };
    let archive = Path::new(&dist).join(format!("rocsync-{VERSION}.oci.tar"));
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let layout = dir.path("oci");
    std::fs::create_dir(&layout).unwrap();
    run_ok(
        Command::new("tar")
            .arg("-xf")
            .arg(&archive)
            .arg("-C")
            .arg(&layout),
    );
    let config = check_layout(&layout);
    let (entrypoint, cmd) = (&config["config"]["Entrypoint"], &config["config"]["Cmd"]);
    assert_eq!(entrypoint, &json!(["/usr/local/bin/rocsync"]));
    assert_eq!(
        cmd,
        &json!(["daemon", "--config", "/etc/rocsync/rocsync.toml"])
    );
    let daemonset = std::fs::read_to_string(repo().join("deploy/kubernetes/daemonset.yaml"));
    let daemonset = daemonset.unwrap();
    assert!(daemonset.contains("command: [/usr/local/bin/rocsync]"));
    assert!(daemonset.contains("args: [daemon, --config, /etc/rocsync/rocsync.toml]"));

    // The bundle: umoci's rootfs and runtime config, then the DaemonSet's settings.
    let bundle = dir.path("bundle");
    let image = format!("{}:rocsync:{VERSION}", layout.display());
    run_ok(
        Command::new("umoci")
            .args(["unpack", "--image", &image])
            .arg(&bundle),
    );
    let spec_path = bundle.join("config.json");
    let mut spec: Value = serde_json::from_slice(&std::fs::read(&spec_path).unwrap()).unwrap();
    let args = spec["process"]["args"].as_array().unwrap().clone();
    let image_args: Vec<Value> = [entrypoint, cmd]
        .iter()
        .flat_map(|v| v.as_array().unwrap().clone())
        .collect();
    assert_eq!(
        args, image_args,
        "the runtime runs the image's entrypoint + cmd"
    );
    let (node_run, node_state, configmap) =
        (dir.path("run"), dir.path("state"), dir.path("configmap"));
    for d in [&node_run, &node_state, &configmap] {
        std::fs::create_dir(d).unwrap();
    }
    std::fs::copy(
        repo().join("deploy/kubernetes/rocsync.toml"),
        configmap.join("rocsync.toml"),
    )
    .unwrap();
    as_the_daemonset(
        &mut spec,
        &daemonset,
        &exe,
        &[
            (&configmap, "/etc/rocsync", true),
            (&node_run, "/run/rocsync", false),
            (&node_state, "/var/lib/rocsync", false),
            (Path::new("/sys/kernel/btf"), "/sys/kernel/btf", true),
        ],
    );
    std::fs::write(&spec_path, serde_json::to_vec_pretty(&spec).unwrap()).unwrap();

    let tmp = dir.0.path().file_name().unwrap().to_string_lossy();
    let id = format!(
        "rocsync-test-{}{}",
        std::process::id(),
        tmp.replace('.', "-")
    );
    let mut container = Container::run(&bundle, &id);
    let mut lines = Lines::of(container.0.stderr.take().unwrap());
    lines.wait_for("SIGTERM stops");
    let addr = metrics_addr(&lines);
    // The daemon runs with exactly the DaemonSet's capabilities.
    let state = run_ok(Command::new("runc").args(["state", &id])).stdout;
    let pid = serde_json::from_slice::<Value>(&state).unwrap()["pid"].clone();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .unwrap();
    let want = added_capabilities(&daemonset)
        .iter()
        .fold(0, |m, c| m | 1 << cap_bit(c));
    assert_eq!(u64::from_str_radix(eff.trim(), 16).unwrap(), want, "{eff}");

    // A process of the host, started after the daemon, held until it is tracked.
    let log = dir.path("scenario.log");
    let mut target = Gated::start(
        Command::new(&exe)
            .args(["gated", "basic"])
            .env("SCENARIO_LOG", &log),
    );
    target.open_when_tracked(&mut lines);
    assert!(target.child.wait().unwrap().success());
    let logged = probed(&read_log(&log));
    let mut apis = std::collections::BTreeMap::<&str, u64>::new();
    for l in &logged {
        *apis.entry(l.api.as_str()).or_default() += 1;
    }
    assert!(apis.len() > 5, "{apis:?}");
    for (api, calls) in &apis {
        assert_eq!(calls_counted(&addr, api), *calls, "{api} calls");
    }
    // A node-local client reaches it through the node's /run/rocsync; its state is on the
    // node.
    let status = daemon_status(&node_run.join("rocsync.sock"));
    assert!(status.is_object(), "{status}");
    assert!(node_run.join("daemon.lock").exists());

    // SIGTERM (what the kubelet sends): runc passes it on, the daemon exits 0.
    container.stop();
}

/// The archive's layout: `oci-layout`, an index of one manifest named
/// `rocsync:VERSION`, the manifest's config and layers by their media types, every blob
/// matching its digest. Returns the image config.
fn check_layout(layout: &Path) -> Value {
    let read =
        |p: PathBuf| -> Value { serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap() };
    assert_eq!(
        read(layout.join("oci-layout"))["imageLayoutVersion"],
        "1.0.0"
    );
    let index = read(layout.join("index.json"));
    assert_eq!(index["schemaVersion"], 2);
    let manifests = index["manifests"].as_array().unwrap();
    assert_eq!(manifests.len(), 1, "{index}");
    let m = &manifests[0];
    assert_eq!(m["mediaType"], "application/vnd.oci.image.manifest.v1+json");
    let name = &m["annotations"]["org.opencontainers.image.ref.name"];
    assert_eq!(name, &json!(format!("rocsync:{VERSION}")));
    let blob = |d: &Value| -> PathBuf {
        let digest = d["digest"].as_str().unwrap();
        let path = layout
            .join("blobs/sha256")
            .join(digest.strip_prefix("sha256:").unwrap());
        let sum = run_ok(Command::new("sha256sum").arg(&path)).stdout;
        let sum = String::from_utf8(sum).unwrap();
        assert_eq!(
            format!("sha256:{}", &sum[..64]),
            digest,
            "{}",
            path.display()
        );
        let size = std::fs::metadata(&path).unwrap().len();
        assert_eq!(d["size"].as_u64(), Some(size), "{}", path.display());
        path
    };
    let manifest = read(blob(m));
    assert_eq!(manifest["schemaVersion"], 2);
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.oci.image.config.v1+json"
    );
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1, "{manifest}");
    assert_eq!(
        layers[0]["mediaType"],
        "application/vnd.oci.image.layer.v1.tar+gzip"
    );
    blob(&layers[0]);
    let config = read(blob(&manifest["config"]));
    assert_eq!(config["architecture"], "amd64");
    assert_eq!(config["os"], "linux");
    let c = &config["config"];
    assert_eq!(c["Env"], json!(["PATH=/usr/local/bin"]));
    assert!(c["ExposedPorts"]["9464/tcp"].is_object(), "{c}");
    let label = |k: &str| c["Labels"][format!("org.opencontainers.image.{k}")].clone();
    assert_eq!(label("version"), VERSION);
    assert_eq!(label("revision").as_str().map(str::len), Some(40), "{c}");
    // No home page is published: no placeholder address stands in for one.
    assert_eq!(label("source"), Value::Null, "{c}");
    config
}

/// The pod's settings on umoci's runtime config (see the module's comment).
fn as_the_daemonset(spec: &mut Value, daemonset: &str, exe: &Path, mounts: &[(&Path, &str, bool)]) {
    let process = &mut spec["process"];
    process["terminal"] = json!(false);
    let args = process["args"].as_array_mut().unwrap();
    args.extend(["--metrics-addr", "127.0.0.1:0", "--include-exe"].map(Value::from));
    args.push(json!(exe.to_str().unwrap()));
    let caps: Vec<String> = added_capabilities(daemonset)
        .iter()
        .map(|c| format!("CAP_{c}"))
        .collect();
    // As containerd gives them to a uid-0 container: no inheritable or ambient ones.
    process["capabilities"] = json!({"bounding": caps, "effective": caps, "permitted": caps});
    process["noNewPrivileges"] = json!(true);
    spec["root"]["readonly"] = json!(true);
    let linux = &mut spec["linux"];
    let namespaces = linux["namespaces"].as_array_mut().unwrap();
    namespaces.retain(|n| n["type"] != "pid" && n["type"] != "network");
    let all = spec["mounts"].as_array_mut().unwrap();
    for (source, destination, ro) in mounts {
        let mut options = vec!["rbind", "nosuid", "nodev"];
        options.push(if *ro { "ro" } else { "rw" });
        all.push(json!({"destination": destination, "type": "bind",
                        "source": source, "options": options}));
    }
}

/// The DaemonSet's `capabilities: add:` list.
fn added_capabilities(daemonset: &str) -> Vec<String> {
    let mut lines = daemonset.lines().skip_while(|l| l.trim() != "add:").skip(1);
    let caps: Vec<String> = std::iter::from_fn(|| lines.next())
        .map_while(|l| l.trim().strip_prefix("- ").map(str::to_string))
        .collect();
    assert!(caps.contains(&"SYS_ADMIN".to_string()), "{caps:?}");
    caps
}

/// A capability's number (linux/capability.h), for those the DaemonSet may add.
fn cap_bit(name: &str) -> u32 {
    let bits = [
        ("CHOWN", 0),
        ("DAC_READ_SEARCH", 2),
        ("KILL", 5),
        ("SYS_PTRACE", 19),
        ("SYS_ADMIN", 21),
        ("SYS_RESOURCE", 24),
        ("PERFMON", 38),
        ("BPF", 39),
        ("CHECKPOINT_RESTORE", 40),
    ];
    let bit = bits.iter().find(|(n, _)| *n == name);
    bit.unwrap_or_else(|| panic!("add {name} to cap_bit")).1
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `runc run` of a bundle, in the foreground (it forwards signals to the container's
/// process and removes the container when that exits); ended and removed if the test
/// fails midway.
struct Container(Child, String);

impl Container {
    fn run(bundle: &Path, id: &str) -> Self {
        let child = Command::new("runc")
            .args(["run", "--bundle"])
            .arg(bundle)
            .arg(id)
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("runc (scripts/setup installs it)");
        Container(child, id.to_string())
    }

    fn stop(&mut self) {
        // SAFETY: signals the runc this test started.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let status = wait_within(&mut self.0, Duration::from_secs(15), "the container");
        assert!(status.success(), "{status:?}");
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            // SAFETY: signals the runc this test started.
            unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
            let _ = self.0.wait();
        }
        let _ = Command::new("runc")
            .args(["delete", "--force", &self.1])
            .stderr(Stdio::null())
            .status();
    }
}
