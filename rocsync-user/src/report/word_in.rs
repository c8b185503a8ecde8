//! The daemon's word as a trace writes it (`rocsync.parameters`), read field by field
//! as scalars and bounded lists: a field of the wrong type is left out, a list past its
//! bound is counted ([`super::word`] makes the report's [`Word`] of it).

use serde::Deserialize;

use super::{
    fields::{Capped, Object, Scalar},
    word::Word,
};

/// The daemon's words in a trace's `rocsync.parameters`.
#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct Parameters {
    pub(super) hang: Object<WordIn>,
    pub(super) stall: Object<WordIn>,
    pub(super) behind: Object<WordIn>,
    pub(super) stuck: Object<WordIn>,
    /// Spans whose calls were not recorded (the daemon's budget shed them).
    pub(super) not_recorded: Capped<Shed, 256>,
    /// Why the trace ended early.
    pub(super) truncated: Object<Truncated>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct Shed {
    pub(super) api: Scalar,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct Truncated {
    pub(super) reason: Scalar,
}

impl Parameters {
    /// Losses the parameters say: the trace cut short (why), the calls of an API not
    /// recorded for a span (how many spans, per API).
    pub(super) fn losses(&self) -> Vec<(String, u64)> {
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

    /// The word of the trace (a trace is taken for one reason), with what its bounds
    /// left out, counted.
    pub(super) fn word(self) -> Option<(Word, u64)> {
        let words = [
            ("hang", self.hang),
            ("stall", self.stall),
            ("behind", self.behind),
            ("stuck", self.stuck),
        ];
        let (kind, w) = words.into_iter().find_map(|(k, w)| w.0.map(|w| (k, w)))?;
        Some(Word::of(kind, w))
    }
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct WordIn {
    pub(super) pid: Scalar,
    pub(super) tid: Scalar,
    pub(super) api: Scalar,
    pub(super) seq: Scalar,
    pub(super) comm: Scalar,
    pub(super) rank: Scalar,
    pub(super) nranks: Scalar,
    pub(super) blocked_ms_when_found: Scalar,
    pub(super) duration_ms: Scalar,
    pub(super) ended: Scalar,
    pub(super) waits_on: Capped<StepIn, 16>,
    pub(super) collective: Object<CollIn>,
    pub(super) behind: Capped<BehindIn, 64>,
    pub(super) waited_by: Object<WaitedByIn>,
    #[serde(rename = "where")]
    pub(super) place: Scalar,
    pub(super) stacks: Object<StacksIn>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct StepIn {
    pub(super) stream: Scalar,
    pub(super) event: Scalar,
    pub(super) waited_on_event: Scalar,
    pub(super) recorded_on_stream: Scalar,
    pub(super) collective: Object<CollIn>,
    pub(super) unknown: Scalar,
    pub(super) waited: Scalar,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct CollIn {
    pub(super) api: Scalar,
    pub(super) seq: Scalar,
    pub(super) comm: Scalar,
    pub(super) rank: Scalar,
    pub(super) nranks: Scalar,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct BehindIn {
    pub(super) pid: Scalar,
    pub(super) rank: Scalar,
    pub(super) seq: Scalar,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct WaitedByIn {
    pub(super) pid: Scalar,
    pub(super) api: Scalar,
    pub(super) collective: Object<CollIn>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct StacksIn {
    pub(super) read_at_unix_us: Scalar,
    pub(super) took_ms: Scalar,
    pub(super) python_version: Scalar,
    pub(super) error: Scalar,
    pub(super) threads: Capped<ThreadIn, 256>,
    pub(super) cut: Object<CutIn>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct CutIn {
    pub(super) threads: Scalar,
    pub(super) frames: Scalar,
    pub(super) strings: Scalar,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct ThreadIn {
    pub(super) tid: Scalar,
    pub(super) name: Scalar,
    pub(super) blocked: Scalar,
    pub(super) python_stack: Capped<PyIn, 128>,
    pub(super) python_error: Scalar,
    pub(super) native_stack: Capped<NativeIn, 128>,
    pub(super) native_error: Scalar,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct PyIn {
    pub(super) function: Scalar,
    pub(super) file: Scalar,
    pub(super) line: Scalar,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct NativeIn {
    pub(super) address: Scalar,
    pub(super) symbol: Scalar,
    pub(super) object: Scalar,
    pub(super) offset: Scalar,
    pub(super) symbolized: Scalar,
}
