//! One entry and one exit program per API, its [`Cookie`] compiled in: the shared
//! programs of `calls` with nothing left to read at run time (a generic pair read the API
//! from the uprobe cookie, a helper call each side) and the branches of other APIs'
//! kinds folded away. Userspace attaches `Api::enter_program`/`Api::exit_program`; the
//! names are checked against those at compile time, the list's length against `Api::ALL`.

use core::ffi::c_void;

use aya_ebpf::programs::{ProbeContext, RetProbeContext};
use rocsync_common::{Api, Cookie};

use crate::calls;

const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

macro_rules! programs {
    ($($api:ident: $enter:ident, $exit:ident;)*) => {
        $(
            const _: () = assert!(same(stringify!($enter), Api::$api.enter_program()));
            const _: () = assert!(same(stringify!($exit), Api::$api.exit_program()));

            // What `#[uprobe]` expands to, in a section of its own: aya keeps, with each
            // program, room for its whole section's line info.
            #[unsafe(no_mangle)]
            #[unsafe(link_section = concat!("uprobe/", stringify!($enter)))]
            pub(crate) fn $enter(ctx: *mut c_void) -> u32 {
                calls::enter(&ProbeContext::new(ctx), const { Cookie::of(Api::$api) })
            }

            #[unsafe(no_mangle)]
            #[unsafe(link_section = concat!("uretprobe/", stringify!($exit)))]
            pub(crate) fn $exit(ctx: *mut c_void) -> u32 {
                calls::exit(&RetProbeContext::new(ctx), const { Cookie::of(Api::$api) })
            }
        )*
        const _: () = assert!([$(Api::$api),*].len() == Api::ALL.len());
    };
}

programs! {
    HipEventRecord: call_enter_1, call_exit_1;
    HipEventRecordSpt: call_enter_2, call_exit_2;
    HipEventRecordWithFlags: call_enter_3, call_exit_3;
    HipStreamWaitEvent: call_enter_4, call_exit_4;
    HipStreamWaitEventSpt: call_enter_5, call_exit_5;
    HipEventSynchronize: call_enter_6, call_exit_6;
    HipStreamSynchronize: call_enter_7, call_exit_7;
    HipStreamSynchronizeSpt: call_enter_8, call_exit_8;
    HipDeviceSynchronize: call_enter_9, call_exit_9;
    HipEventDestroy: call_enter_10, call_exit_10;
    HipSetDevice: call_enter_11, call_exit_11;
    HipGetDevice: call_enter_12, call_exit_12;
    HipStreamCreate: call_enter_13, call_exit_13;
    HipStreamCreateWithFlags: call_enter_14, call_exit_14;
    HipStreamCreateWithPriority: call_enter_15, call_exit_15;
    HipStreamDestroy: call_enter_16, call_exit_16;
    CudaEventRecord: call_enter_17, call_exit_17;
    CudaEventRecordPtsz: call_enter_18, call_exit_18;
    CudaEventRecordWithFlags: call_enter_19, call_exit_19;
    CudaEventRecordWithFlagsPtsz: call_enter_20, call_exit_20;
    CudaStreamWaitEvent: call_enter_21, call_exit_21;
    CudaStreamWaitEventPtsz: call_enter_22, call_exit_22;
    CudaEventSynchronize: call_enter_23, call_exit_23;
    CudaStreamSynchronize: call_enter_24, call_exit_24;
    CudaStreamSynchronizePtsz: call_enter_25, call_exit_25;
    CudaDeviceSynchronize: call_enter_26, call_exit_26;
    CudaEventDestroy: call_enter_27, call_exit_27;
    CudaSetDevice: call_enter_28, call_exit_28;
    CudaGetDevice: call_enter_29, call_exit_29;
    CudaStreamCreate: call_enter_30, call_exit_30;
    CudaStreamCreateWithFlags: call_enter_31, call_exit_31;
    CudaStreamCreateWithPriority: call_enter_32, call_exit_32;
    CudaStreamDestroy: call_enter_33, call_exit_33;
    HipEventQuery: call_enter_34, call_exit_34;
    CudaEventQuery: call_enter_35, call_exit_35;
    HipLaunchKernel: call_enter_36, call_exit_36;
    HipMemcpyAsync: call_enter_37, call_exit_37;
    CudaLaunchKernel: call_enter_38, call_exit_38;
    CudaMemcpyAsync: call_enter_39, call_exit_39;
    NcclCommInitRank: call_enter_40, call_exit_40;
    NcclCommInitRankConfig: call_enter_41, call_exit_41;
    NcclCommInitAll: call_enter_42, call_exit_42;
    NcclCommSplit: call_enter_43, call_exit_43;
    NcclCommDestroy: call_enter_44, call_exit_44;
    NcclCommAbort: call_enter_45, call_exit_45;
    NcclAllReduce: call_enter_46, call_exit_46;
    NcclBroadcast: call_enter_47, call_exit_47;
    NcclReduce: call_enter_48, call_exit_48;
    NcclAllGather: call_enter_49, call_exit_49;
    NcclReduceScatter: call_enter_50, call_exit_50;
    NcclAllToAll: call_enter_51, call_exit_51;
    NcclSend: call_enter_52, call_exit_52;
    NcclRecv: call_enter_53, call_exit_53;
    NcclGroupStart: call_enter_54, call_exit_54;
    NcclGroupEnd: call_enter_55, call_exit_55;
    NcclAlltoAll: call_enter_56, call_exit_56;
    CuEventRecord: call_enter_57, call_exit_57;
    CuEventRecordPtsz: call_enter_58, call_exit_58;
    CuEventRecordWithFlags: call_enter_59, call_exit_59;
    CuEventRecordWithFlagsPtsz: call_enter_60, call_exit_60;
}
