//! The per-API series as `/metrics` shows them, with the Kubernetes labels when
//! `--metric-labels` asks for them: each label group's series (the kernel counts a
//! labelled process's calls in its group's) under its values, the node's series — the
//! processes outside Kubernetes, or whose values are unknown — under empty ones. Every call
//! is in exactly one of them, so the sums over the labels are the node's totals.

use std::{collections::BTreeMap, fmt::Write as _};

use anyhow::Result;
use rocsync_common::{MetricKey, MetricValue};

use crate::daemon::{
    tracking::discovery::Tracker,
    tracking::pods::{LabelValues, MetricLabels},
};

/// One series: an API on a device, of the processes with some label values.
#[derive(Clone, Debug)]
pub(crate) struct Series {
    pub key: MetricKey,
    pub value: MetricValue,
    /// `,namespace="…",pod="…"` as configured; empty without labels.
    pub labels: String,
    /// Of `value.calls`, those the budget's duty cycle estimated (`estimate.rs`).
    pub estimated: u64,
    /// Its label group (0: the node's).
    pub group: u32,
}

/// Calls of labelled processes counted without their labels: (series full, pod cap).
pub(super) type Unlabelled = (u64, u64);

/// What the kernel counted, as series, with the calls the duty cycle `estimated`; with
/// labels, also the calls of labelled processes counted without them (the kernel's
/// labelled series full).
pub(crate) fn read(
    tracker: &Tracker,
    estimated: &BTreeMap<(u32, u32), u64>,
) -> Result<(Vec<Series>, Option<Unlabelled>)> {
    let probes = &tracker.probes;
    let mut node = probes.metrics()?;
    let labels = tracker.pods.labels();
    let mut groups = match labels.any() {
        true => probes.group_metrics()?,
        false => Vec::new(),
    };
    with_early(&mut node, &mut groups, &tracker.early);
    with_early(&mut node, &mut groups, estimated);
    if !labels.any() {
        let series = of(node, Vec::new(), &BTreeMap::new(), labels);
        return Ok((with_estimated(series, estimated), None));
    }
    let values = tracker.pods.label_values();
    let series = of(node, groups, &values, labels);
    Ok((
        with_estimated(series, estimated),
        Some(probes.unlabelled_calls()?),
    ))
}

/// Adds the calls processes made before they were tracked (or, estimated, while the duty
/// cycle had their probes off) to their series (made where the kernel has none yet).
fn with_early(
    node: &mut Vec<(MetricKey, MetricValue)>,
    groups: &mut Vec<(u32, MetricKey, MetricValue)>,
    early: &BTreeMap<(u32, u32), u64>,
) {
    for (&(group, slot), &n) in early {
        let key = MetricKey::of_slot(slot);
        let value = match group {
            0 => match node.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v,
                None => {
                    node.push((key, MetricValue::default()));
                    &mut node.last_mut().expect("pushed").1
                }
            },
            g => match groups.iter_mut().find(|(gg, k, _)| *gg == g && *k == key) {
                Some((_, _, v)) => v,
                None => {
                    groups.push((g, key, MetricValue::default()));
                    &mut groups.last_mut().expect("pushed").2
                }
            },
        };
        value.calls += n;
    }
    node.sort_by_key(|(k, _)| *k);
    groups.sort_by_key(|(g, k, _)| (*g, *k));
}

/// The node's series and the groups', each under its label values.
pub(super) fn of(
    node: Vec<(MetricKey, MetricValue)>,
    groups: Vec<(u32, MetricKey, MetricValue)>,
    values: &BTreeMap<u32, LabelValues>,
    labels: MetricLabels,
) -> Vec<Series> {
    let empty = LabelValues::default();
    let node = node.into_iter().map(|(k, v)| (0, &empty, k, v));
    // A group's values are known until its series are removed with it.
    let groups = groups
        .into_iter()
        .filter_map(|(g, k, v)| Some((g, values.get(&g)?, k, v)));
    node.chain(groups)
        .map(|(group, values, key, value)| Series {
            key,
            value,
            labels: rendered(values, labels),
            estimated: 0,
            group,
        })
        .collect()
}

/// Each series' estimated calls, from the duty cycle's (by group and slot).
fn with_estimated(mut series: Vec<Series>, estimated: &BTreeMap<(u32, u32), u64>) -> Vec<Series> {
    for s in &mut series {
        let slot = MetricKey::slot(s.key.api, s.key.device);
        s.estimated = slot.map_or(0, |slot| {
            estimated.get(&(s.group, slot)).copied().unwrap_or(0)
        });
    }
    series
}

fn rendered(values: &LabelValues, labels: MetricLabels) -> String {
    let mut out = String::new();
    for (on, name, value) in [
        (labels.namespace, "namespace", &values.namespace),
        (labels.pod, "pod", &values.pod),
    ] {
        if on {
            let _ = write!(out, ",{name}=\"{}\"", escaped(value));
        }
    }
    out
}

/// A label value as the text format writes it (names are checked DNS names already;
/// escaped all the same, as the format asks).
fn escaped(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(calls: u64) -> MetricValue {
        MetricValue {
            calls,
            ..MetricValue::default()
        }
    }

    #[test]
    fn each_group_under_its_values_and_the_node_under_empty_ones() {
        let key = MetricKey { api: 3, device: 0 };
        let values = BTreeMap::from([
            (0, LabelValues::default()),
            (
                1,
                LabelValues {
                    namespace: "ml".into(),
                    pod: "trainer-0".into(),
                },
            ),
        ]);
        let both = MetricLabels {
            namespace: true,
            pod: true,
        };
        let s = of(
            vec![(key, value(2))],
            vec![(1, key, value(5)), (9, key, value(1))],
            &values,
            both,
        );
        let got: Vec<(&str, u64)> = s
            .iter()
            .map(|s| (s.labels.as_str(), s.value.calls))
            .collect();
        assert_eq!(
            got,
            [
                (",namespace=\"\",pod=\"\"", 2),
                (",namespace=\"ml\",pod=\"trainer-0\"", 5),
            ],
            "a removed group's series are not shown"
        );
        let pod_only = MetricLabels {
            namespace: false,
            pod: true,
        };
        let s = of(vec![], vec![(1, key, value(5))], &values, pod_only);
        assert_eq!(s[0].labels, ",pod=\"trainer-0\"");
        let none = of(
            vec![(key, value(2))],
            vec![],
            &values,
            MetricLabels::default(),
        );
        assert_eq!(none[0].labels, "");
        assert_eq!(escaped("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
