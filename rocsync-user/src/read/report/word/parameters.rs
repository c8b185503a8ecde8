//! The daemon's word as a trace writes it (`rocsync.parameters`), read field by field
//! as scalars and bounded lists: a field of the wrong type is left out, a list past its
//! bound is counted ([`crate::read::report::word`] makes the report's word of it).

use serde::Deserialize;

use crate::read::report::load::fields::{Capped, Object, Scalar};

/// The daemon's words in a trace's `rocsync.parameters`.
#[derive(Default, Deserialize)]
#[serde(default)]
pub(in crate::read::report) struct Parameters {
    pub(in crate::read::report) hang: Object<WordIn>,
    pub(in crate::read::report) stall: Object<WordIn>,
    pub(in crate::read::report) behind: Object<WordIn>,
    pub(in crate::read::report) stuck: Object<WordIn>,
    /// Spans whose calls were not recorded (the daemon's budget shed them).
    pub(in crate::read::report) not_recorded: Capped<Shed, 256>,
    /// Why the trace ended early.
    pub(in crate::read::report) truncated: Object<Truncated>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(in crate::read::report) struct Shed {
    pub(in crate::read::report) api: Scalar,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(in crate::read::report) struct Truncated {
    pub(in crate::read::report) reason: Scalar,
}

impl Parameters {
    /// Losses the parameters say: the trace cut short (why), the calls of an API not
    /// recorded for a span (how many spans, per API).
    pub(in crate::read::report) fn losses(&self) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        if let Some(t) = &self.truncated.0 {
            let why = t.reason.as_str().unwrap_or("unknown");
            out.push((format!("trace ended early ({why})"), 1));
        }
        let mut spans: std::collections::BTreeMap<String, u64> = Default::default();
        for s in &self.not_recorded.kept {
            let api = s.api.as_str().unwrap_or("calls");
            *spans
                .entry(format!("spans of {api} not recorded (budget)"))
                .or_default() += 1;
        }
        if self.not_recorded.past > 0 {
            spans.insert(
                "spans not recorded (budget), past the report's 256".into(),
                self.not_recorded.past,
            );
        }
        out.extend(spans);
        out
    }
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(in crate::read::report) struct WordIn {
    pub(in crate::read::report) pid: Scalar,
    pub(in crate::read::report) tid: Scalar,
    pub(in crate::read::report) api: Scalar,
    pub(in crate::read::report) seq: Scalar,
    pub(in crate::read::report) comm: Scalar,
    pub(in crate::read::report) rank: Scalar,
    pub(in crate::read::report) nranks: Scalar,
    pub(in crate::read::report) blocked_ms_when_found: Scalar,
    pub(in crate::read::report) duration_ms: Scalar,
    pub(in crate::read::report) ended: Scalar,
    pub(in crate::read::report) waits_on: Capped<StepIn, 16>,
    pub(in crate::read::report) collective: Object<CollIn>,
    pub(in crate::read::report) behind: Capped<BehindIn, 64>,
    pub(in crate::read::report) waited_by: Object<WaitedByIn>,
    #[serde(rename = "where")]
    pub(in crate::read::report) place: Scalar,
    pub(in crate::read::report) stacks: Object<StacksIn>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(in crate::read::report) struct StepIn {
    pub(in crate::read::report) stream: Scalar,
    pub(in crate::read::report) event: Scalar,
    pub(in crate::read::report) waited_on_event: Scalar,
    pub(in crate::read::report) recorded_on_stream: Scalar,
    pub(in crate::read::report) collective: Object<CollIn>,
    pub(in crate::read::report) unknown: Scalar,
    pub(in crate::read::report) waited: Scalar,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(in crate::read::report) struct CollIn {
    pub(in crate::read::report) api: Scalar,
    pub(in crate::read::report) seq: Scalar,
    pub(in crate::read::report) comm: Scalar,
    pub(in crate::read::report) rank: Scalar,
    pub(in crate::read::report) nranks: Scalar,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(in crate::read::report) struct BehindIn {
    pub(in crate::read::report) pid: Scalar,
    pub(in crate::read::report) rank: Scalar,
    pub(in crate::read::report) seq: Scalar,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(in crate::read::report) struct WaitedByIn {
    pub(in crate::read::report) pid: Scalar,
    pub(in crate::read::report) api: Scalar,
    pub(in crate::read::report) collective: Object<CollIn>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(in crate::read::report) struct StacksIn {
    pub(in crate::read::report) read_at_unix_us: Scalar,
    pub(in crate::read::report) took_ms: Scalar,
    pub(in crate::read::report) python_version: Scalar,
    pub(in crate::read::report) error: Scalar,
    pub(in crate::read::report) threads: Capped<ThreadIn, 256>,
    pub(in crate::read::report) cut: Object<CutIn>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(in crate::read::report) struct CutIn {
    pub(in crate::read::report) threads: Scalar,
    pub(in crate::read::report) frames: Scalar,
    pub(in crate::read::report) strings: Scalar,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(in crate::read::report) struct ThreadIn {
    pub(in crate::read::report) tid: Scalar,
    pub(in crate::read::report) name: Scalar,
    pub(in crate::read::report) blocked: Scalar,
    pub(in crate::read::report) python_stack: Capped<PyIn, 128>,
    pub(in crate::read::report) python_error: Scalar,
    pub(in crate::read::report) native_stack: Capped<NativeIn, 128>,
    pub(in crate::read::report) native_error: Scalar,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(in crate::read::report) struct PyIn {
    pub(in crate::read::report) function: Scalar,
    pub(in crate::read::report) file: Scalar,
    pub(in crate::read::report) line: Scalar,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(in crate::read::report) struct NativeIn {
    pub(in crate::read::report) address: Scalar,
    pub(in crate::read::report) symbol: Scalar,
    pub(in crate::read::report) object: Scalar,
    pub(in crate::read::report) offset: Scalar,
    pub(in crate::read::report) symbolized: Scalar,
}
