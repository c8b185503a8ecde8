//! What resolution makes of each call.

use crate::trace::call::Call;

/// The synchronisation a call performs, named as Kineto's CUPTI rows and the
/// `hip_sync_kind` field name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SyncKind {
    StreamWaitEvent,
    EventSynchronize,
    StreamSynchronize,
    DeviceSynchronize,
}

impl SyncKind {
    /// `hip_sync_kind` value.
    pub fn hip_name(self) -> &'static str {
        match self {
            SyncKind::StreamWaitEvent => "stream_wait_event",
            SyncKind::EventSynchronize => "event_synchronize",
            SyncKind::StreamSynchronize => "stream_synchronize",
            SyncKind::DeviceSynchronize => "device_synchronize",
        }
    }

    /// CUPTI's name for the device-side sync row (`cuda_sync_kind`).
    pub fn cupti_name(self) -> &'static str {
        match self {
            SyncKind::StreamWaitEvent => "Stream Wait Event",
            SyncKind::EventSynchronize => "Event Sync",
            SyncKind::StreamSynchronize => "Stream Sync",
            SyncKind::DeviceSynchronize => "Context Sync",
        }
    }

    /// Waits on an event, and so have a producer to resolve.
    pub fn waits_on_event(self) -> bool {
        matches!(self, SyncKind::StreamWaitEvent | SyncKind::EventSynchronize)
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
    /// For waits on an event: the record it resolved to.
    pub producer: Option<Producer>,
}

/// A resolved capture.
#[derive(Debug, Default)]
pub struct Resolved {
    /// In correlation order.
    pub rows: Vec<Row>,
    pub waits_resolved: u64,
    pub waits_unresolved: u64,
}
