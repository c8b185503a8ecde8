//! rocsync: traces GPU synchronisation in unmodified HIP and CUDA processes with eBPF
//! uprobes.
//!
//! The modules follow the data path: [`probes`] (load, attach, placement) feed the ring;
//! [`pipeline`] runs [`ingest`] (decode, pair, order) → [`resolve`] (wait rule, barrier
//! links) → [`emit`] (Kineto, raw, files, summary), counting everything in [`stats`];
//! [`capture`] drives a live capture and [`commands`] are the subcommands.

pub mod agents;
pub mod backend;
pub mod capture;
pub mod cli;
pub mod commands;
pub mod daemon;
pub mod emit;
pub mod ingest;
pub mod pipeline;
pub mod preflight;
pub mod probes;
pub mod resolve;
pub mod stats;

/// A diagnostic line on stderr. A stderr that cannot be written (a pipe whose reader
/// left, a log stream gone) must not end a capture or the daemon, as `eprintln!` would
/// by panicking: what cannot be said is dropped, and the work goes on.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// The eBPF object built from `rocsync-ebpf` by this crate's build script.
pub static PROBES: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/rocsync"));
