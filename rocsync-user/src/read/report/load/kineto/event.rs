//! An event of a Kineto trace as the report reads it, and the scalars' conversions: what
//! the loader ([`super`]) and the other rows' reader ([`super::others`]) share, apart from
//! both (so neither imports the other).

use serde::Deserialize;

use crate::read::report::load::fields::{Object, Scalar};

/// What the report reads of an event: a runtime or device sync row's fields, each as
/// the trace has it (a field of the wrong type is a row it cannot use, not an error).
#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct Event {
    pub(super) ph: Scalar,
    pub(super) cat: Scalar,
    pub(super) name: Scalar,
    pub(super) pid: Scalar,
    pub(super) tid: Scalar,
    pub(super) ts: Scalar,
    pub(super) dur: Scalar,
    pub(super) args: Object<Args>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct Args {
    pub(super) correlation: Scalar,
    /// A device sync row's stream number, an NCCL row's stream handle.
    pub(super) stream: Scalar,
    #[serde(rename = "Seq")]
    pub(super) seq: Scalar,
    pub(super) comm: Scalar,
    #[serde(rename = "Comms Id")]
    pub(super) comms_id: Scalar,
    #[serde(rename = "Rank")]
    pub(super) rank: Scalar,
    #[serde(rename = "Group size")]
    pub(super) group_size: Scalar,
    pub(super) agent: Scalar,
    pub(super) queue: Scalar,
    /// A `thread_name` row's name.
    pub(super) name: Scalar,
    pub(super) in_flight: Scalar,
    pub(super) hip_stream: Scalar,
    pub(super) cuda_stream: Scalar,
    pub(super) wait_on_stream: Scalar,
    pub(super) wait_on_hip_event_record_corr_id: Scalar,
    pub(super) wait_on_cuda_event_record_corr_id: Scalar,
    pub(super) wait_on_unknown_reason: Scalar,
}

/// Trace µs (3 decimals) to ns.
pub(super) fn ns(us: f64) -> i64 {
    (us * 1000.0).round() as i64
}

/// A `"0x…"` handle.
pub(super) fn hex(v: &Scalar) -> Option<u64> {
    u64::from_str_radix(v.as_str()?.strip_prefix("0x")?, 16).ok()
}
