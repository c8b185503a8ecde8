//! The daemon's always-on counters: one series per API and device in a per-CPU array
//! (an index on the hot path, not a hash lookup), and the per-thread start of a call in
//! flight.

/// Histogram buckets of the time spent in synchronisations: bucket `i` counts calls that
/// took at most 2^i µs; the last one everything longer.
pub const WAIT_BUCKETS: usize = 24;

/// A metrics series: one API on one device (the calling thread's or the call's stream's).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MetricKey {
    pub api: u32,
    pub device: i32,
}

/// Devices with series of their own (0..16); any other shares [`OTHER_DEVICE`]'s.
pub const METRIC_DEVICES: i32 = 16;
/// [`MetricKey::device`] of the series devices beyond [`METRIC_DEVICES`] share.
pub const OTHER_DEVICE: i32 = -1;
/// API ids with metrics slots (checked in the API table's tests).
pub const METRIC_APIS: u32 = 64;
/// Slots of the metrics array: about what the per-CPU hash it replaced preallocated.
pub const METRIC_SLOTS: u32 = METRIC_APIS * (METRIC_DEVICES as u32 + 1);

impl MetricKey {
    /// Its slot in the per-CPU metrics array (an index, not a hash lookup, on the hot
    /// path); `None` for an API id out of range.
    #[inline(always)]
    pub fn slot(api: u32, device: i32) -> Option<u32> {
        let d = if (0..METRIC_DEVICES).contains(&device) {
            device as u32
        } else {
            METRIC_DEVICES as u32
        };
        (api < METRIC_APIS).then_some(api * (METRIC_DEVICES as u32 + 1) + d)
    }

    /// The series a slot holds.
    pub fn of_slot(slot: u32) -> MetricKey {
        let per_api = METRIC_DEVICES as u32 + 1;
        let d = (slot % per_api) as i32;
        MetricKey {
            api: slot / per_api,
            device: if d == METRIC_DEVICES { OTHER_DEVICE } else { d },
        }
    }
}

/// The key of a labelled series (`--metric-labels`): a label group (the daemon's number
/// for one set of label values) and the series' [`MetricKey::slot`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupSlot {
    pub group: u32,
    pub slot: u32,
}

/// Why a labelled process's call was counted without its labels (`UNLABELLED`'s
/// index): the kernel held as many labelled series as it can …
pub const UNLABELLED_FULL: u32 = 0;
/// … or its label group (pod) had `--max-series-per-pod` already.
pub const UNLABELLED_CAP: u32 = 1;

/// A process's calls counted before the daemon tracked it: (its tgid, the series'
/// [`MetricKey::slot`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EarlyKey {
    pub tgid: u32,
    pub slot: u32,
}

/// What the kernel counts per [`MetricKey`] (per CPU; userspace sums).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MetricValue {
    /// Calls entered.
    pub calls: u64,
    /// Calls that returned an error.
    pub errors: u64,
    /// Stream waits on an event recorded on another stream.
    pub cross_stream: u64,
    /// Synchronisations that took longer than the stall threshold (when one is set).
    pub stalls: u64,
    /// Synchronisations timed (entry to return on one thread), their total, and their
    /// distribution.
    pub timed: u64,
    pub wait_ns: u64,
    pub buckets: [u64; WAIT_BUCKETS],
}

/// A call of a counted process in flight on a thread (daemon mode).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PendingCall {
    pub api: u32,
    pub device: i32,
    pub ns: u64,
    /// The first argument: `*SetDevice`'s device, the stream `*StreamCreate*` writes.
    pub arg0: u64,
    /// The user the thread's entry is counted against ([`IN_FLIGHT_PER_USER`]), as at
    /// its first call: its exit gives the same user's share back.
    pub uid: u32,
    pub pad: u32,
}

/// Threads whose call in flight the kernel keeps (daemon mode), every user together.
pub const IN_FLIGHT_THREADS: u32 = 65536;
/// Of them, the most one user's live threads hold: one user's thread churn cannot take
/// the entries of another's blocked calls (a blocked call's entry is the one touched
/// least recently, so recency must not decide).
pub const IN_FLIGHT_PER_USER: u32 = 8192;
/// Why a thread's call start was not kept (the `IN_FLIGHT_REFUSED` index): its user's
/// live threads held [`IN_FLIGHT_PER_USER`] entries, or all users' [`IN_FLIGHT_THREADS`]
/// (or the per-user counts as many users as they hold).
pub const IN_FLIGHT_USER_SHARE: u32 = 0;
pub const IN_FLIGHT_FULL: u32 = 1;
/// Users whose threads' entries are counted at once.
pub const IN_FLIGHT_USERS: u32 = 4096;

/// The dependency state the probes keep of every counted process (daemon mode), by
/// handle: where an event was last recorded, and which event a stream last waited on.
/// From it a blocked synchronisation is followed back to what it waits on.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dependency {
    /// The other handle: the stream an event was recorded on, the event a stream waited on.
    pub handle: u64,
    /// CLOCK_MONOTONIC ns of the call.
    pub ns: u64,
}

/// The dependency state is kept per user, in lanes: root's is lane 0, each other user
/// gets the next free one at its first record or wait, and users past the last share it.
/// A lane is an LRU of its own, so one user's flood of distinct events pushes out only
/// its own oldest (200 000 of `nobody`'s records once pushed out the record a root
/// process's blocked call waited on).
pub const DEPENDENCY_LANES: u32 = 8;
/// Handles each lane keeps, of events (their records) and of streams (their waits).
pub const DEPENDENCY_LANE_ENTRIES: u32 = 8192;
/// Handles made in each lane (the `DEPENDENCY_MADE` index): events at `lane`, streams at
/// `DEPENDENCY_LANES + lane`; past [`DEPENDENCY_LANE_ENTRIES`], each pushed one out.
pub const DEPENDENCY_MADE_SLOTS: u32 = 2 * DEPENDENCY_LANES;

/// AQL packets counted (daemon mode), per agent and packet type: an index per packet, as
/// for calls. Agents 0..[`METRIC_DEVICES`] have their own series; beyond them they share
/// "other", and a queue found at its first doorbell (its agent unread) is "unknown".
pub const AQL_TYPES: u32 = 8;
const AQL_OTHER: u32 = METRIC_DEVICES as u32;
const AQL_UNKNOWN: u32 = METRIC_DEVICES as u32 + 1;
pub const AQL_SLOTS: u32 = (METRIC_DEVICES as u32 + 2) * AQL_TYPES;

/// The agent of an AQL series.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum AqlAgent {
    Ordinal(u32),
    Other,
    Unknown,
}

/// The slot of a packet of `packet_type` (its header's low byte) on the queue's agent
/// `ordinal` ([`crate::UNKNOWN_AGENT`] where unread).
#[inline(always)]
pub fn aql_slot(ordinal: u64, packet_type: u8) -> u32 {
    let agent = if ordinal < METRIC_DEVICES as u64 {
        ordinal as u32
    } else if ordinal == crate::UNKNOWN_AGENT as u64 {
        AQL_UNKNOWN
    } else {
        AQL_OTHER
    };
    let t = if (packet_type as u32) < AQL_TYPES - 1 {
        packet_type as u32
    } else {
        AQL_TYPES - 1
    };
    agent * AQL_TYPES + t
}

/// The agent and packet kind (as `rocsync_aql_packets_total`'s `kind` label) of a slot.
pub fn aql_series(slot: u32) -> (AqlAgent, &'static str) {
    let agent = match slot / AQL_TYPES {
        AQL_OTHER => AqlAgent::Other,
        AQL_UNKNOWN => AqlAgent::Unknown,
        o => AqlAgent::Ordinal(o),
    };
    // HSA_PACKET_TYPE_* (hsa.h); barriers apart, as the waits' producers are.
    let kind = match slot % AQL_TYPES {
        0 => "vendor_specific",
        2 => "kernel_dispatch",
        3 => "barrier_and",
        4 => "agent_dispatch",
        5 => "barrier_or",
        _ => "other",
    };
    (agent, kind)
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: plain `#[repr(C)]` data with explicit padding and no invalid bit patterns.
    unsafe impl aya::Pod for super::MetricKey {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::MetricValue {}
    // SAFETY: as above (two u32).
    unsafe impl aya::Pod for super::GroupSlot {}
    // SAFETY: as above (two u32).
    unsafe impl aya::Pod for super::EarlyKey {}
    // SAFETY: as above (two u32, two u64, two u32: no padding).
    unsafe impl aya::Pod for super::PendingCall {}
    // SAFETY: as above (two u64).
    unsafe impl aya::Pod for super::Dependency {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_slots_round_trip_and_share_the_other_devices() {
        for api in 0..METRIC_APIS {
            for device in [0, 1, METRIC_DEVICES - 1] {
                let slot = MetricKey::slot(api, device).unwrap();
                assert!(slot < METRIC_SLOTS);
                assert_eq!(MetricKey::of_slot(slot), MetricKey { api, device });
            }
            let other = MetricKey::slot(api, METRIC_DEVICES).unwrap();
            assert_eq!(MetricKey::slot(api, -5), Some(other));
            assert_eq!(MetricKey::of_slot(other).device, OTHER_DEVICE);
        }
        assert_eq!(MetricKey::slot(METRIC_APIS, 0), None);
    }

    #[test]
    fn aql_slots_name_their_agent_and_kind() {
        let s = aql_slot(3, 3);
        assert!(s < AQL_SLOTS);
        assert_eq!(aql_series(s), (AqlAgent::Ordinal(3), "barrier_and"));
        assert_eq!(aql_series(aql_slot(0, 2)).1, "kernel_dispatch");
        assert_eq!(aql_series(aql_slot(0, 5)).1, "barrier_or");
        assert_eq!(aql_series(aql_slot(0, 200)).1, "other");
        assert_eq!(aql_series(aql_slot(40, 2)).0, AqlAgent::Other);
        let unknown = aql_slot(crate::UNKNOWN_AGENT as u64, 0);
        assert!(unknown < AQL_SLOTS);
        assert_eq!(aql_series(unknown), (AqlAgent::Unknown, "vendor_specific"));
    }
}
