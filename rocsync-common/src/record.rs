//! Ring-buffer record layouts. Every record starts with a `u32` kind so the decoder can tell
//! them apart; sizes are fixed and padding is explicit.

pub const RECORD_ENTRY: u32 = 1;
pub const RECORD_LINK_MAP: u32 = 2;
pub const RECORD_QUEUE: u32 = 3;
pub const RECORD_PACKET: u32 = 4;
pub const RECORD_EXIT: u32 = 5;
pub const RECORD_PROCESS: u32 = 6;
pub const RECORD_WAKE: u32 = 7;
pub const RECORD_STALL: u32 = 8;
pub const RECORD_THREAD: u32 = 9;

/// Indices of the per-CPU drop counters (`DROPS`): a failed ring reservation is counted
/// under the kind of record that was lost, so every loss is named.
pub mod drop_index {
    /// A call's entry record.
    pub const ENTRY: u32 = 0;
    /// A call's exit record.
    pub const EXIT: u32 = 1;
    /// A link-map notification (the target was not stopped; a rescan catches up).
    pub const LINK_MAP: u32 = 2;
    /// AQL packets a doorbell published beyond what one probe run reads.
    pub const TRUNCATED: u32 = 3;
    /// An HSA queue creation or destruction.
    pub const QUEUE: u32 = 4;
    /// An AQL packet.
    pub const PACKET: u32 = 5;
    /// Out-parameter slots the exit did not find (a nested out-parameter call, or a
    /// full slot map): the value read at return is unknown.
    pub const OUT_PARAM: u32 = 6;
    /// AQL packets the packet processor had already consumed (their slot reset to
    /// INVALID) when the doorbell probe read the ring.
    pub const PACKET_UNREAD: u32 = 7;
    /// Not a loss: `*GetDevice` calls the temporary probes trapped but did not record
    /// ([`crate::GetDeviceMode`]).
    pub const GET_DEVICE_UNRECORDED: u32 = 8;
    /// Communicator or stream state a process was refused past its quota or its user's
    /// (`rocsync_common::COMM_STATE_PER_PROCESS`, `COMM_STATE_PER_USER`), or with the
    /// maps full (`COMM_STATE_ENTRIES`): those collectives are numbered 0 and
    /// name no communicator.
    pub const COMM_STATE: u32 = 9;
    /// An exiting thread's name (its record from the exit tracepoint): the thread's
    /// calls, if read after it is gone, are then named `thread TID`.
    pub const THREAD_NAME: u32 = 10;
    pub const COUNT: u32 = 11;
}

/// [`EntryRecord::flags`]: the call was dropped by the agent filter. The record still
/// travels so that its exit pairs with it and a filtered event record is known to exist.
pub const ENTRY_FILTERED: u8 = 1;
/// [`ExitRecord::flags`]: the call had an out-parameter and its value was read.
pub const EXIT_OUT_READ: u32 = 1;
/// [`ExitRecord::flags`]: written by the entry probe of a call that has no return probe
/// (NCCL's collectives): `exit_ns` is its entry's, `ret` its
/// [`crate::Numbered::word`].
pub const EXIT_ENTRY_ONLY: u32 = 2;

/// A call entered: written by the entry probe. Its exit follows as an [`ExitRecord`]
/// from the same thread; userspace pairs them per thread, so nested calls stay two calls.
///
/// 56 bytes, so that with its sequence word it fills one cache line of the call ring:
/// a record spread over two lines cost ≈0.04 of the trap per call
/// (`bench/overhead-breakdown.md`). Hence the narrow fields after `tid`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EntryRecord {
    /// [`RECORD_ENTRY`] in the low byte; above it, its thread's lost call records when
    /// the call entered ([`EntryRecord::kind_at`], [`LOSS_MASK`]).
    pub kind: u32,
    /// Process id (tgid).
    pub pid: u32,
    /// Thread id as the OS sees it.
    pub tid: u32,
    /// [`crate::Api`] id.
    pub api: u16,
    /// [`ENTRY_FILTERED`].
    pub flags: u8,
    /// The agent (device) the call was attributed to, when the process's capture is
    /// restricted to some agents; [`NO_DEVICE`] otherwise ([`EntryRecord::agent`]). The
    /// daemon splits one process's calls between traces on disjoint agent sets by it.
    pub device: i8,
    /// Assigned at entry from one global counter: orders calls across threads.
    pub correlation: u64,
    /// CLOCK_MONOTONIC ns.
    pub enter_ns: u64,
    /// Argument registers (rdi, rsi, rdx).
    pub args: [u64; 3],
}

// Every API id fits the entry record's `api`.
const _: () = {
    let mut i = 0;
    while i < crate::Api::ALL.len() {
        assert!((crate::Api::ALL[i] as u32) <= u16::MAX as u32);
        i += 1;
    }
};

/// The bits of its thread's count of lost call records that entry and exit records carry.
/// A return is paired with an entry only where both carry the same count: none of the
/// thread's records was lost between them, so the entry is this return's own (with one
/// lost, an entry met a later call's return: a 2.7 s `hipEventQuery` that never
/// happened). Counts 2^24 losses apart would look equal: minutes of one thread's
/// records all lost at 150 000 a second.
pub const LOSS_MASK: u32 = (1 << 24) - 1;
/// Slots of the probes' per-thread loss counts (a thread's is its id's low bits).
pub const LOSS_SLOTS: u32 = 4096;

impl EntryRecord {
    /// An entry's `kind`: [`RECORD_ENTRY`], and `losses` (its thread's, masked) above.
    #[inline(always)]
    pub const fn kind_at(losses: u64) -> u32 {
        RECORD_ENTRY | ((losses as u32 & LOSS_MASK) << 8)
    }

    /// Its thread's lost call records when the call entered ([`LOSS_MASK`]'s bits).
    pub const fn losses(&self) -> u32 {
        self.kind >> 8
    }

    /// A device as the record holds it: agents are those of the 64-bit agent sets, any
    /// other device is [`NO_DEVICE`] (no agent set can name it).
    #[inline(always)]
    pub const fn agent(device: i32) -> i8 {
        if device >= 0 && device < 64 {
            device as i8
        } else {
            NO_DEVICE as i8
        }
    }
}

/// A call returned: written by the exit probe.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExitRecord {
    pub kind: u32,
    pub pid: u32,
    pub tid: u32,
    /// [`crate::Api`] id, to check the pairing.
    pub api: u32,
    pub exit_ns: u64,
    /// The return value (`hipError_t`), sign-extended.
    pub ret: i64,
    /// The value an out-parameter pointed to at return ([`EXIT_OUT_READ`] set).
    pub out: u64,
    /// [`EXIT_OUT_READ`].
    pub flags: u32,
    /// Its thread's lost call records when the call returned ([`LOSS_MASK`]'s bits).
    pub losses: u32,
}

/// The link-map probe's cookie when the loader exports no `_r_debug`: it then stops the
/// target at every link-map change, not only at those that added objects.
pub const NO_R_DEBUG: u64 = u64::MAX;

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

/// [`ProcessRecord::event`]: a traced process forked a child process, now traced too.
pub const PROCESS_FORK: u32 = 1;
/// [`ProcessRecord::event`]: a traced process's main thread exited.
pub const PROCESS_EXIT: u32 = 2;
/// [`ProcessRecord::event`]: a process replaced its image (daemon mode: any process).
pub const PROCESS_EXEC: u32 = 3;

/// The traced process tree changed (the kernel's fork and exit tracepoints).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessRecord {
    pub kind: u32,
    pub event: u32,
    /// The forking (or exiting) process.
    pub pid: u32,
    /// The child process (fork only).
    pub child: u32,
    pub ns: u64,
}

/// A thread of a traced process other than its main thread exited: its name as the
/// kernel had it then (`comm`), which procfs no longer holds once it is gone — a thread
/// that made its calls and left before they were read is still named.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadRecord {
    pub kind: u32,
    pub pid: u32,
    pub tid: u32,
    pub pad: u32,
    /// NUL-padded, as `/proc/PID/task/TID/comm` without its newline.
    pub comm: [u8; 16],
}

/// Nothing but a wakeup: the call ring (which cannot wake its reader) is filling. Goes
/// through the ring, whose reader is woken by it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WakeRecord {
    pub kind: u32,
    pub pad: u32,
}

/// A synchronisation of a process the daemon counts returned after longer than its
/// stall threshold (`STALL_NS`): found at the return, in the kernel; nothing is written
/// for calls under it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StallRecord {
    pub kind: u32,
    pub api: u32,
    pub pid: u32,
    pub tid: u32,
    /// The device counted for the call ([`NO_DEVICE`] when unknown).
    pub device: i32,
    pub pad: u32,
    /// CLOCK_MONOTONIC ns at its entry and its return.
    pub entry_ns: u64,
    pub exit_ns: u64,
    /// Its first argument (the stream or event), and what it returned.
    pub arg0: u64,
    pub ret: i64,
}

/// Where `struct task_struct` keeps `pid` and `tgid` on the running kernel (from its BTF),
/// for the fork tracepoint to tell a child process from a new thread.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskLayout {
    pub pid: u32,
    pub tgid: u32,
}

/// An HSA queue created (or destroyed, `created == 0`) by a target.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueRecord {
    pub kind: u32,
    pub pid: u32,
    pub tid: u32,
    /// [`QUEUE_CREATED`], [`QUEUE_DESTROYED`] or [`QUEUE_DISCOVERED`].
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

/// [`QueueRecord::created`]: seen created by `hsa_queue_create`.
pub const QUEUE_CREATED: u32 = 1;
/// [`QueueRecord::created`]: destroyed.
pub const QUEUE_DESTROYED: u32 = 0;
/// [`QueueRecord::created`]: created before the capture, found at its first doorbell
/// (its `amd_signal_t` is a doorbell whose `queue_ptr` leads to it); agent unknown.
pub const QUEUE_DISCOVERED: u32 = 2;
/// [`QueueRecord::ordinal`] of a queue whose agent is unknown.
pub const UNKNOWN_AGENT: u32 = u32::MAX;

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
    /// Highest write index read so far: every packet up to it was read or counted;
    /// `u64::MAX` (-1) before the first doorbell.
    pub last: u64,
    /// Highest write index any doorbell announced (several producers may ring out of
    /// order); `u64::MAX` before the first.
    pub rung: u64,
    /// The unwritten slot reading last stopped at (said once, not at every nested or
    /// repeated doorbell); `u64::MAX` when none.
    pub stalled: u64,
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

/// The per-thread slot of a call whose out-parameter is read at return (stream
/// creation, `*GetDevice`): rare calls, so the common path has no map update.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutSlot {
    /// The out-parameter pointer.
    pub pointer: u64,
    /// The [`crate::Api`] id, so a nested call's exit does not take another's slot.
    pub api: u32,
    /// The device the call was attributed to ([`NO_DEVICE`] in unrestricted captures).
    pub device: i32,
}

/// Device of an unrestricted capture (no attribution needed).
pub const NO_DEVICE: i32 = -1;

/// Key of the per-process handle maps (stream → device, event → device).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HandleKey {
    pub tgid: u64,
    pub handle: u64,
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: plain `#[repr(C)]` data with explicit padding and no invalid bit patterns.
    unsafe impl aya::Pod for super::OutSlot {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::TaskLayout {}
    // SAFETY: as above (two u64).
    unsafe impl aya::Pod for super::HandleKey {}
}
