//! The profiler's trace (torch.profiler / Kineto JSON) as annotate needs it: its text kept
//! as written (the output is that text with edits, so nothing annotate does not touch
//! changes — key order, number formatting, top-level keys), and the rows read from it.

use std::collections::HashMap;

use anyhow::{Result, anyhow, bail};
use rocsync_common::{Api, Op};
use serde::Deserialize;
use serde_json::{Value, value::RawValue};

/// The runtime a profiler trace comes from: Kineto's CUPTI backend, or its
/// rocprofiler-sdk backend (which writes no sync rows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Flavour {
    Cuda,
    Rocm,
}

impl Flavour {
    pub(super) fn name(self) -> &'static str {
        match self {
            Flavour::Cuda => "cuda",
            Flavour::Rocm => "rocm",
        }
    }
}

/// A host-side runtime row (`cat: cuda_runtime`).
#[derive(Clone, Debug)]
pub(super) struct RuntimeRow {
    pub name: String,
    /// What the call does, when it is one rocsync hooks (HIP and CUDA names alike).
    pub op: Option<Op>,
    pub pid: i64,
    pub tid: i64,
    /// Start and duration, ns, start on the epoch (Kineto's own clock).
    pub start_ns: i64,
    pub dur_ns: i64,
    pub correlation: i64,
    pub external_id: Option<i64>,
    /// The row as written, for rows copied from it (ts, dur).
    pub ts_text: String,
    pub dur_text: String,
}

/// A device-side row that names a stream: kernels, copies, sets, `cuda_event`, `cuda_sync`.
#[derive(Clone, Debug)]
pub(super) struct DeviceRow {
    pub event: usize,
    pub cat: String,
    pub name: String,
    /// Device ordinal (the row's pid).
    pub device: i64,
    /// `args.stream` (−1: none).
    pub stream: i64,
    pub correlation: i64,
    /// On `cuda_sync` event waits: CUPTI's answer (−1: unresolved).
    pub wait_on_stream: Option<i64>,
    pub wait_on_record: Option<i64>,
}

pub(super) struct Profile {
    pub text: String,
    /// Byte ranges of each element of `traceEvents` in `text`.
    pub spans: Vec<(usize, usize)>,
    pub flavour: Flavour,
    pub runtime: Vec<RuntimeRow>,
    pub device: Vec<DeviceRow>,
    /// It is rocsync's own trace (a `rocsync` object), not a profiler's.
    pub from_rocsync: bool,
}

/// The most `traceEvents` read: each costs its span and, as a row, more than its text
/// (a file of empty events, 3 bytes each, took 11 times its size). A Kineto trace's
/// events average a few hundred bytes: the largest trace read holds about this many.
pub(super) const MAX_EVENTS: usize = (crate::read::input::MAX_HELD / 256) as usize;
const TOO_MANY: &str = "more than";
/// The largest event read as a row: read whole, an event costs ~17 times its text (one
/// of an array of 100 M zeros took 3.5 GB); Kineto's rows are a few hundred bytes.
const MAX_EVENT_TEXT: usize = 1 << 20;

#[derive(Deserialize)]
struct Top<'a> {
    #[serde(
        borrow,
        rename = "traceEvents",
        deserialize_with = "at_most_max_events"
    )]
    events: Vec<&'a RawValue>,
    #[serde(rename = "baseTimeNanoseconds", default)]
    base: Option<Value>,
    /// rocsync's own traces have it; a profiler's never.
    #[serde(default)]
    rocsync: Option<&'a RawValue>,
}

/// `traceEvents`, refused past [`MAX_EVENTS`] as they are read.
fn at_most_max_events<'de, D>(d: D) -> Result<Vec<&'de RawValue>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct Bounded;
    impl<'de> serde::de::Visitor<'de> for Bounded {
        type Value = Vec<&'de RawValue>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an array of trace events")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut events = Vec::new();
            while let Some(e) = seq.next_element()? {
                if events.len() == MAX_EVENTS {
                    return Err(serde::de::Error::custom(format!(
                        "{TOO_MANY} {MAX_EVENTS} trace events: annotate holds a trace whole; \
                         profile fewer steps (torch.profiler's schedule) and annotate that"
                    )));
                }
                events.push(e);
            }
            Ok(events)
        }
    }
    d.deserialize_seq(Bounded)
}

/// The op of a runtime API name: `hip*`/`cuda*`, per-thread suffixes aside.
pub(super) fn op_of(name: &str) -> Option<Op> {
    let key = norm(name)?;
    Api::ALL
        .iter()
        .find(|a| norm(a.symbol()).as_deref() == Some(key.as_str()))
        .map(|a| a.op())
}

fn norm(name: &str) -> Option<String> {
    let rest = name
        .strip_prefix("hip")
        .or_else(|| name.strip_prefix("cuda"))?;
    let rest = ["_spt", "_ptsz", "_ptds"]
        .iter()
        .find_map(|s| rest.strip_suffix(s))
        .unwrap_or(rest);
    Some(rest.to_string())
}

fn int(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::Number(n) => n.as_i64().or_else(|| n.as_u64().map(|u| u as i64)),
        _ => None,
    }
}

/// µs (as Kineto writes them, 3 decimals) to ns.
fn us_to_ns(v: &Value) -> Option<i64> {
    let f = v.as_f64()?;
    let ns = (f * 1000.0).round();
    (ns.is_finite() && ns.abs() < 9.0e18).then_some(ns as i64)
}

impl Profile {
    pub(super) fn parse(text: String) -> Result<Profile> {
        let top: Top =
            serde_json::from_str(&text).map_err(|e| match e.to_string().starts_with(TOO_MANY) {
                true => anyhow!(e),
                false => {
                    anyhow!(e).context("not a Kineto trace (a JSON object with \"traceEvents\")")
                }
            })?;
        // Relative µs since 2024 (`baseTimeNanoseconds`); absolute epoch µs before.
        let base_ns = match &top.base {
            None => 0,
            Some(v) => int(Some(v))
                .filter(|b| *b >= 0)
                .ok_or_else(|| anyhow!("baseTimeNanoseconds is not a non-negative integer"))?,
        };
        let origin = text.as_ptr() as usize;
        let mut spans = Vec::with_capacity(top.events.len());
        let (mut runtime, mut device) = (Vec::new(), Vec::new());
        let mut oversized = 0;
        for (i, raw) in top.events.iter().enumerate() {
            let start = raw.get().as_ptr() as usize - origin;
            spans.push((start, start + raw.get().len()));
            if raw.get().len() > MAX_EVENT_TEXT {
                oversized += 1;
                continue;
            }
            let Ok(v) = serde_json::from_str::<Value>(raw.get()) else {
                continue;
            };
            if v.get("ph").and_then(Value::as_str) != Some("X") {
                continue;
            }
            read_row(i, &v, base_ns, &mut runtime, &mut device);
        }
        if oversized > 0 {
            crate::say!(
                "rocsync: warning: {oversized} event(s) of the profiler trace over {} KiB were \
                 copied as they are, not read (no profiler row is that large)",
                MAX_EVENT_TEXT >> 10
            );
        }
        let flavour = flavour(&text, &runtime);
        let from_rocsync = top.rocsync.is_some();
        Ok(Profile {
            text,
            spans,
            flavour,
            runtime,
            device,
            from_rocsync,
        })
    }

    /// The text of `traceEvents[i]`.
    pub(super) fn event_text(&self, i: usize) -> &str {
        let (a, b) = self.spans[i];
        &self.text[a..b]
    }

    /// The pids of the host rows: the processes this trace profiled.
    pub(super) fn pids(&self) -> Vec<i64> {
        let mut p: Vec<i64> = self.runtime.iter().map(|r| r.pid).collect();
        p.sort_unstable();
        p.dedup();
        p
    }

    /// Device rows by correlation.
    pub(super) fn device_by_correlation(&self) -> HashMap<i64, Vec<&DeviceRow>> {
        let mut m: HashMap<i64, Vec<&DeviceRow>> = HashMap::new();
        for d in &self.device {
            m.entry(d.correlation).or_default().push(d);
        }
        m
    }

    pub(super) fn check_not_empty(&self) -> Result<()> {
        if !self
            .runtime
            .iter()
            .any(|r| r.op.is_some_and(|o| !o.launches()))
        {
            bail!(
                "the profiler trace has no runtime row of a synchronisation API (cudaStreamWaitEvent, hipEventRecord, …): was it recorded with CUDA/HIP activities?"
            );
        }
        Ok(())
    }
}

fn read_row(
    i: usize,
    v: &Value,
    base_ns: i64,
    runtime: &mut Vec<RuntimeRow>,
    device: &mut Vec<DeviceRow>,
) {
    let cat = v.get("cat").and_then(Value::as_str).unwrap_or("");
    let name = v.get("name").and_then(Value::as_str).unwrap_or("");
    let args = v.get("args");
    let arg = |k: &str| int(args.and_then(|a| a.get(k)));
    let Some(correlation) = arg("correlation") else {
        return;
    };
    let (Some(pid), Some(tid)) = (int(v.get("pid")), int(v.get("tid"))) else {
        return;
    };
    if cat == "cuda_runtime" {
        let (Some(ts), Some(dur)) = (v.get("ts"), v.get("dur")) else {
            return;
        };
        let (Some(start), Some(d)) = (us_to_ns(ts), us_to_ns(dur)) else {
            return;
        };
        runtime.push(RuntimeRow {
            name: name.to_string(),
            op: op_of(name),
            pid,
            tid,
            start_ns: base_ns.saturating_add(start),
            dur_ns: d.max(0),
            correlation,
            external_id: arg("External id"),
            ts_text: ts.to_string(),
            dur_text: dur.to_string(),
        });
    } else if matches!(
        cat,
        "kernel" | "gpu_memcpy" | "gpu_memset" | "cuda_event" | "cuda_sync"
    ) {
        device.push(DeviceRow {
            event: i,
            cat: cat.to_string(),
            name: name.to_string(),
            device: pid,
            stream: arg("stream").unwrap_or(-1),
            correlation,
            wait_on_stream: arg("wait_on_stream"),
            wait_on_record: arg("wait_on_cuda_event_record_corr_id"),
        });
    }
}

/// CUPTI's traces name CUDA runtime APIs and carry `cbid`; rocprofiler-sdk's name HIP
/// APIs and carry `cid`, with version keys of their own.
fn flavour(text: &str, runtime: &[RuntimeRow]) -> Flavour {
    let hip = runtime.iter().filter(|r| r.name.starts_with("hip")).count();
    let cuda = runtime
        .iter()
        .filter(|r| r.name.starts_with("cuda"))
        .count();
    if hip > cuda || (hip == cuda && text.contains("\"rocprofiler-sdk_version\"")) {
        return Flavour::Rocm;
    }
    Flavour::Cuda
}
