//! The API table against prototypes written out by hand from the runtimes' headers.
use super::*;
use crate::Cookie;

#[test]
fn ids_round_trip_and_are_dense() {
    for (i, api) in Api::ALL.iter().enumerate() {
        assert_eq!(*api as u32, i as u32 + 1);
        assert_eq!(Api::from_u32(*api as u32), Some(*api));
    }
    assert_eq!(Api::from_u32(0), None);
    assert_eq!(Api::from_u32(Api::ALL.len() as u32 + 1), None);
    // Every id has its metrics slots.
    assert!(Api::ALL.len() < crate::metrics::METRIC_APIS as usize);
}

#[test]
fn per_thread_variants_share_the_plain_layout() {
    assert_eq!(
        Api::HipStreamWaitEventSpt.op(),
        Api::HipStreamWaitEvent.op()
    );
    assert_eq!(
        Api::CudaEventRecordWithFlagsPtsz.op(),
        Op::EventRecordWithFlags
    );
    for api in Api::ALL {
        assert!(
            api.arg_names().len() <= 3,
            "{api:?} captures at most 3 registers"
        );
    }
}

#[test]
fn arguments_follow_the_prototypes() {
    // From hip_runtime_api.h (CUDA's are the same): each op's captured arguments,
    // written here rather than derived from `arg_names`, with where the event and the
    // stream are.
    // (op, argument names, event position, stream position)
    type Prototype = (Op, &'static [&'static str], Option<usize>, Option<usize>);
    let prototypes: [Prototype; 23] = [
        (Op::EventRecord, &["event", "stream"], Some(0), Some(1)),
        (
            Op::EventRecordWithFlags,
            &["event", "stream", "flags"],
            Some(0),
            Some(1),
        ),
        (
            Op::StreamWaitEvent,
            &["stream", "event", "flags"],
            Some(1),
            Some(0),
        ),
        (Op::EventSynchronize, &["event"], Some(0), None),
        (Op::EventQuery, &["event"], Some(0), None),
        (Op::StreamSynchronize, &["stream"], None, Some(0)),
        (Op::DeviceSynchronize, &[], None, None),
        (Op::EventDestroy, &["event"], Some(0), None),
        (Op::SetDevice, &["device"], None, None),
        (Op::GetDevice, &["device"], None, None),
        (Op::StreamCreate, &["stream"], None, Some(0)),
        (
            Op::StreamCreateWithFlags,
            &["stream", "flags"],
            None,
            Some(0),
        ),
        (
            Op::StreamCreateWithPriority,
            &["stream", "flags", "priority"],
            None,
            Some(0),
        ),
        (Op::StreamDestroy, &["stream"], None, Some(0)),
        // The stream read from r8 / [rsp+16] into the second slot (`Cookie::stream_source`).
        (Op::LaunchKernel, &["function", "stream"], None, Some(1)),
        (Op::MemcpyAsync, &["dst", "stream"], None, Some(1)),
        // From nccl.h / rccl.h, read where `Layout` says.
        (Op::CommInitRank, &["comm", "comm_id", "ranks"], None, None),
        (Op::CommInitAll, &["comm", "ndev"], None, None),
        (Op::CommSplit, &["comm", "comm_id", "split"], None, None),
        (Op::CommEnd, &["comm"], None, None),
        (Op::Collective, &["comm", "stream", "count"], None, Some(1)),
        (
            Op::PointToPoint,
            &["comm", "stream", "count"],
            None,
            Some(1),
        ),
        (Op::Group, &[], None, None),
    ];
    for (op, names, event, stream) in prototypes {
        assert_eq!(op.arg_names(), names, "{op:?}");
        assert_eq!(
            (op.event_index(), op.stream_index()),
            (event, stream),
            "{op:?}"
        );
    }
    // Every API's op is one of these.
    for api in Api::ALL {
        assert!(prototypes.iter().any(|p| p.0 == api.op()), "{api:?}");
    }
}

#[test]
fn cookies_carry_the_api_and_its_argument_positions() {
    for api in Api::ALL {
        let c = Cookie::of(*api);
        assert_eq!(c.api(), *api as u32);
        assert_eq!(c.stream_arg(), api.op().stream_index().map_or(0, |i| i + 1));
        assert_eq!(c.event_arg(), api.op().event_index().map_or(0, |i| i + 1));
    }
    assert_eq!(
        Cookie::of(Api::CudaSetDevice).kind(),
        Cookie::KIND_SET_DEVICE
    );
    assert_eq!(
        Cookie::of(Api::HipStreamWaitEventSpt).kind(),
        Cookie::KIND_SYNC
    );
}

#[test]
fn out_parameters_by_id() {
    assert_eq!(
        OutParam::of_api_id(Api::CudaGetDevice as u32),
        OutParam::Int
    );
    assert_eq!(
        OutParam::of_api_id(Api::HipStreamCreateWithPriority as u32),
        OutParam::Handle
    );
    assert_eq!(
        OutParam::of_api_id(Api::CudaEventRecord as u32),
        OutParam::None
    );
    assert_eq!(OutParam::of_api_id(999), OutParam::None);
}

#[test]
fn per_thread_variants_and_default_probes() {
    assert!(Api::HipStreamSynchronizeSpt.per_thread_stream());
    assert!(Api::CudaEventRecordWithFlagsPtsz.per_thread_stream());
    assert!(!Api::HipStreamSynchronize.per_thread_stream());
    assert!(!Api::CudaGetDevice.probed_by_default());
    assert!(!Api::HipGetDevice.probed_by_default());
    assert!(Api::HipSetDevice.probed_by_default());
    assert_eq!(Cookie::of(Api::CudaEventQuery).kind(), Cookie::KIND_SYNC);
    assert_eq!(Api::HipEventQuery.op().event_index(), Some(0));
}

#[test]
fn launches_are_opt_in_and_read_their_stream_where_the_abi_puts_it() {
    for &api in Api::ALL {
        let launch = Api::LAUNCHES.contains(&api);
        assert_eq!(
            api.probed_by_default(),
            !launch && api.op() != Op::GetDevice && api.backend() != Backend::CudaDriver
        );
        assert_eq!(
            Cookie::of(api).kind() == Cookie::KIND_LAUNCH,
            launch,
            "{api:?}"
        );
        assert!(!launch || !api.op().waits());
    }
    for (api, source) in [
        (Api::HipLaunchKernel, Cookie::STREAM_STACK_2),
        (Api::CudaLaunchKernel, Cookie::STREAM_STACK_2),
        (Api::HipMemcpyAsync, Cookie::STREAM_R8),
        (Api::CudaMemcpyAsync, Cookie::STREAM_R8),
        (Api::HipEventRecord, Cookie::STREAM_IN_ARGS),
    ] {
        assert_eq!(Cookie::of(api).stream_source(), source, "{api:?}");
    }
}

#[test]
fn symbols_are_unique_and_name_their_backend() {
    for (i, a) in Api::ALL.iter().enumerate() {
        let prefix = match a.backend() {
            Backend::Hip => "hip",
            Backend::Cuda => "cuda",
            Backend::Nccl => "nccl",
            Backend::CudaDriver => "cu",
        };
        assert!(a.symbol().starts_with(prefix));
        assert!(Api::ALL[i + 1..].iter().all(|b| b.symbol() != a.symbol()));
    }
}

#[test]
fn the_probes_polling_test_is_the_tables() {
    for &api in Api::ALL {
        assert_eq!(Api::id_is_polling(api as u32), api.is_polling(), "{api:?}");
    }
    assert!(Api::HipEventQuery.is_polling() && !Api::HipEventRecord.is_polling());
}

#[test]
fn nccl_calls_are_entry_only_but_the_set_up_whose_handle_is_read_at_return() {
    for &api in Api::ALL {
        let entry_only = matches!(
            api.op(),
            Op::Collective | Op::PointToPoint | Op::Group | Op::CommEnd
        );
        assert_eq!(api.entry_only(), entry_only, "{api:?}");
        assert!(!entry_only || api.backend() == Backend::Nccl);
    }
    assert_eq!(
        Cookie::of(Api::NcclCommSplit).kind(),
        Cookie::KIND_COMM_SETUP
    );
    assert_eq!(
        Cookie::of(Api::NcclReduce).stream_source(),
        crate::Layout::Eight as u64
    );
    assert_eq!(
        OutParam::of_api_id(Api::NcclCommInitRank as u32),
        OutParam::Handle
    );
}
