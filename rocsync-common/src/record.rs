//! Ring-buffer record layouts. Every record starts with a `u32` kind so the decoder can tell
//! them apart; sizes are fixed and padding is explicit.

pub const RECORD_CALL: u32 = 1;
pub const RECORD_LINK_MAP: u32 = 2;
pub const RECORD_QUEUE: u32 = 3;
pub const RECORD_PACKET: u32 = 4;

/// One complete API call: written by the exit probe from the entry stash.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallRecord {
    pub kind: u32,
    /// Process id (tgid).
    pub pid: u32,
    /// Thread id as the OS sees it.
    pub tid: u32,
    /// [`crate::Api`] id.
    pub api: u32,
    /// Assigned at entry from one global counter: orders calls across threads.
    pub correlation: u64,
    /// CLOCK_MONOTONIC ns.
    pub enter_ns: u64,
    pub exit_ns: u64,
    /// Argument registers (rdi, rsi, rdx); an out-parameter is replaced by the value it
    /// pointed to at return.
    pub args: [u64; 3],
    /// The return value (`hipError_t`), sign-extended.
    pub ret: i64,
}

/// The dynamic loader changed a target's link map (`_dl_debug_state`): a library may have
/// been mapped. The probe has stopped the process; userspace attaches, then continues it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkMapRecord {
    pub kind: u32,
    pub pid: u32,
    pub tid: u32,
    /// Non-zero when the probe stopped the process and userspace must continue it.
    pub stopped: u32,
    pub ns: u64,
}

/// An HSA queue created (or destroyed, `created == 0`) by a target.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueRecord {
    pub kind: u32,
    pub pid: u32,
    pub tid: u32,
    pub created: u32,
    /// The `hsa_queue_t*`.
    pub queue: u64,
    /// `hsa_agent_t.handle` of the queue's agent.
    pub agent: u64,
    pub base: u64,
    pub doorbell: u64,
    pub id: u64,
    pub size: u32,
    /// The agent's ordinal: GPU agents in the order the runtime enumerated them, else in
    /// the order of their first queue.
    pub ordinal: u32,
    pub ns: u64,
}

/// One AQL packet as published at a doorbell: 64 bytes read from the ring.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketRecord {
    pub kind: u32,
    pub pid: u32,
    pub tid: u32,
    /// The agent's ordinal, as in [`QueueRecord::ordinal`].
    pub ordinal: u32,
    pub queue: u64,
    pub agent: u64,
    /// The packet's write index (not wrapped).
    pub index: u64,
    pub ns: u64,
    pub packet: [u8; 64],
}

impl Default for PacketRecord {
    fn default() -> Self {
        Self {
            kind: 0,
            pid: 0,
            tid: 0,
            ordinal: 0,
            queue: 0,
            agent: 0,
            index: 0,
            ns: 0,
            packet: [0; 64],
        }
    }
}

/// What the doorbell probe knows of each queue, keyed by its doorbell signal.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueInfo {
    pub queue: u64,
    pub agent: u64,
    /// The agent's ordinal (see `AGENT_ORDINALS` in the probes).
    pub ordinal: u64,
    pub base: u64,
    pub size: u64,
    /// Highest write index published so far; `u64::MAX` (-1) before the first doorbell.
    pub last: u64,
}

/// `hsa_agent_get_info`'s arguments, stashed until it returns.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AgentQuery {
    pub agent: u64,
    pub attribute: u64,
    /// Where the value is written.
    pub value: u64,
}

/// `hsa_queue_create`'s arguments, stashed until it returns.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueCreate {
    pub agent: u64,
    /// The `hsa_queue_t**` out-parameter.
    pub out: u64,
}

/// `hsa_queue_t` as laid out on x86-64 (40 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HsaQueue {
    pub type_: u32,
    pub features: u32,
    pub base_address: u64,
    pub doorbell_signal: u64,
    pub size: u32,
    pub reserved1: u32,
    pub id: u64,
}

/// The most packets one doorbell probe reads; more are counted as truncated.
pub const MAX_PACKETS_PER_DOORBELL: u64 = 16;

/// What the entry probe stashes per thread until the call returns.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    pub correlation: u64,
    pub enter_ns: u64,
    pub args: [u64; 3],
    /// The call's [`crate::Cookie`]: its API id and the bits its attribution needs.
    pub api: u32,
    /// The device the call was attributed to when the capture is restricted to some
    /// agents ([`NO_DEVICE`] otherwise); the exit probe keeps its device maps with it.
    pub device: i32,
}

/// [`Entry::device`] of an unrestricted capture.
pub const NO_DEVICE: i32 = -1;

/// Key of the per-process handle maps (stream → device, event → device).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HandleKey {
    pub tgid: u64,
    pub handle: u64,
}

/// Per-target settings, keyed by tgid in the `TARGETS` map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// Non-zero: capture calls of this process.
    pub capture: u32,
    /// Non-zero: stop the process at each link-map change so new libraries are attached
    /// before their first call.
    pub stop_on_link_map: u32,
    /// Bit N set: record agent (device) N. Zero: every agent.
    pub agents: u64,
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: plain `#[repr(C)]` data with explicit padding and no invalid bit patterns.
    unsafe impl aya::Pod for super::Entry {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::Config {}
}
