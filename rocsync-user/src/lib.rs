//! rocsync: traces GPU synchronisation in unmodified HIP processes with eBPF uprobes.

pub mod backend;
pub mod capture;
pub mod cli;
pub mod commands;
pub mod output;
pub mod preflight;
pub mod resolve;
pub mod sessions;
pub mod summary;
pub mod target;
pub mod trace;

/// The eBPF object built from `rocsync-ebpf` by this crate's build script.
pub static PROBES: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/rocsync"));
