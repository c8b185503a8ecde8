//! The pods of the tracked processes: each process's identity, read once when it is first
//! tracked ([`kubernetes::pod_of`]: a pod's processes keep their cgroup and root), and —
//! with `--metric-labels` — the label group the kernel counts its calls in.
//!
//! A label group is one set of label values (`namespace`, `pod`, as configured); group 0
//! is the empty values', counted in the node's series (`METRICS`), so processes outside
//! Kubernetes cost nothing more. A group whose processes have all gone is kept
//! [`RETIRE_AFTER`], so the last counts are scraped, then its series leave `/metrics`
//! (as a container's do in cAdvisor's) and the kernel's entries are removed.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

use anyhow::{Result, bail};

use crate::kubernetes::{self, HostState, Pod, PodName};

/// How long an ended group's series stay on `/metrics`.
pub(crate) const RETIRE_AFTER: Duration = Duration::from_secs(300);
/// Labelled series the kernel holds (per CPU, preallocated): a pod counts a series per
/// API and device it calls, some tens.
pub(crate) const LABELLED_SERIES: u32 = 1024;

/// The labels `--metric-labels` adds to the per-API series of processes in Kubernetes
/// (empty values for the others): the number of series grows with the pods.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct MetricLabels {
    pub namespace: bool,
    pub pod: bool,
}

impl MetricLabels {
    /// The labels on, as the settings name them.
    pub(crate) fn names(&self) -> Vec<String> {
        let on = [("namespace", self.namespace), ("pod", self.pod)];
        (on.into_iter().filter(|(_, on)| *on))
            .map(|(n, _)| n.to_string())
            .collect()
    }

    /// From `namespace`, `pod` (each once at most; a flag's value may be `a,b`).
    pub(crate) fn parse(list: &[String]) -> Result<Self> {
        let mut labels = Self::default();
        for name in list.iter().flat_map(|l| l.split(',')).map(str::trim) {
            let on = match name {
                "namespace" => &mut labels.namespace,
                "pod" => &mut labels.pod,
                other => bail!("metric_labels: {other:?}: the labels are namespace and pod"),
            };
            if std::mem::replace(on, true) {
                bail!("metric_labels: {name} is named twice");
            }
        }
        Ok(labels)
    }

    /// Whether any label is on.
    pub(crate) fn any(&self) -> bool {
        self.namespace || self.pod
    }
}

/// The values of the configured labels (`""` for a label off, or unknown).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct LabelValues {
    pub namespace: String,
    pub pod: String,
}

struct Group {
    id: u32,
    /// Since when none of its processes is tracked.
    idle_since: Option<Instant>,
}

pub(crate) struct Pods {
    labels: MetricLabels,
    /// Where the node's state names pods.
    host: HostState,
    /// Each tracked process's pod (`None`: not in Kubernetes) and label group.
    of_pid: BTreeMap<u32, (Option<Pod>, u32)>,
    groups: BTreeMap<LabelValues, Group>,
    next_group: u32,
}

impl Pods {
    pub(crate) fn new(labels: MetricLabels, host: HostState) -> Self {
        Self {
            labels,
            host,
            of_pid: BTreeMap::new(),
            groups: BTreeMap::new(),
            next_group: 1,
        }
    }

    /// The pod of a process newly tracked (its cgroup, as read); returns its label
    /// group.
    pub(crate) fn track(&mut self, pid: u32, cgroup: Option<&str>) -> u32 {
        let pod = cgroup.and_then(|c| kubernetes::pod_of_cgroup(c, &self.host));
        self.track_as(pid, pod)
    }

    fn track_as(&mut self, pid: u32, pod: Option<Pod>) -> u32 {
        let values = self.values_of(pod.as_ref());
        let group = match values == LabelValues::default() {
            true => 0,
            false => {
                let next = &mut self.next_group;
                let g = self.groups.entry(values).or_insert_with(|| {
                    *next += 1;
                    Group {
                        id: *next - 1,
                        idle_since: None,
                    }
                });
                g.idle_since = None;
                g.id
            }
        };
        self.of_pid.insert(pid, (pod, group));
        group
    }

    fn values_of(&self, pod: Option<&Pod>) -> LabelValues {
        let value = |on: bool, v: Option<&Option<String>>| match (on, v) {
            (true, Some(Some(v))) => v.clone(),
            _ => String::new(),
        };
        LabelValues {
            namespace: value(self.labels.namespace, pod.map(|p| &p.namespace)),
            pod: value(self.labels.pod, pod.map(|p| &p.name)),
        }
    }

    /// The label group `pid`'s calls are counted in (0: the node's series).
    pub(crate) fn group_of(&self, pid: u32) -> u32 {
        self.of_pid.get(&pid).map_or(0, |(_, g)| *g)
    }

    pub(crate) fn pod(&self, pid: u32) -> Option<&Pod> {
        self.of_pid.get(&pid)?.0.as_ref()
    }

    /// A process gone.
    pub(crate) fn forget(&mut self, pid: u32) {
        self.of_pid.remove(&pid);
    }

    /// Groups none of whose processes is tracked since [`RETIRE_AFTER`]: forgotten here,
    /// their numbers returned so that their series are removed from the kernel.
    pub(crate) fn retire(&mut self, now: Instant) -> Vec<u32> {
        let live: BTreeSet<u32> = self.of_pid.values().map(|(_, g)| *g).collect();
        let mut retired = Vec::new();
        self.groups.retain(|_, g| {
            if live.contains(&g.id) {
                g.idle_since = None;
                return true;
            }
            let since = *g.idle_since.get_or_insert(now);
            let keep = now.duration_since(since) < RETIRE_AFTER;
            if !keep {
                retired.push(g.id);
            }
            keep
        });
        retired
    }

    /// The label values of every group, by number (group 0's are empty).
    pub(crate) fn label_values(&self) -> BTreeMap<u32, LabelValues> {
        let mut out: BTreeMap<u32, LabelValues> =
            self.groups.iter().map(|(v, g)| (g.id, v.clone())).collect();
        out.insert(0, LabelValues::default());
        out
    }

    pub(crate) fn labels(&self) -> MetricLabels {
        self.labels
    }

    /// The tracked processes of pod `namespace`/`name`, of those `pids`.
    pub(crate) fn of_pod(&self, pids: impl IntoIterator<Item = u32>, named: &PodName) -> Vec<u32> {
        pids.into_iter()
            .filter(|&p| self.pod(p).is_some_and(|pod| pod.is(named)))
            .collect()
    }

    /// The pods known, as `NAMESPACE/NAME` (`?` for a part unknown), each once.
    pub(crate) fn known(&self) -> Vec<String> {
        let shown: BTreeSet<String> = self
            .of_pid
            .values()
            .filter_map(|(p, _)| Some(p.as_ref()?.shown()))
            .collect();
        shown.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(namespace: Option<&str>, name: &str) -> Option<Pod> {
        Some(Pod {
            namespace: namespace.map(String::from),
            name: Some(name.into()),
            uid: format!("uid-{name}"),
            container: None,
        })
    }

    const BOTH: MetricLabels = MetricLabels {
        namespace: true,
        pod: true,
    };

    #[test]
    fn processes_of_one_pod_share_a_group_and_the_rest_count_in_the_nodes() {
        let mut pods = Pods::new(BOTH, HostState::default());
        let a = pods.track_as(10, pod(Some("ml"), "trainer-0"));
        assert_eq!(pods.track_as(11, pod(Some("ml"), "trainer-0")), a);
        let b = pods.track_as(12, pod(Some("ml"), "trainer-1"));
        assert!(a != 0 && b != 0 && a != b);
        assert_eq!(pods.track_as(13, None), 0, "outside Kubernetes");
        assert_eq!(pods.track_as(14, pod(None, "x")), pods.group_of(14));
        assert_ne!(pods.group_of(14), 0, "a name alone is a label value");
        assert_eq!(pods.label_values()[&a].pod, "trainer-0");
        assert_eq!(pods.label_values()[&0], LabelValues::default());
        let named = PodName::parse("ml/trainer-0").unwrap();
        assert_eq!(pods.of_pod([10, 11, 12, 13], &named), [10, 11]);
        assert_eq!(pods.known(), ["?/x", "ml/trainer-0", "ml/trainer-1"]);
    }

    #[test]
    fn without_labels_every_process_counts_in_the_nodes_series() {
        let mut pods = Pods::new(MetricLabels::default(), HostState::default());
        assert_eq!(pods.track_as(10, pod(Some("ml"), "trainer-0")), 0);
        assert_eq!(pods.pod(10).unwrap().shown(), "ml/trainer-0");
        // Namespaces only: a namespace's pods share a group.
        let labels = MetricLabels {
            namespace: true,
            pod: false,
        };
        let mut pods = Pods::new(labels, HostState::default());
        let a = pods.track_as(10, pod(Some("ml"), "trainer-0"));
        assert_eq!(pods.track_as(11, pod(Some("ml"), "trainer-1")), a);
        assert_eq!(pods.track_as(12, pod(None, "x")), 0);
    }

    #[test]
    fn an_ended_groups_series_stay_a_while_then_go() {
        let mut pods = Pods::new(BOTH, HostState::default());
        let g = pods.track_as(10, pod(Some("ml"), "trainer-0"));
        let t0 = Instant::now();
        assert!(pods.retire(t0).is_empty());
        pods.forget(10);
        assert!(pods.retire(t0).is_empty());
        assert!(pods.retire(t0 + RETIRE_AFTER / 2).is_empty());
        // Back before its time: kept, and counted anew from then.
        assert_eq!(pods.track_as(11, pod(Some("ml"), "trainer-0")), g);
        pods.forget(11);
        assert!(pods.retire(t0 + RETIRE_AFTER).is_empty());
        assert_eq!(pods.retire(t0 + RETIRE_AFTER * 2), [g]);
        assert!(!pods.label_values().contains_key(&g));
        let again = pods.track_as(12, pod(Some("ml"), "trainer-0"));
        assert_ne!(again, g, "a retired number is not given again");
    }

    #[test]
    fn metric_labels_are_off_unless_named_and_flags_win() {
        let labels =
            |v: &[&str]| MetricLabels::parse(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(labels(&[]).unwrap(), MetricLabels::default());
        assert!(!labels(&[]).unwrap().any());
        let both = MetricLabels {
            namespace: true,
            pod: true,
        };
        assert_eq!(labels(&["namespace,pod"]).unwrap(), both);
        assert_eq!(labels(&["pod", "namespace"]).unwrap(), both);
        let e = labels(&["pod", "container"]).unwrap_err().to_string();
        assert!(e.contains("\"container\""), "{e}");
        assert!(labels(&["pod,pod"]).is_err());
        let flags = crate::daemon::config::ConfigFlags {
            metric_labels: vec!["namespace".into()],
            ..Default::default()
        };
        let c = crate::daemon::config::DaemonConfig::load(&flags).unwrap();
        assert_eq!(
            c.metric_labels,
            MetricLabels {
                namespace: true,
                pod: false
            }
        );
    }
}
