//! What resolution makes of each call.

use crate::calls::ingest::Call;

/// The synchronisation a call performs, named as Kineto's CUPTI rows and the
/// `hip_sync_kind` field name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SyncKind {
    StreamWaitEvent,
    EventSynchronize,
    EventQuery,
    StreamSynchronize,
    DeviceSynchronize,
}

impl SyncKind {
    /// `hip_sync_kind` value.
    pub fn hip_name(self) -> &'static str {
        match self {
            SyncKind::StreamWaitEvent => "stream_wait_event",
            SyncKind::EventSynchronize => "event_synchronize",
            SyncKind::EventQuery => "event_query",
            SyncKind::StreamSynchronize => "stream_synchronize",
            SyncKind::DeviceSynchronize => "device_synchronize",
        }
    }

    /// CUPTI's name for the device-side sync row (`cuda_sync_kind`). CUPTI reports every
    /// `cudaEventQuery` as an "Event Sync".
    pub fn cupti_name(self) -> &'static str {
        match self {
            SyncKind::StreamWaitEvent => "Stream Wait Event",
            SyncKind::EventSynchronize | SyncKind::EventQuery => "Event Sync",
            SyncKind::StreamSynchronize => "Stream Sync",
            SyncKind::DeviceSynchronize => "Context Sync",
        }
    }

    /// Waits on an event, and so have a producer to resolve.
    pub fn waits_on_event(self) -> bool {
        matches!(
            self,
            SyncKind::StreamWaitEvent | SyncKind::EventSynchronize | SyncKind::EventQuery
        )
    }
}

/// The record a wait resolved to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Producer {
    /// Correlation id of the `hipEventRecord*` call.
    pub correlation: u64,
    /// The recording stream, as a per-device index and as the raw handle.
    pub stream_index: i64,
    pub stream: u64,
    pub tid: u32,
    /// Device of the recording stream.
    pub device: i32,
    /// Middle of the record call (CLOCK_MONOTONIC ns): where its arrow starts.
    pub mid_ns: u64,
}

/// Why a wait on an event names no producer. A wait never names an older record when a
/// newer one may exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Unresolved {
    /// A record of the event may have been lost: a correlation id after the latest known
    /// record never arrived, or the latest record's return was never seen.
    ProducerLost,
    /// The latest record of the event was on an agent `--agents` filtered out.
    ProducerFiltered,
    /// The event was not recorded since the capture started (`attach` to a running
    /// process: it may have been recorded before).
    BeforeCapture,
    /// The process was traced from its start (or the handle was destroyed and reused)
    /// and the event was never recorded.
    NeverRecorded,
    /// Every record of the event the capture saw failed (no successful one before them).
    RecordFailed,
}

impl Unresolved {
    pub const ALL: [Unresolved; 5] = [
        Unresolved::ProducerLost,
        Unresolved::ProducerFiltered,
        Unresolved::BeforeCapture,
        Unresolved::NeverRecorded,
        Unresolved::RecordFailed,
    ];

    /// `wait_on_unknown_reason` value.
    pub fn name(self) -> &'static str {
        match self {
            Unresolved::ProducerLost => "producer_lost",
            Unresolved::ProducerFiltered => "producer_filtered",
            Unresolved::BeforeCapture => "before_capture",
            Unresolved::NeverRecorded => "never_recorded",
            Unresolved::RecordFailed => "record_failed",
        }
    }
}

#[cfg(test)]
impl Row {
    /// `call`'s row with nothing resolved, as tests make one.
    pub fn of(call: Call) -> Self {
        Row {
            call,
            sync: None,
            device: 0,
            stream_index: None,
            event_id: None,
            producer: None,
            unresolved: None,
            barrier: None,
            late: false,
        }
    }
}

/// The barrier packet a stream wait submitted (HIP over HSA).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BarrierRef {
    pub queue: u64,
    pub index: u64,
    /// When it was published (CLOCK_MONOTONIC ns).
    pub ns: u64,
}

/// One call with everything the writer needs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Row {
    pub call: Call,
    pub sync: Option<SyncKind>,
    /// Device ordinal the call applies to.
    pub device: i32,
    /// Per-device index of the call's stream argument (≥ 1), if it has one.
    pub stream_index: Option<i64>,
    /// Per-process ordinal of the event argument's lifetime (a reused handle gets a new
    /// one), if the call has an event argument.
    pub event_id: Option<u64>,
    /// For waits on an event: the record it resolved to, or why there is none.
    pub producer: Option<Producer>,
    pub unresolved: Option<Unresolved>,
    /// For a stream wait over HSA: the barrier packet it submitted.
    pub barrier: Option<BarrierRef>,
    /// Delivered after its place in the order was given up: changed no state.
    pub late: bool,
}
