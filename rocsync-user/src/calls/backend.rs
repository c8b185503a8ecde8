//! One table per GPU runtime: which libraries it lives in, which of its functions are
//! hooked, and how its trace fields are named. Capture, resolution and writing are shared.

use rocsync_common::{Api, Backend};

pub struct Runtime {
    pub backend: Backend,
    /// As the user names it (`--backend`).
    pub name: &'static str,
    /// The library, for messages.
    pub library: &'static str,
    /// Its file name, unversioned: any `<soname>.N…` is the runtime too.
    pub soname: &'static str,
    /// Another library of the same exports (RCCL, for NCCL).
    pub twin: Option<&'static str>,
    /// Libraries that link the runtime statically, keeping its functions as local symbols
    /// (NCCL carries its own CUDA runtime: its stream waits never reach libcudart).
    pub carried_by: Option<&'static str>,
    /// Prefix of the runtime-specific trace fields (`hip_event`, `cuda_event`, …).
    pub field_prefix: &'static str,
}

pub static RUNTIMES: [Runtime; 4] = [
    Runtime {
        backend: Backend::Hip,
        name: "hip",
        library: "libamdhip64",
        soname: "libamdhip64.so",
        twin: None,
        carried_by: None,
        field_prefix: "hip",
    },
    Runtime {
        backend: Backend::Cuda,
        name: "cuda",
        library: "libcudart",
        soname: "libcudart.so",
        twin: None,
        carried_by: Some("libnccl.so"),
        field_prefix: "cuda",
    },
    Runtime {
        backend: Backend::Nccl,
        name: "nccl",
        library: "libnccl/librccl",
        soname: "libnccl.so",
        twin: Some("librccl.so"),
        carried_by: None,
        field_prefix: "nccl",
    },
    Runtime {
        backend: Backend::CudaDriver,
        name: "cuda-driver",
        library: "libcuda",
        soname: "libcuda.so",
        twin: None,
        carried_by: None,
        field_prefix: "cuda",
    },
];

impl Runtime {
    pub fn of(backend: Backend) -> &'static Runtime {
        RUNTIMES
            .iter()
            .find(|r| r.backend == backend)
            .expect("every backend has a table")
    }

    pub fn by_name(name: &str) -> Option<&'static Runtime> {
        RUNTIMES.iter().find(|r| r.name == name)
    }

    /// Whether `file_name` is this runtime's library (any version of it).
    pub fn matches_library(&self, file_name: &str) -> bool {
        is_version_of(file_name, self.soname)
            || self.twin.is_some_and(|t| is_version_of(file_name, t))
    }

    /// Whether `file_name` is a library carrying this runtime statically.
    pub fn carried_by(&self, file_name: &str) -> bool {
        self.carried_by.is_some_and(|c| is_version_of(file_name, c))
    }

    /// Whether any of its functions is probed unless asked (not the driver's).
    pub fn probed_by_default(&self) -> bool {
        self.apis().any(Api::probed_by_default)
    }

    /// The hooked functions of this runtime.
    pub fn apis(&self) -> impl Iterator<Item = Api> + '_ {
        Api::ALL
            .iter()
            .copied()
            .filter(|a| a.backend() == self.backend)
    }
}

/// Whether `file_name` is the library `soname` or a version of it: `libamdhip64.so`,
/// `libamdhip64.so.5`, `libamdhip64.so.6.2.41133`, …
pub fn is_version_of(file_name: &str, soname: &str) -> bool {
    file_name
        .strip_prefix(soname)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_runtime_hooks_the_functions_of_its_headers() {
        // Written from hip_runtime_api.h and cuda_runtime_api.h, not from `Api`.
        let sync = [
            "EventRecord",
            "EventRecordWithFlags",
            "StreamWaitEvent",
            "EventSynchronize",
            "EventQuery",
            "StreamSynchronize",
            "DeviceSynchronize",
            "EventDestroy",
            "SetDevice",
            "GetDevice",
            "StreamCreate",
            "StreamCreateWithFlags",
            "StreamCreateWithPriority",
            "StreamDestroy",
            // Opt-in (`--probe launches`).
            "LaunchKernel",
            "MemcpyAsync",
        ];
        let per_thread = |suffix: &str, names: &[&str]| -> Vec<String> {
            names.iter().map(|n| format!("{n}{suffix}")).collect()
        };
        let hip = ["EventRecord", "StreamWaitEvent", "StreamSynchronize"];
        let cuda = [
            "EventRecord",
            "EventRecordWithFlags",
            "StreamWaitEvent",
            "StreamSynchronize",
        ];
        for (backend, prefix, suffix, spt) in [
            (Backend::Hip, "hip", "_spt", &hip[..]),
            (Backend::Cuda, "cuda", "_ptsz", &cuda[..]),
        ] {
            let mut want: Vec<String> = sync
                .iter()
                .map(|n| n.to_string())
                .chain(per_thread(suffix, spt))
                .map(|n| format!("{prefix}{n}"))
                .collect();
            want.sort();
            let mut got: Vec<String> = Runtime::of(backend)
                .apis()
                .map(|a| a.symbol().to_string())
                .collect();
            got.sort();
            assert_eq!(got, want, "{backend:?}");
        }
        assert!(Runtime::of(Backend::Cuda).matches_library("libcudart.so.13"));
        assert!(!Runtime::of(Backend::Hip).matches_library("libcudart.so.13"));
        assert!(Runtime::of(Backend::Cuda).carried_by("libnccl.so.2"));
        assert!(!Runtime::of(Backend::Hip).carried_by("libnccl.so.2"));
    }

    #[test]
    fn nccl_and_rccl_are_one_table_of_nccl_h_functions() {
        // Written from nccl.h (RCCL's rccl.h has the same names, `ncclAllToAll` for
        // NCCL 2.28's `ncclAlltoAll`).
        let mut want = [
            "ncclCommInitRank",
            "ncclCommInitRankConfig",
            "ncclCommInitAll",
            "ncclCommSplit",
            "ncclCommDestroy",
            "ncclCommAbort",
            "ncclAllReduce",
            "ncclBroadcast",
            "ncclReduce",
            "ncclAllGather",
            "ncclReduceScatter",
            "ncclAllToAll",
            "ncclAlltoAll",
            "ncclSend",
            "ncclRecv",
            "ncclGroupStart",
            "ncclGroupEnd",
        ];
        want.sort();
        let nccl = Runtime::of(Backend::Nccl);
        let mut got: Vec<&str> = nccl.apis().map(|a| a.symbol()).collect();
        got.sort();
        assert_eq!(got, want);
        assert!(nccl.matches_library("libnccl.so.2"));
        assert!(nccl.matches_library("librccl.so.1.0"));
        assert!(!nccl.matches_library("libnccl-net.so"));
    }

    #[test]
    fn the_driver_is_probed_for_its_event_records_alone() {
        let driver = Runtime::of(Backend::CudaDriver);
        let mut got: Vec<&str> = driver.apis().map(|a| a.symbol()).collect();
        got.sort();
        // From cuda.h.
        let want = [
            "cuEventRecord",
            "cuEventRecordWithFlags",
            "cuEventRecordWithFlags_ptsz",
            "cuEventRecord_ptsz",
        ];
        assert_eq!(got, want);
        assert!(driver.matches_library("libcuda.so.1"));
        assert!(!driver.matches_library("libcudart.so.13"));
    }
}
