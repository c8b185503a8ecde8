//! rocsync: traces GPU synchronisation in unmodified HIP and CUDA processes with eBPF
//! uprobes.
//!
//! The modules follow the data path: [`probes`] (load, attach, placement) feed the ring;
//! [`pipeline`] runs [`ingest`] (decode, pair, order) → [`resolve`] (wait rule, barrier
//! links) → [`emit`] (Kineto, raw, files, summary), counting everything in [`stats`];
//! [`capture`] drives a live capture and [`commands`] are the subcommands.

pub(crate) mod acl;
pub(crate) mod agents;
pub mod annotate;
pub mod backend;
pub mod capture;
pub mod cli;
pub(crate) mod clock;
pub mod commands;
pub(crate) mod daemon;
pub mod demo;
pub mod doctor;
pub mod emit;
pub(crate) mod environ;
pub mod ingest;
pub mod input;
pub mod kubernetes;
pub(crate) mod lockfile;
pub mod pipeline;
pub(crate) mod preflight;
pub mod probes;
pub(crate) mod procfs;
pub mod report;
pub mod resolve;
pub mod signals;
pub mod stacks;
pub mod stats;
pub mod stderr;
pub mod stdio;
pub(crate) mod units;
pub(crate) mod users;

/// `rocsync --version`: the release, the commit built (`git rev-parse --short HEAD`,
/// `-dirty` with changes, "unknown" outside a git checkout), and the build id of the
/// embedded eBPF object: the first 16 hex digits of its SHA-256, taken at build time.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("ROCSYNC_COMMIT"),
    ", eBPF object sha256:",
    env!("ROCSYNC_PROBES_ID"),
    ")"
);

/// A diagnostic line on stderr, written off the caller's thread ([`stderr`]): a stderr
/// nobody reads never blocks a capture or the daemon.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::stderr::line(format_args!($($arg)*))
    };
}

/// The eBPF object built from `rocsync-ebpf` by this crate's build script.
pub static PROBES: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/rocsync"));
