//! The Kubernetes manifests (`deploy/kubernetes`), checked offline against the API's own
//! types and against what they deploy: every object validated strictly (kubernetes-validate's
//! schemas of Kubernetes 1.30 and 1.37; the ServiceMonitor against the prometheus-operator
//! CRD's models), a misspelt field refused, the DaemonSet agreeing with
//! `dist/rocsync.service` (capabilities, memory cap, stop timeout) and with its ConfigMap
//! (metrics port, state directory), the ConfigMap's file a configuration the daemon accepts,
//! and `kubectl kustomize` rendering what the test assembles. Needs `ROCSYNC_HTA_PYTHON`
//! (`cargo xtask test` sets it) and, for the rendering, `kubectl`; no root.

use std::{
    collections::BTreeSet,
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use serde_json::{Value, json};

use crate::common::*;

/// The oldest release with `securityContext.appArmorProfile` (1.29's schema refuses it),
/// and the newest kubernetes-validate knows.
const VERSIONS: [&str; 2] = ["1.30", "1.37"];

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes")
}

fn python(test: &str) -> Option<std::ffi::OsString> {
    let python = std::env::var_os("ROCSYNC_HTA_PYTHON");
    if python.is_none() {
        rocsync_tests::skip(
            test,
            "ROCSYNC_HTA_PYTHON is not set (cargo xtask test sets it)",
        );
    }
    python
}

/// `manifests.py ARGS` with `input` on stdin: its JSON answer.
fn script(python: &std::ffi::OsStr, args: &[&str], input: &str) -> Value {
    let mut child = Command::new(python)
        .arg(rocsync_tests::k8s_script())
        .args(args)
        .current_dir(dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "manifests.py {args:?}: {}",
        stderr_of(&out)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every document of the YAML `files` (in `deploy/kubernetes`; "-": `input`).
fn load(python: &std::ffi::OsStr, files: &[&str], input: &str) -> Vec<Value> {
    let args: Vec<&str> = ["load"].iter().chain(files).copied().collect();
    serde_json::from_value(script(python, &args, input)).unwrap()
}

/// Each document's refusal by the API's types, `None` where valid.
fn validate(python: &std::ffi::OsStr, docs: &[Value]) -> Vec<Option<String>> {
    let args: Vec<&str> = ["validate"].iter().chain(&VERSIONS).copied().collect();
    let input = serde_json::to_string(docs).unwrap();
    serde_json::from_value(script(python, &args, &input)).unwrap()
}

/// What kustomization.yaml makes, assembled as kustomize does (but for the generated
/// ConfigMap's hash suffix): its resources in order, every listed file present; the
/// ConfigMap from its generator's files; every object but the Namespace in the
/// kustomization's namespace; the image's tag set.
fn assembled(python: &std::ffi::OsStr) -> Vec<Value> {
    let k = &load(python, &["kustomization.yaml"], "")[0];
    let files = strs(&k["resources"]);
    for f in &files {
        assert!(dir().join(f).is_file(), "kustomization.yaml lists {f}");
    }
    let mut docs = load(python, &files, "");
    for generator in k["configMapGenerator"].as_array().unwrap() {
        let mut data = serde_json::Map::new();
        for f in strs(&generator["files"]) {
            let text = std::fs::read_to_string(dir().join(f)).unwrap();
            data.insert(f.to_string(), Value::String(text));
        }
        docs.push(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": generator["name"]}, "data": data,
        }));
    }
    for doc in &mut docs {
        if doc["kind"] != "Namespace" {
            doc["metadata"]["namespace"] = k["namespace"].clone();
        }
    }
    let image = &k["images"][0];
    let c = &mut one_mut(&mut docs, "DaemonSet")["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["image"], image["name"]);
    let tag = image["newTag"].as_str().unwrap();
    c["image"] = json!(format!("{}:{tag}", image["name"].as_str().unwrap()));
    docs
}

fn items(v: &Value) -> &Vec<Value> {
    v.as_array().unwrap()
}

fn strs(v: &Value) -> Vec<&str> {
    items(v).iter().map(|s| s.as_str().unwrap()).collect()
}

fn one<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let mut of = docs.iter().filter(|d| d["kind"] == kind);
    let doc = of.next().unwrap_or_else(|| panic!("no {kind}"));
    assert!(of.next().is_none(), "two of {kind}");
    doc
}

fn one_mut<'a>(docs: &'a mut [Value], kind: &str) -> &'a mut Value {
    docs.iter_mut().find(|d| d["kind"] == kind).unwrap()
}

/// A `Key=` setting of dist/rocsync.service.
fn unit(key: &str) -> String {
    let text = std::fs::read_to_string(dir().join("../../dist/rocsync.service")).unwrap();
    let prefix = format!("{key}=");
    let mut values = text.lines().filter_map(|l| l.strip_prefix(&prefix));
    let value = values.next().unwrap_or_else(|| panic!("no {key}"));
    assert!(values.next().is_none(), "{key} twice");
    value.to_string()
}

/// Bytes of a Kubernetes quantity (`1Gi`) or a systemd size (`1G`, base 1024).
fn bytes(size: &str) -> u64 {
    let size = size.trim_end_matches('i');
    let (n, shift) = match size.as_bytes().last() {
        Some(b'K') => (&size[..size.len() - 1], 10),
        Some(b'M') => (&size[..size.len() - 1], 20),
        Some(b'G') => (&size[..size.len() - 1], 30),
        _ => (size, 0),
    };
    n.parse::<u64>().unwrap() << shift
}

fn toml_file(path: &Path) -> toml::Table {
    std::fs::read_to_string(path).unwrap().parse().unwrap()
}

/// The pod's configuration: dist/rocsync.toml but for the address, and the daemon takes it.
#[test]
fn the_configmap_is_the_example_configuration_with_the_pods_address() {
    let mut pod = toml_file(&dir().join("rocsync.toml"));
    let mut example = toml_file(&dir().join("../../dist/rocsync.toml"));
    assert_eq!(pod["metrics_addr"].as_str(), Some("0.0.0.0:9464"));
    assert_eq!(example["metrics_addr"].as_str(), Some("127.0.0.1:9464"));
    pod.remove("metrics_addr");
    example.remove("metrics_addr");
    assert_eq!(
        pod, example,
        "deploy/kubernetes/rocsync.toml differs beyond metrics_addr"
    );
    let out = run_ok(
        rocsync()
            .args(["daemon", "--check", "--config"])
            .arg(dir().join("rocsync.toml")),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("0.0.0.0:9464"), "{text}");
}

#[test]
fn every_manifest_validates_strictly_and_a_misspelt_field_is_refused() {
    let Some(python) = python("every_manifest_validates_strictly_and_a_misspelt_field_is_refused")
    else {
        return;
    };
    let docs = assembled(&python);
    let kinds: BTreeSet<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    let kinds: Vec<&str> = kinds.into_iter().collect();
    let expected = "ConfigMap DaemonSet Namespace Service ServiceAccount ServiceMonitor";
    assert_eq!(kinds.join(" "), expected);
    // One typo each where a lenient reader would drop it unseen: a container's field, a
    // Service port's, and a field of the CRD's.
    let typos = [
        (
            "DaemonSet",
            "/spec/template/spec/containers/0",
            "readinessProbe",
            "readinesProbe",
        ),
        ("Service", "/spec/ports/0", "targetPort", "targetport"),
        (
            "ServiceMonitor",
            "/spec/endpoints/0",
            "interval",
            "intervall",
        ),
    ];
    let typos = typos.map(|(kind, at, field, typo)| {
        let mut doc = one(&docs, kind).clone();
        let object = doc.pointer_mut(at).unwrap().as_object_mut().unwrap();
        let value = object.remove(field).unwrap();
        object.insert(typo.into(), value);
        (typo, doc)
    });
    // One run: loading the CRD's models takes seconds.
    let all: Vec<Value> = docs
        .iter()
        .chain(typos.iter().map(|t| &t.1))
        .cloned()
        .collect();
    let refused = validate(&python, &all);
    for (doc, refused) in docs.iter().zip(&refused) {
        assert_eq!(refused, &None, "{}", doc["kind"]);
    }
    for ((typo, _), refused) in typos.iter().zip(&refused[docs.len()..]) {
        let why = refused
            .as_ref()
            .unwrap_or_else(|| panic!("{typo} was accepted"));
        assert!(why.contains(typo), "{typo}: {why}");
    }
}

#[test]
fn the_daemonset_is_the_units_daemon_on_every_gpu_node() {
    let Some(python) = python("the_daemonset_is_the_units_daemon_on_every_gpu_node") else {
        return;
    };
    let docs = assembled(&python);
    let pod = &one(&docs, "DaemonSet")["spec"]["template"];
    let spec = &pod["spec"];
    let c = &spec["containers"][0];
    assert_eq!(spec["hostPID"], true);
    assert_eq!(spec["hostNetwork"], Value::Null);
    let sc = &c["securityContext"];
    assert_eq!(sc["privileged"], Value::Null);
    assert_eq!(sc["runAsUser"], 0);
    assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
    let added: BTreeSet<String> = strs(&sc["capabilities"]["add"])
        .iter()
        .map(|c| format!("CAP_{c}"))
        .collect();
    let bounding = unit("CapabilityBoundingSet");
    let unit_caps: BTreeSet<String> = bounding.split_whitespace().map(String::from).collect();
    assert_eq!(added, unit_caps, "the unit's CapabilityBoundingSet");
    assert_eq!(
        bytes(c["resources"]["limits"]["memory"].as_str().unwrap()),
        bytes(&unit("MemoryMax"))
    );
    let stop: u64 = unit("TimeoutStopSec").parse().unwrap();
    assert!(spec["terminationGracePeriodSeconds"].as_u64().unwrap() >= stop);
    assert_eq!(c["image"], format!("rocsync:{}", env!("CARGO_PKG_VERSION")));

    // The daemon's configuration is the ConfigMap's file, mounted where --config names it.
    let config_map = one(&docs, "ConfigMap");
    let file = config_map["data"]["rocsync.toml"].as_str().unwrap();
    let config: toml::Table = file.parse().unwrap();
    let volumes = items(&spec["volumes"]);
    let volume = |name: &str| volumes.iter().find(|v| v["name"] == name).unwrap();
    let mounts = items(&c["volumeMounts"]);
    let mounted_at = |path: &str| mounts.iter().find(|m| m["mountPath"] == path);
    let args = strs(&c["args"]);
    let at = args.iter().position(|a| *a == "--config").unwrap();
    let config_path = Path::new(args[at + 1]);
    let m = mounted_at(config_path.parent().unwrap().to_str().unwrap()).unwrap();
    let v = volume(m["name"].as_str().unwrap());
    assert_eq!(v["configMap"]["name"], config_map["metadata"]["name"]);
    assert!(config_map["data"][config_path.file_name().unwrap().to_str().unwrap()].is_string());

    // Host mounts: exactly the socket's directory, the state directory, BTF and what
    // names pods (the runtimes' bundles, the kubelet's pods, read-only), each at its own
    // path, so that the node's clients and this daemon meet, and the daemon's defaults
    // (runtime_state /run, kubelet_root /var/lib/kubelet) read the node's.
    let state_dir = config["state_dir"].as_str().unwrap();
    let host: BTreeSet<&str> = volumes
        .iter()
        .filter_map(|v| v["hostPath"]["path"].as_str())
        .collect();
    assert_eq!(
        host,
        BTreeSet::from([
            "/run/rocsync",
            state_dir,
            "/sys/kernel/btf",
            "/run/containerd/io.containerd.runtime.v2.task",
            "/run/containers/storage/overlay-containers",
            "/var/lib/kubelet/pods",
        ])
    );
    for path in &host {
        let m = mounted_at(path).unwrap_or_else(|| panic!("{path} is not mounted at {path}"));
        assert_eq!(
            volume(m["name"].as_str().unwrap())["hostPath"]["path"],
            *path
        );
    }
    assert_eq!(volume("run")["hostPath"]["type"], "DirectoryOrCreate");
    for read_only in [
        "/sys/kernel/btf",
        "/run/containerd/io.containerd.runtime.v2.task",
        "/run/containers/storage/overlay-containers",
        "/var/lib/kubelet/pods",
    ] {
        assert_eq!(
            mounted_at(read_only).unwrap()["readOnly"],
            true,
            "{read_only}"
        );
    }

    // One port throughout: the configuration's, the container's, the annotation's, the
    // probes', the Service's and the ServiceMonitor's.
    let addr: std::net::SocketAddr = config["metrics_addr"].as_str().unwrap().parse().unwrap();
    assert!(
        addr.ip().is_unspecified(),
        "{addr}: the kubelet and Prometheus reach the pod's IP"
    );
    let port = &c["ports"][0];
    assert_eq!(
        (&port["name"], port["containerPort"].as_u64()),
        (&json!("metrics"), Some(addr.port() as u64))
    );
    let annotations = &pod["metadata"]["annotations"];
    assert_eq!(annotations["prometheus.io/scrape"], "true");
    assert_eq!(annotations["prometheus.io/port"], addr.port().to_string());
    for probe in ["readinessProbe", "livenessProbe"] {
        assert_eq!(
            c[probe]["httpGet"],
            json!({"path": "/healthz", "port": "metrics"}),
            "{probe}"
        );
    }
    let svc = one(&docs, "Service");
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], "metrics");
    let labels = pod["metadata"]["labels"].as_object().unwrap();
    for (k, v) in svc["spec"]["selector"].as_object().unwrap() {
        assert_eq!(labels.get(k), Some(v), "the Service selects the pods");
    }
    let sm = one(&docs, "ServiceMonitor");
    assert_eq!(
        sm["spec"]["endpoints"][0]["port"],
        svc["spec"]["ports"][0]["name"]
    );
    for (k, v) in sm["spec"]["selector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(
            &svc["metadata"]["labels"][k], v,
            "the ServiceMonitor selects the Service"
        );
    }

    // GPU nodes only, tainted or not.
    let required = "/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution";
    let terms = &spec.pointer(required).unwrap()["nodeSelectorTerms"];
    let keys: Vec<&str> = items(terms)
        .iter()
        .map(|t| t["matchExpressions"][0]["key"].as_str().unwrap())
        .collect();
    assert!(
        keys.iter().any(|k| k.starts_with("nvidia.com/")) && keys.iter().any(|k| k.contains("amd")),
        "{keys:?}"
    );
    for taint in ["amd.com/gpu", "nvidia.com/gpu"] {
        assert!(
            items(&spec["tolerations"])
                .iter()
                .any(|t| t["key"] == taint && t["effect"] == "NoSchedule"),
            "{taint}"
        );
    }
}

#[test]
fn kustomize_renders_what_the_test_assembles() {
    let name = "kustomize_renders_what_the_test_assembles";
    let Some(python) = python(name) else {
        return;
    };
    let Ok(out) = Command::new("kubectl").arg("kustomize").arg(dir()).output() else {
        rocsync_tests::skip(name, "kubectl is not installed (scripts/setup)");
        return;
    };
    assert_ok(&out);
    let rendered = load(&python, &["-"], &String::from_utf8(out.stdout).unwrap());
    for (doc, refused) in rendered.iter().zip(validate(&python, &rendered)) {
        assert_eq!(refused, None, "{}", doc["kind"]);
    }
    let mut assembled = assembled(&python);
    assert_eq!(rendered.len(), assembled.len());
    // The generated name carries a hash of the data, and the DaemonSet names it.
    let generated = one(&rendered, "ConfigMap")["metadata"]["name"].clone();
    assert!(
        generated.as_str().unwrap().starts_with("rocsync-config-"),
        "{generated}"
    );
    one_mut(&mut assembled, "ConfigMap")["metadata"]["name"] = generated.clone();
    let ds = one_mut(&mut assembled, "DaemonSet");
    let volumes = ds.pointer_mut("/spec/template/spec/volumes").unwrap();
    for v in volumes.as_array_mut().unwrap() {
        if v["configMap"].is_object() {
            v["configMap"]["name"] = generated.clone();
        }
    }
    for doc in &assembled {
        assert!(
            rendered.contains(doc),
            "kustomize made another {}: {doc:#}",
            doc["kind"]
        );
    }
}
