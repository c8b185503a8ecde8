//! One table per GPU runtime: which libraries it lives in, which of its functions are
//! hooked, and how its trace fields are named. Capture, resolution and writing are shared.

use rocsync_common::{Api, Backend};

use crate::probes::maps;

pub struct Runtime {
    pub backend: Backend,
    /// As the user names it (`--backend`).
    pub name: &'static str,
    /// The library, for messages.
    pub library: &'static str,
    pub matches_library: fn(&str) -> bool,
    /// Libraries that link the runtime statically, keeping its functions as local symbols
    /// (NCCL carries its own CUDA runtime: its stream waits never reach libcudart).
    pub carried_by: fn(&str) -> bool,
    /// Prefix of the runtime-specific trace fields (`hip_event`, `cuda_event`, …).
    pub field_prefix: &'static str,
}

pub static RUNTIMES: [Runtime; 2] = [
    Runtime {
        backend: Backend::Hip,
        name: "hip",
        library: "libamdhip64",
        matches_library: maps::is_hip_runtime,
        carried_by: |_| false,
        field_prefix: "hip",
    },
    Runtime {
        backend: Backend::Cuda,
        name: "cuda",
        library: "libcudart",
        matches_library: maps::is_cuda_runtime,
        carried_by: maps::carries_cuda_runtime,
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

    /// The hooked functions of this runtime.
    pub fn apis(&self) -> impl Iterator<Item = Api> + '_ {
        Api::ALL
            .iter()
            .copied()
            .filter(|a| a.backend() == self.backend)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_api_belongs_to_exactly_one_table() {
        let n: usize = RUNTIMES.iter().map(|r| r.apis().count()).sum();
        assert_eq!(n, Api::ALL.len());
        assert!(
            Runtime::of(Backend::Cuda)
                .apis()
                .any(|a| a.symbol() == "cudaEventRecordWithFlags")
        );
        assert!((Runtime::of(Backend::Cuda).matches_library)(
            "libcudart.so.13"
        ));
        assert!(!(Runtime::of(Backend::Hip).matches_library)(
            "libcudart.so.13"
        ));
    }
}
