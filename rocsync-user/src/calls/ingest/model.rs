//! The domain values every later stage works with: calls, HSA queues and AQL packets,
//! decoded and typed from the probes' records (or read back from a raw capture).

use rocsync_common::{
    Api, ENTRY_FILTERED, EntryRecord, Numbered, Op, OutParam, PacketRecord, QUEUE_DESTROYED,
    QUEUE_DISCOVERED, QueueRecord,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    pub api: Api,
    pub pid: u32,
    pub tid: u32,
    pub correlation: u64,
    pub enter_ns: u64,
    /// `None` when the call had not returned by the end of the capture.
    pub exit_ns: Option<u64>,
    pub ret: Option<i64>,
    /// Raw argument values, in the order of [`Api::arg_names`].
    pub args: [u64; 3],
    /// Dropped by the agent filter in the kernel: counted and used as a tombstone (a
    /// filtered event record hides older ones), never written as a row.
    pub filtered: bool,
}

/// How an argument is written: handles as `"0x…"` strings, the rest as integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    Handle,
    Unsigned,
    Signed,
}

pub fn arg_kind(name: &str) -> ArgKind {
    match name {
        // Pointers: a launch's function, a copy's destination.
        "event" | "stream" | "function" | "dst" => ArgKind::Handle,
        "device" | "priority" => ArgKind::Signed,
        _ => ArgKind::Unsigned,
    }
}

impl Call {
    /// A call as its entry record describes it: in flight until its exit pairs with it.
    /// The API id was validated by the decoder.
    pub fn entered(r: &EntryRecord) -> Option<Call> {
        let api = Api::from_u32(u32::from(r.api))?;
        let mut args = r.args;
        // An out-parameter is not written yet: its pointer means nothing to the reader.
        if !matches!(api.out_param(), OutParam::None) {
            args[0] = 0;
        }
        Some(Call {
            api,
            pid: r.pid,
            tid: r.tid,
            correlation: r.correlation,
            enter_ns: r.enter_ns,
            exit_ns: None,
            ret: None,
            args,
            filtered: r.flags & ENTRY_FILTERED != 0,
        })
    }

    pub fn ok(&self) -> bool {
        self.ret == Some(0)
    }

    /// An entry-only call's number and the arguments its entry's three words leave out:
    /// its `ret` holds them, as its entry probe wrote them.
    pub fn numbered(&self) -> Option<Numbered> {
        let n = Numbered::of_word(self.ret?);
        (self.api.op() == Op::Collective || self.api.op() == Op::PointToPoint).then_some(n)
    }

    /// The value of a named argument, if this API has it.
    pub fn arg(&self, name: &str) -> Option<u64> {
        let i = self.api.arg_names().iter().position(|n| *n == name)?;
        Some(self.args[i])
    }

    /// The event handle argument, if this API has one.
    #[inline]
    pub fn event(&self) -> Option<u64> {
        self.api.op().event_index().map(|i| self.args[i])
    }

    /// The stream handle argument, if this API has one.
    #[inline]
    pub fn stream(&self) -> Option<u64> {
        self.api.op().stream_index().map(|i| self.args[i])
    }
}

/// An HSA queue created or destroyed by a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Queue {
    pub pid: u32,
    pub tid: u32,
    pub created: bool,
    /// Created before the capture: found at its first doorbell, its agent unknown.
    pub discovered: bool,
    /// The `hsa_queue_t*`.
    pub queue: u64,
    /// `hsa_agent_t.handle`.
    pub agent: u64,
    pub base: u64,
    pub doorbell: u64,
    pub id: u64,
    pub size: u32,
    /// The agent's ordinal (GPU agents in enumeration order).
    pub ordinal: u32,
    pub ns: u64,
}

impl From<&QueueRecord> for Queue {
    fn from(q: &QueueRecord) -> Self {
        Queue {
            pid: q.pid,
            tid: q.tid,
            created: q.created != QUEUE_DESTROYED,
            discovered: q.created == QUEUE_DISCOVERED,
            queue: q.queue,
            agent: q.agent,
            base: q.base,
            doorbell: q.doorbell,
            id: q.id,
            size: q.size,
            ordinal: q.ordinal,
            ns: q.ns,
        }
    }
}

/// One AQL packet as published at a doorbell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    pub pid: u32,
    /// The thread that rang the doorbell.
    pub tid: u32,
    pub ordinal: u32,
    pub queue: u64,
    pub agent: u64,
    /// The packet's write index (not wrapped).
    pub index: u64,
    pub ns: u64,
    pub bytes: [u8; 64],
}

impl From<&PacketRecord> for Packet {
    fn from(p: &PacketRecord) -> Self {
        Packet {
            pid: p.pid,
            tid: p.tid,
            ordinal: p.ordinal,
            queue: p.queue,
            agent: p.agent,
            index: p.index,
            ns: p.ns,
            bytes: p.packet,
        }
    }
}
