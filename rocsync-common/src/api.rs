/// Every hooked API, one id each. The id travels as the uprobe cookie, so one generic pair of
/// programs serves every function.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Api {
    HipEventRecord = 1,
    HipEventRecordSpt = 2,
    HipEventRecordWithFlags = 3,
    HipStreamWaitEvent = 4,
    HipStreamWaitEventSpt = 5,
    HipEventSynchronize = 6,
    HipStreamSynchronize = 7,
    HipStreamSynchronizeSpt = 8,
    HipDeviceSynchronize = 9,
    HipEventDestroy = 10,
    HipSetDevice = 11,
    HipGetDevice = 12,
    HipStreamCreate = 13,
    HipStreamCreateWithFlags = 14,
    HipStreamCreateWithPriority = 15,
    HipStreamDestroy = 16,
}

/// What the exit probe reads through the first argument once the call has returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutParam {
    None,
    /// A pointer-sized handle (`hipStream_t*`).
    Handle,
    /// A C `int` (`int* deviceId`).
    Int,
}

impl OutParam {
    /// By raw id, so the exit probe decides with a few compares (no table the verifier
    /// would have to bound).
    pub const fn of_api_id(id: u32) -> OutParam {
        const GET_DEVICE: u32 = Api::HipGetDevice as u32;
        const CREATE: u32 = Api::HipStreamCreate as u32;
        const CREATE_WITH_FLAGS: u32 = Api::HipStreamCreateWithFlags as u32;
        const CREATE_WITH_PRIORITY: u32 = Api::HipStreamCreateWithPriority as u32;
        match id {
            GET_DEVICE => OutParam::Int,
            CREATE | CREATE_WITH_FLAGS | CREATE_WITH_PRIORITY => OutParam::Handle,
            _ => OutParam::None,
        }
    }
}

impl Api {
    pub const ALL: [Api; 16] = [
        Api::HipEventRecord,
        Api::HipEventRecordSpt,
        Api::HipEventRecordWithFlags,
        Api::HipStreamWaitEvent,
        Api::HipStreamWaitEventSpt,
        Api::HipEventSynchronize,
        Api::HipStreamSynchronize,
        Api::HipStreamSynchronizeSpt,
        Api::HipDeviceSynchronize,
        Api::HipEventDestroy,
        Api::HipSetDevice,
        Api::HipGetDevice,
        Api::HipStreamCreate,
        Api::HipStreamCreateWithFlags,
        Api::HipStreamCreateWithPriority,
        Api::HipStreamDestroy,
    ];

    pub const fn from_u32(id: u32) -> Option<Api> {
        if id >= 1 && id as usize <= Self::ALL.len() {
            Some(Self::ALL[id as usize - 1])
        } else {
            None
        }
    }

    /// The exported symbol, exactly as the library names it.
    pub const fn symbol(self) -> &'static str {
        match self {
            Api::HipEventRecord => "hipEventRecord",
            Api::HipEventRecordSpt => "hipEventRecord_spt",
            Api::HipEventRecordWithFlags => "hipEventRecordWithFlags",
            Api::HipStreamWaitEvent => "hipStreamWaitEvent",
            Api::HipStreamWaitEventSpt => "hipStreamWaitEvent_spt",
            Api::HipEventSynchronize => "hipEventSynchronize",
            Api::HipStreamSynchronize => "hipStreamSynchronize",
            Api::HipStreamSynchronizeSpt => "hipStreamSynchronize_spt",
            Api::HipDeviceSynchronize => "hipDeviceSynchronize",
            Api::HipEventDestroy => "hipEventDestroy",
            Api::HipSetDevice => "hipSetDevice",
            Api::HipGetDevice => "hipGetDevice",
            Api::HipStreamCreate => "hipStreamCreate",
            Api::HipStreamCreateWithFlags => "hipStreamCreateWithFlags",
            Api::HipStreamCreateWithPriority => "hipStreamCreateWithPriority",
            Api::HipStreamDestroy => "hipStreamDestroy",
        }
    }

    /// Names of the captured arguments, in register order (rdi, rsi, rdx). Out-parameters are
    /// named after the value read at return, not the pointer.
    pub const fn arg_names(self) -> &'static [&'static str] {
        match self {
            Api::HipEventRecord | Api::HipEventRecordSpt => &["event", "stream"],
            Api::HipEventRecordWithFlags => &["event", "stream", "flags"],
            Api::HipStreamWaitEvent | Api::HipStreamWaitEventSpt => &["stream", "event", "flags"],
            Api::HipEventSynchronize | Api::HipEventDestroy => &["event"],
            Api::HipStreamSynchronize | Api::HipStreamSynchronizeSpt | Api::HipStreamDestroy => {
                &["stream"]
            }
            Api::HipDeviceSynchronize => &[],
            Api::HipSetDevice | Api::HipGetDevice => &["device"],
            Api::HipStreamCreate => &["stream"],
            Api::HipStreamCreateWithFlags => &["stream", "flags"],
            Api::HipStreamCreateWithPriority => &["stream", "flags", "priority"],
        }
    }

    pub const fn out_param(self) -> OutParam {
        OutParam::of_api_id(self as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_are_dense() {
        for (i, api) in Api::ALL.iter().enumerate() {
            assert_eq!(*api as u32, i as u32 + 1);
            assert_eq!(Api::from_u32(*api as u32), Some(*api));
        }
        assert_eq!(Api::from_u32(0), None);
        assert_eq!(Api::from_u32(Api::ALL.len() as u32 + 1), None);
    }

    #[test]
    fn spt_variants_share_the_plain_argument_layout() {
        assert_eq!(
            Api::HipStreamWaitEventSpt.arg_names(),
            Api::HipStreamWaitEvent.arg_names()
        );
        assert_eq!(
            Api::HipEventRecordSpt.arg_names(),
            Api::HipEventRecord.arg_names()
        );
        for api in Api::ALL {
            assert!(
                api.arg_names().len() <= 3,
                "{api:?} captures at most 3 registers"
            );
        }
    }
}
