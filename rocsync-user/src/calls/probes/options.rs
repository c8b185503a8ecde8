//! How probes are loaded and placed: the options a capture or the daemon gives them.

/// The ring's size in the probes' object, used when `ring_bytes` is `None`.
pub(super) const DEFAULT_RING: u32 = 8 << 20;
/// Longest time temporary `*GetDevice` probes stay attached by default. They trap every
/// call of a function a busy PyTorch thread calls ~250 000 times a second (+43-90 % for
/// as long as they stay, on the H200); a busy thread calls it within microseconds, so a
/// short window learns what matters (bench/learning.md). As a flag gives it (`attach`'s
/// and the daemon's `--learn-devices`).
pub const LEARN_DEVICES: &str = "100ms";

/// How probes are loaded and placed.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProbeOptions {
    /// Ring buffer size in bytes (a power of two, a multiple of the page size); the call
    /// ring gets as many, unless `call_ring_bytes` says otherwise.
    pub ring_bytes: Option<u32>,
    /// The call ring's own size in bytes (rounded to a power of two of 64-byte slots).
    pub call_ring_bytes: Option<u32>,
    /// Probe the first instruction even where placement would skip `endbr64`/`nop`.
    pub at_entry: bool,
    /// Show the probes' own diagnostics (`-v`).
    pub diagnostics: bool,
    /// Attach the call probes as classic (perf-event) uprobes even where the kernel has
    /// multi-uprobe links.
    pub classic_uprobes: bool,
    /// The daemon's labelled series (`--metric-labels`): how many the kernel holds, and
    /// how many of them one label group (a pod) may have (`None`: none labelled).
    pub labelled_series: Option<(u32, u32)>,
}
