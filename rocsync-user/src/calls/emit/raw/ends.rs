//! What a capture's two ends say besides the calls: the header's facts (clock, start,
//! command) and the trailer's counts of what the stages before resolution lost.

use crate::calls::stats::KernelDrops;

/// Capture facts a conversion needs besides the calls.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Header {
    /// CLOCK_REALTIME − CLOCK_MONOTONIC at capture start, ns.
    pub clock_offset_ns: i64,
    /// CLOCK_MONOTONIC at capture start, ns (the trace's base time derives from it).
    pub start_ns: u64,
    pub command: Vec<String>,
    /// Every process was traced from its start (`run`), not attached to.
    pub from_start: bool,
}

/// What only the end of a capture knows: losses the stages before resolution counted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trailer {
    pub kernel: KernelDrops,
    pub unpaired_entries: u64,
    pub unpaired_exits: u64,
    pub calls_begun_before: u64,
    pub undecodable: u64,
    /// What each traced process said of itself, by pid (an object; null when unknown).
    pub processes: serde_json::Value,
}
