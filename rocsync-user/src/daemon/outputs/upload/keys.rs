//! Where a trace goes in the store: its object key, and the node's name in it.

/// The object key of `file`: a job's traces (a process in a communicator) under
/// `job-<its world communicator's id>/` first, so that one listing finds every node's.
pub(super) fn key(
    prefix: &str,
    node: &str,
    (pod, job): (Option<(&str, &str)>, Option<&str>),
    file: &str,
) -> String {
    let mut parts: Vec<String> = Vec::new();
    if !prefix.is_empty() {
        parts.push(prefix.into());
    }
    if let Some(job) = job {
        parts.push(format!("job-{job}"));
    }
    parts.push(node.into());
    if let Some((namespace, name)) = pod {
        parts.extend([namespace.into(), name.into()]);
    }
    parts.push(file.into());
    parts.join("/")
}

/// The node's name in object keys: `node_name` where set, else `NODE_NAME` (a
/// DaemonSet's downward API), else the host name.
pub(crate) fn node_name(configured: Option<&str>) -> String {
    let name = configured
        .map(str::to_string)
        .or_else(|| std::env::var("NODE_NAME").ok())
        .unwrap_or_else(|| {
            rustix::system::uname()
                .nodename()
                .to_string_lossy()
                .into_owned()
        });
    // A key part: no '/', nothing a store would read as a path step.
    let safe: String = name
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '-' | '_' => c,
            _ => '_',
        })
        .collect();
    match safe.trim_start_matches('.') {
        "" => "unnamed-node".into(),
        s => s.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_the_node_and_the_pod() {
        assert_eq!(
            key(
                "fleet",
                "gpu-7",
                (Some(("ml", "train-0")), None),
                "stall-x.json"
            ),
            "fleet/gpu-7/ml/train-0/stall-x.json"
        );
        assert_eq!(key("", "gpu-7", (None, None), "t.json"), "gpu-7/t.json");
        // One job's traces, whatever their node, under one prefix.
        assert_eq!(
            key("fleet", "gpu-7", (None, Some("0xabc")), "hang-x.json"),
            "fleet/job-0xabc/gpu-7/hang-x.json"
        );
        assert_eq!(node_name(Some("a/b c")), "a_b_c");
        assert_eq!(node_name(Some("..")), "unnamed-node");
    }
}
