//! Definitions shared by the eBPF probes and the userspace loader.
//!
//! Everything here is `#[repr(C)]` plain data: the probes write it into the ring buffer and
//! userspace reads it back with [`decode`] (behind the `user` feature).
#![no_std]

mod api;
mod call_ring;
mod collective;
mod cookie;
mod metrics;
mod record;
mod release;
mod settings;
mod target_cache;

pub use api::{Api, Backend, Op, OutParam};
pub use call_ring::{CallCursor, CallSlot, MMAPABLE, call_slots};
pub use collective::{
    COMM_STATE_ENTRIES, COMM_STATE_PER_PROCESS, COMM_STATE_PER_USER, CommQuota, CommSetup,
    CommState, LastCollective, Layout, MAX_RANKS, Numbered, UNIQUE_ID_BYTES, blake2b_64_in,
    comm_id, comm_id_in, split_id, split_id_in,
};
pub use cookie::Cookie;
pub use metrics::{
    AQL_SLOTS, AQL_TYPES, AqlAgent, DEPENDENCY_LANE_ENTRIES, DEPENDENCY_LANES,
    DEPENDENCY_MADE_SLOTS, Dependency, EarlyKey, GroupSlot, IN_FLIGHT_FULL, IN_FLIGHT_PER_USER,
    IN_FLIGHT_THREADS, IN_FLIGHT_USER_SHARE, IN_FLIGHT_USERS, METRIC_APIS, METRIC_DEVICES,
    METRIC_SLOTS, MetricKey, MetricValue, OTHER_DEVICE, PendingCall, UNLABELLED_CAP,
    UNLABELLED_FULL, WAIT_BUCKETS, aql_series, aql_slot,
};
pub use record::{
    AgentQuery, ENTRY_FILTERED, EXIT_ENTRY_ONLY, EXIT_OUT_READ, EntryRecord, ExitRecord, HandleKey,
    HsaQueue, LOSS_MASK, LOSS_SLOTS, LinkMapRecord, MAX_PACKETS_PER_DOORBELL, NO_DEVICE,
    NO_R_DEBUG, OutSlot, PROCESS_EXEC, PROCESS_EXIT, PROCESS_FORK, PacketRecord, ProcessRecord,
    QUEUE_CREATED, QUEUE_DESTROYED, QUEUE_DISCOVERED, QueueCreate, QueueInfo, QueueRecord,
    RECORD_ENTRY, RECORD_EXIT, RECORD_LINK_MAP, RECORD_PACKET, RECORD_PROCESS, RECORD_QUEUE,
    RECORD_STALL, RECORD_THREAD, RECORD_WAKE, StallRecord, TaskLayout, ThreadRecord, UNKNOWN_AGENT,
    WakeRecord, drop_index,
};
pub use release::{
    KFUNC_SEND_SIGNAL_TASK, KFUNC_TASK_FROM_PID, KFUNC_TASK_RELEASE, KFUNCS, RELEASE_GONE,
    RELEASE_HOLDER, RELEASE_SLOTS,
};
pub use settings::{Config, GetDeviceMode, HIDDEN_AGENT, Switch, TRACE_RECORDING, TRACE_STOPPING};
pub use target_cache::{CachedTarget, TARGET_CACHE_SLOTS, TargetState};

#[cfg(feature = "user")]
mod decode;
#[cfg(feature = "user")]
pub use decode::{DecodeError, Decoded, decode};
