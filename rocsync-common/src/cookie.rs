//! What each call's probe programs know of their API, compiled in ([`Cookie`]).

use crate::{Api, Op};

/// What the probes know of a call's API, a constant of its programs: the API id and what
/// the entry probe needs to attribute the call to a device, in bit fields decoded with
/// shifts alone (no tables, which the verifier would have to bound).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cookie(pub u64);

impl Cookie {
    pub const KIND_SYNC: u64 = 0;
    pub const KIND_SET_DEVICE: u64 = 1;
    pub const KIND_GET_DEVICE: u64 = 2;
    pub const KIND_STREAM_CREATE: u64 = 3;
    pub const KIND_RECORD: u64 = 4;
    pub const KIND_OTHER: u64 = 5;
    pub const KIND_LAUNCH: u64 = 6;
    /// A communicator's set-up: its handle read at return, its id kept by the probes.
    pub const KIND_COMM_SETUP: u64 = 7;
    /// A collective or a send/receive: entry only, numbered per communicator.
    pub const KIND_COLLECTIVE: u64 = 8;
    /// Group calls and a communicator's end: entry only.
    pub const KIND_ENTRY_ONLY: u64 = 9;

    /// Where a launch's stream argument is at entry (x86-64 SysV), [`Cookie::stream_source`].
    pub const STREAM_IN_ARGS: u64 = 0;
    /// `*MemcpyAsync(dst, src, count, kind, stream)`: the 5th argument, `r8`.
    pub const STREAM_R8: u64 = 1;
    /// `*LaunchKernel(func, dim3 grid, dim3 block, args, sharedMem, stream)`: each dim3
    /// takes two registers, so `sharedMem` and `stream` go on the stack: `[rsp+16]`.
    pub const STREAM_STACK_2: u64 = 2;

    pub const fn of(api: Api) -> Cookie {
        let op = api.op();
        let stream = match op.stream_index() {
            Some(i) => i as u64 + 1,
            None => 0,
        };
        let event = match op.event_index() {
            Some(i) => i as u64 + 1,
            None => 0,
        };
        let kind = match op {
            Op::SetDevice => Self::KIND_SET_DEVICE,
            Op::GetDevice => Self::KIND_GET_DEVICE,
            Op::StreamCreate | Op::StreamCreateWithFlags | Op::StreamCreateWithPriority => {
                Self::KIND_STREAM_CREATE
            }
            Op::EventRecord | Op::EventRecordWithFlags => Self::KIND_RECORD,
            Op::StreamWaitEvent
            | Op::EventSynchronize
            | Op::EventQuery
            | Op::StreamSynchronize
            | Op::DeviceSynchronize => Self::KIND_SYNC,
            Op::EventDestroy | Op::StreamDestroy => Self::KIND_OTHER,
            Op::LaunchKernel | Op::MemcpyAsync => Self::KIND_LAUNCH,
            Op::CommInitRank | Op::CommInitAll | Op::CommSplit => Self::KIND_COMM_SETUP,
            Op::Collective | Op::PointToPoint => Self::KIND_COLLECTIVE,
            Op::CommEnd | Op::Group => Self::KIND_ENTRY_ONLY,
        };
        let source = match op {
            Op::LaunchKernel => Self::STREAM_STACK_2,
            Op::MemcpyAsync => Self::STREAM_R8,
            _ => match crate::Layout::of(api) {
                Some(layout) => layout as u64,
                None => Self::STREAM_IN_ARGS,
            },
        };
        Cookie(api as u64 | stream << 16 | event << 20 | kind << 24 | source << 28)
    }

    pub const fn api(self) -> u32 {
        (self.0 & 0xffff) as u32
    }

    /// Argument position of the stream, plus one (0: none).
    pub const fn stream_arg(self) -> usize {
        ((self.0 >> 16) & 0xf) as usize
    }

    /// Argument position of the event, plus one (0: none).
    pub const fn event_arg(self) -> usize {
        ((self.0 >> 20) & 0xf) as usize
    }

    pub const fn kind(self) -> u64 {
        (self.0 >> 24) & 0xf
    }

    /// Where the entry probe reads the stream argument from (`STREAM_*`), or an NCCL
    /// call's [`crate::Layout`].
    pub const fn stream_source(self) -> u64 {
        (self.0 >> 28) & 0xf
    }

    /// Whether the call has no return probe: its entry probe writes its whole record.
    pub const fn entry_only(self) -> bool {
        self.kind() == Self::KIND_COLLECTIVE || self.kind() == Self::KIND_ENTRY_ONLY
    }
}
