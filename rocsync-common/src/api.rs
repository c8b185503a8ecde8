//! Every hooked function of every runtime, one id each. Each API has its own pair of
//! probe programs with its id compiled in (`rocsync-ebpf/src/call_programs.rs`): one
//! generic pair reading the id from the uprobe cookie paid a helper call at entry and at
//! exit for it, 40 ns of a call's ≈1.2 µs trap here.

/// The GPU runtime a function belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Backend {
    Hip,
    Cuda,
    /// NCCL and RCCL: the same exports, the same signatures (`librccl.so` names its
    /// functions `nccl*`).
    Nccl,
    /// The CUDA driver (`libcuda.so`): only its event records, through which NCCL
    /// records the events its own streams wait on (`cuEventRecord`, found through
    /// `cuGetProcAddress`, not the runtime's `cudaEventRecord`).
    CudaDriver,
}

/// What a function does, whichever runtime it belongs to: HIP and CUDA share the shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    EventRecord,
    EventRecordWithFlags,
    StreamWaitEvent,
    EventSynchronize,
    EventQuery,
    StreamSynchronize,
    DeviceSynchronize,
    EventDestroy,
    SetDevice,
    GetDevice,
    StreamCreate,
    StreamCreateWithFlags,
    StreamCreateWithPriority,
    StreamDestroy,
    /// A kernel launch or an async copy: probed only when asked (`--probe`), for the
    /// stream it names (`rocsync annotate` learns copy-only streams from it). No wait,
    /// no state change.
    LaunchKernel,
    MemcpyAsync,
    /// `ncclCommInitRank(comm*, nranks, ncclUniqueId, rank)` and `…Config`: the
    /// communicator's id is hashed from the unique id at entry ([`crate::comm_id`]).
    CommInitRank,
    /// `ncclCommInitAll(comm*, ndev, devlist)`: one process's communicators, no unique id.
    CommInitAll,
    /// `ncclCommSplit(comm, color, key, newcomm*, config)`.
    CommSplit,
    /// `ncclCommDestroy(comm)`, `ncclCommAbort(comm)`: entry only.
    CommEnd,
    /// A collective: entry only ([`crate::Layout`] says where its arguments are).
    Collective,
    /// `ncclSend`/`ncclRecv`: entry only.
    PointToPoint,
    /// `ncclGroupStart`/`ncclGroupEnd`: entry only.
    Group,
}

/// What the exit probe reads through the first argument once the call has returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutParam {
    None,
    /// A pointer-sized handle (`hipStream_t*`, `cudaStream_t*`, `ncclComm_t*`).
    Handle,
    /// A C `int` (`int* device`).
    Int,
}

use crate::Cookie;

macro_rules! apis {
    ($($name:ident = $id:literal, $backend:ident, $op:ident, $symbol:literal;)*) => {
        #[repr(u32)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Api { $($name = $id,)* }

        impl Api {
            pub const ALL: &'static [Api] = &[$(Api::$name,)*];

            pub const fn from_u32(id: u32) -> Option<Api> {
                match id { $($id => Some(Api::$name),)* _ => None }
            }

            /// The exported symbol, exactly as the library names it.
            pub const fn symbol(self) -> &'static str {
                match self { $(Api::$name => $symbol,)* }
            }

            pub const fn backend(self) -> Backend {
                match self { $(Api::$name => Backend::$backend,)* }
            }

            pub const fn op(self) -> Op {
                match self { $(Api::$name => Op::$op,)* }
            }

            /// The name of its entry program in the probes' object.
            pub const fn enter_program(self) -> &'static str {
                match self { $(Api::$name => concat!("call_enter_", $id),)* }
            }

            /// The name of its exit program.
            pub const fn exit_program(self) -> &'static str {
                match self { $(Api::$name => concat!("call_exit_", $id),)* }
            }
        }
    };
}

apis! {
    HipEventRecord = 1, Hip, EventRecord, "hipEventRecord";
    HipEventRecordSpt = 2, Hip, EventRecord, "hipEventRecord_spt";
    HipEventRecordWithFlags = 3, Hip, EventRecordWithFlags, "hipEventRecordWithFlags";
    HipStreamWaitEvent = 4, Hip, StreamWaitEvent, "hipStreamWaitEvent";
    HipStreamWaitEventSpt = 5, Hip, StreamWaitEvent, "hipStreamWaitEvent_spt";
    HipEventSynchronize = 6, Hip, EventSynchronize, "hipEventSynchronize";
    HipStreamSynchronize = 7, Hip, StreamSynchronize, "hipStreamSynchronize";
    HipStreamSynchronizeSpt = 8, Hip, StreamSynchronize, "hipStreamSynchronize_spt";
    HipDeviceSynchronize = 9, Hip, DeviceSynchronize, "hipDeviceSynchronize";
    HipEventDestroy = 10, Hip, EventDestroy, "hipEventDestroy";
    HipSetDevice = 11, Hip, SetDevice, "hipSetDevice";
    HipGetDevice = 12, Hip, GetDevice, "hipGetDevice";
    HipStreamCreate = 13, Hip, StreamCreate, "hipStreamCreate";
    HipStreamCreateWithFlags = 14, Hip, StreamCreateWithFlags, "hipStreamCreateWithFlags";
    HipStreamCreateWithPriority = 15, Hip, StreamCreateWithPriority, "hipStreamCreateWithPriority";
    HipStreamDestroy = 16, Hip, StreamDestroy, "hipStreamDestroy";
    CudaEventRecord = 17, Cuda, EventRecord, "cudaEventRecord";
    CudaEventRecordPtsz = 18, Cuda, EventRecord, "cudaEventRecord_ptsz";
    CudaEventRecordWithFlags = 19, Cuda, EventRecordWithFlags, "cudaEventRecordWithFlags";
    CudaEventRecordWithFlagsPtsz = 20, Cuda, EventRecordWithFlags, "cudaEventRecordWithFlags_ptsz";
    CudaStreamWaitEvent = 21, Cuda, StreamWaitEvent, "cudaStreamWaitEvent";
    CudaStreamWaitEventPtsz = 22, Cuda, StreamWaitEvent, "cudaStreamWaitEvent_ptsz";
    CudaEventSynchronize = 23, Cuda, EventSynchronize, "cudaEventSynchronize";
    CudaStreamSynchronize = 24, Cuda, StreamSynchronize, "cudaStreamSynchronize";
    CudaStreamSynchronizePtsz = 25, Cuda, StreamSynchronize, "cudaStreamSynchronize_ptsz";
    CudaDeviceSynchronize = 26, Cuda, DeviceSynchronize, "cudaDeviceSynchronize";
    CudaEventDestroy = 27, Cuda, EventDestroy, "cudaEventDestroy";
    CudaSetDevice = 28, Cuda, SetDevice, "cudaSetDevice";
    CudaGetDevice = 29, Cuda, GetDevice, "cudaGetDevice";
    CudaStreamCreate = 30, Cuda, StreamCreate, "cudaStreamCreate";
    CudaStreamCreateWithFlags = 31, Cuda, StreamCreateWithFlags, "cudaStreamCreateWithFlags";
    CudaStreamCreateWithPriority = 32, Cuda, StreamCreateWithPriority, "cudaStreamCreateWithPriority";
    CudaStreamDestroy = 33, Cuda, StreamDestroy, "cudaStreamDestroy";
    HipEventQuery = 34, Hip, EventQuery, "hipEventQuery";
    CudaEventQuery = 35, Cuda, EventQuery, "cudaEventQuery";
    HipLaunchKernel = 36, Hip, LaunchKernel, "hipLaunchKernel";
    HipMemcpyAsync = 37, Hip, MemcpyAsync, "hipMemcpyAsync";
    CudaLaunchKernel = 38, Cuda, LaunchKernel, "cudaLaunchKernel";
    CudaMemcpyAsync = 39, Cuda, MemcpyAsync, "cudaMemcpyAsync";
    NcclCommInitRank = 40, Nccl, CommInitRank, "ncclCommInitRank";
    NcclCommInitRankConfig = 41, Nccl, CommInitRank, "ncclCommInitRankConfig";
    NcclCommInitAll = 42, Nccl, CommInitAll, "ncclCommInitAll";
    NcclCommSplit = 43, Nccl, CommSplit, "ncclCommSplit";
    NcclCommDestroy = 44, Nccl, CommEnd, "ncclCommDestroy";
    NcclCommAbort = 45, Nccl, CommEnd, "ncclCommAbort";
    NcclAllReduce = 46, Nccl, Collective, "ncclAllReduce";
    NcclBroadcast = 47, Nccl, Collective, "ncclBroadcast";
    NcclReduce = 48, Nccl, Collective, "ncclReduce";
    NcclAllGather = 49, Nccl, Collective, "ncclAllGather";
    NcclReduceScatter = 50, Nccl, Collective, "ncclReduceScatter";
    NcclAllToAll = 51, Nccl, Collective, "ncclAllToAll";
    NcclSend = 52, Nccl, PointToPoint, "ncclSend";
    NcclRecv = 53, Nccl, PointToPoint, "ncclRecv";
    NcclGroupStart = 54, Nccl, Group, "ncclGroupStart";
    NcclGroupEnd = 55, Nccl, Group, "ncclGroupEnd";
    // NCCL 2.28 spells it so; RCCL `ncclAllToAll`.
    NcclAlltoAll = 56, Nccl, Collective, "ncclAlltoAll";
    CuEventRecord = 57, CudaDriver, EventRecord, "cuEventRecord";
    CuEventRecordPtsz = 58, CudaDriver, EventRecord, "cuEventRecord_ptsz";
    CuEventRecordWithFlags = 59, CudaDriver, EventRecordWithFlags, "cuEventRecordWithFlags";
    CuEventRecordWithFlagsPtsz = 60, CudaDriver, EventRecordWithFlags, "cuEventRecordWithFlags_ptsz";
}

impl Op {
    /// Whether the call waits or synchronizes. The others change what later calls
    /// resolve to (records, destroys, devices, streams).
    pub const fn waits(self) -> bool {
        matches!(
            self,
            Op::StreamWaitEvent
                | Op::EventSynchronize
                | Op::EventQuery
                | Op::StreamSynchronize
                | Op::DeviceSynchronize
        )
    }

    /// A launch or an async copy: no wait, no state change, probed only when asked.
    pub const fn launches(self) -> bool {
        matches!(self, Op::LaunchKernel | Op::MemcpyAsync)
    }

    /// Names of the captured arguments, in register order (rdi, rsi, rdx). Out-parameters
    /// are named after the value read at return, not the pointer.
    pub const fn arg_names(self) -> &'static [&'static str] {
        match self {
            Op::EventRecord => &["event", "stream"],
            Op::EventRecordWithFlags => &["event", "stream", "flags"],
            Op::StreamWaitEvent => &["stream", "event", "flags"],
            Op::EventSynchronize | Op::EventQuery | Op::EventDestroy => &["event"],
            Op::StreamSynchronize | Op::StreamDestroy => &["stream"],
            Op::DeviceSynchronize => &[],
            Op::SetDevice | Op::GetDevice => &["device"],
            Op::StreamCreate => &["stream"],
            Op::StreamCreateWithFlags => &["stream", "flags"],
            Op::StreamCreateWithPriority => &["stream", "flags", "priority"],
            // Not in register order: the stream is read from where the ABI puts it
            // (`Cookie::stream_source`) into the second slot.
            Op::LaunchKernel => &["function", "stream"],
            Op::MemcpyAsync => &["dst", "stream"],
            // Read where the ABI puts them ([`crate::Layout`]); `ranks` is
            // `nranks | rank << 32`, `split` is `color | key << 32`.
            Op::CommInitRank => &["comm", "comm_id", "ranks"],
            Op::CommInitAll => &["comm", "ndev"],
            Op::CommSplit => &["comm", "comm_id", "split"],
            Op::CommEnd => &["comm"],
            Op::Collective | Op::PointToPoint => &["comm", "stream", "count"],
            Op::Group => &[],
        }
    }

    /// Position of the event argument, if any (the hot path avoids name lookups).
    pub const fn event_index(self) -> Option<usize> {
        match self {
            Op::EventRecord
            | Op::EventRecordWithFlags
            | Op::EventSynchronize
            | Op::EventQuery
            | Op::EventDestroy => Some(0),
            Op::StreamWaitEvent => Some(1),
            _ => None,
        }
    }

    /// Position of the stream argument, if any.
    pub const fn stream_index(self) -> Option<usize> {
        match self {
            Op::EventRecord
            | Op::EventRecordWithFlags
            | Op::LaunchKernel
            | Op::MemcpyAsync
            | Op::Collective
            | Op::PointToPoint => Some(1),
            Op::StreamWaitEvent
            | Op::StreamSynchronize
            | Op::StreamDestroy
            | Op::StreamCreate
            | Op::StreamCreateWithFlags
            | Op::StreamCreateWithPriority => Some(0),
            _ => None,
        }
    }

    pub const fn out_param(self) -> OutParam {
        match self {
            Op::GetDevice => OutParam::Int,
            Op::StreamCreate
            | Op::StreamCreateWithFlags
            | Op::StreamCreateWithPriority
            | Op::CommInitRank
            | Op::CommInitAll
            | Op::CommSplit => OutParam::Handle,
            _ => OutParam::None,
        }
    }
}

impl OutParam {
    /// By raw id, so the exit probe decides with a few compares (no table the verifier
    /// would have to bound).
    #[inline(always)]
    pub const fn of_api_id(id: u32) -> OutParam {
        match Api::from_u32(id) {
            Some(api) => api.op().out_param(),
            None => OutParam::None,
        }
    }
}

impl Api {
    /// Whether a capture probes this function unless told otherwise. `*GetDevice` is
    /// not: frameworks call it thousands of times per step (PyTorch: ~3,700 per
    /// training step measured on an H200), and a probe costs a trap per call. Device
    /// attribution follows `*SetDevice` instead.
    /// Nor are launches and async copies (hotter still; only `rocsync annotate` needs
    /// them, for streams seen nowhere else): asked for by name with `--probe`.
    ///
    /// Nor are the driver's event records: the runtime's `cudaEventRecord` calls the
    /// exported `cuEventRecord`, so each record would pay two traps and show twice (the
    /// driver's row inside the runtime's), and NCCL 2.28's internal events are recorded
    /// through neither (bench/gpu-validation/collectives): asked for by name.
    pub const fn probed_by_default(self) -> bool {
        !matches!(self.op(), Op::GetDevice)
            && !self.op().launches()
            && !matches!(self.backend(), Backend::CudaDriver)
    }

    /// Its programs (name, return probe?): entry-only calls have no return probe.
    pub fn programs(self) -> impl Iterator<Item = (&'static str, bool)> {
        let exit = (!self.entry_only()).then_some((self.exit_program(), true));
        [(self.enter_program(), false)].into_iter().chain(exit)
    }

    /// Whether it has no return probe ([`Cookie::entry_only`]): collectives are
    /// enqueued, not waited in, and a few hundred a step need not pay two traps.
    pub const fn entry_only(self) -> bool {
        Cookie::of(self).entry_only()
    }

    /// The launch and copy functions (`--probe launches` names them all).
    pub const LAUNCHES: &'static [Api] = &[
        Api::HipLaunchKernel,
        Api::HipMemcpyAsync,
        Api::CudaLaunchKernel,
        Api::CudaMemcpyAsync,
    ];

    /// Whether counting needs nothing of its return: a record's, a stream wait's, a
    /// destroy's or a poll's count is its entry, and nothing waits in it (no stall, no
    /// hang: a poll never is one). The daemon probes their returns only while something
    /// records (a trace, the flight recorder): a counted process pays one trap per such
    /// call, not two. Their errors, and polls' durations, are counted only while their
    /// returns are probed.
    pub const fn return_optional(self) -> bool {
        matches!(
            self.op(),
            Op::EventRecord
                | Op::EventRecordWithFlags
                | Op::StreamWaitEvent
                | Op::EventDestroy
                | Op::StreamDestroy
                | Op::EventQuery
        ) && !self.entry_only()
    }

    /// The bit of each [`Api::return_optional`] API's id: the probes' `RETURNLESS`
    /// map holds it while their returns are not probed.
    pub const RETURN_OPTIONAL: u64 = {
        let mut mask = 0u64;
        let mut i = 0;
        while i < Api::ALL.len() {
            let api = Api::ALL[i];
            if api.return_optional() {
                mask |= 1 << (api as u32);
            }
            i += 1;
        }
        mask
    };

    /// Whether it polls (`*EventQuery`): a poll resolves no wait, so the daemon's budget
    /// may stop probing it.
    pub const fn is_polling(self) -> bool {
        matches!(self.op(), Op::EventQuery)
    }

    /// [`Api::is_polling`] by id, as the probes test it (two compares).
    #[inline(always)]
    pub const fn id_is_polling(id: u32) -> bool {
        id == Api::HipEventQuery as u32 || id == Api::CudaEventQuery as u32
    }

    /// Per-thread default-stream variants (`_spt`, `_ptsz`): stream 0 is the calling
    /// thread's own stream, not the legacy null stream.
    pub const fn per_thread_stream(self) -> bool {
        let s = self.symbol().as_bytes();
        let n = s.len();
        (n > 4 && s[n - 4] == b'_' && s[n - 3] == b's' && s[n - 2] == b'p' && s[n - 1] == b't')
            || (n > 5
                && s[n - 5] == b'_'
                && s[n - 4] == b'p'
                && s[n - 3] == b't'
                && s[n - 2] == b's'
                && s[n - 1] == b'z')
    }

    pub const fn arg_names(self) -> &'static [&'static str] {
        self.op().arg_names()
    }

    pub const fn out_param(self) -> OutParam {
        self.op().out_param()
    }
}

#[cfg(test)]
#[path = "api_tests.rs"]
mod tests;
