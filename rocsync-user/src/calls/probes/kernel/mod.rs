//! What the probes and this process share through the kernel: the call ring, the target
//! table, the probes' own counts and log, and the array maps mapped here that hold them.

pub(crate) mod call_ring;
pub(crate) mod counts;
pub(crate) mod diagnostics;
pub mod mapped;
pub(crate) mod targets;
