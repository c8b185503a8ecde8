//! What in a process's maps the daemon probes: the GPU runtimes it links or carries
//! inside another library, and the HSA runtime's write path.

use crate::calls::{
    backend::{RUNTIMES, Runtime},
    probes::{maps, maps::Mapping},
};

/// What a probed file is to the daemon.
#[derive(Clone, Copy)]
pub(crate) enum Probed {
    /// A GPU runtime, and whether it is a copy carried inside another library.
    Runtime(&'static Runtime, bool),
    /// `libhsa-runtime64`: its queue write path.
    Hsa,
}

/// Whether `mappings` hold a runtime the daemon counts: HIP or CUDA, or HSA alone (OpenCL
/// on ROCm, direct HSA users: their queues and packets are what there is to count).
pub(crate) fn maps_runtime(mappings: &[Mapping]) -> bool {
    RUNTIMES.iter().filter(|r| r.probed_by_default()).any(|r| {
        maps::libraries(mappings, |n| r.matches_library(n))
            .next()
            .is_some()
    }) || maps::libraries(mappings, maps::is_hsa_runtime)
        .next()
        .is_some()
}

/// Each runtime file mapped, once, and what it is. The driver's records are probed only
/// when asked (`Api::probed_by_default`).
pub(crate) fn mapped(mappings: &[Mapping]) -> impl Iterator<Item = (&Mapping, Probed)> {
    let runtimes = RUNTIMES.iter().filter(|r| r.probed_by_default());
    let copies = runtimes.flat_map(|r| {
        let linked = maps::libraries(mappings, |n| r.matches_library(n));
        let carried = maps::libraries(mappings, |n| r.carried_by(n));
        (linked.map(move |m| (m, Probed::Runtime(r, false))))
            .chain(carried.map(move |m| (m, Probed::Runtime(r, true))))
    });
    // The HSA write path: queues, doorbells and packets (counted; recorded by traces).
    let hsa = maps::libraries(mappings, maps::is_hsa_runtime).map(|m| (m, Probed::Hsa));
    copies.chain(hsa)
}
