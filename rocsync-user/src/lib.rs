//! rocsync: traces GPU synchronisation in unmodified HIP and CUDA processes with eBPF
//! uprobes.
//!
//! The modules follow the data path: [`calls`] — the probes feed the ring, the pipeline
//! runs ingest (decode, pair, order) → resolve (wait rule, barrier links) → emit
//! (Kineto, raw, files, summary), counting everything in the stats —; [`capture`] drives
//! a live capture, [`daemon`] is the always-on mode, [`stacks`] reads where a process's
//! threads are, [`kubernetes`] names a process's pod; [`read`] reads traces back (the
//! report, annotate); [`front`] is the command line and the subcommands; [`os`] is what
//! rocsync needs of the system (clocks, `/proc`, signals, standard streams, users).

pub mod calls;
pub mod capture;
pub(crate) mod daemon;
pub mod front;
pub mod kubernetes;
pub mod os;
pub mod read;
pub mod stacks;
pub(crate) mod units;

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
        $crate::os::stderr::line(format_args!($($arg)*))
    };
}

/// The eBPF object built from `rocsync-ebpf` by this crate's build script.
pub static PROBES: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/rocsync"));
