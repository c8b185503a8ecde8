//! A capture's settings, as `run` and `attach` use them: plain values the command line
//! was turned into (`commands/settings.rs`), nothing of the parser.

use std::path::PathBuf;

use crate::calls::{
    agents::AgentSet,
    backend::Runtime,
    probes::{ApiChoice, ProbeOptions},
};

/// The call ring of `run` and `attach` unless `--ring-size` says: room for 3 s of the
/// records of 150 000 calls a second (1 M slots), so that a reader kept from the CPU
/// by busy neighbours, or by attaching probes, catches up without losing any (the 8 MiB
/// it had, 0.4 s of them, lost 14 % at 120 000 calls/s beside two busy loops;
/// `bench/load.md`).
pub const CALL_RING_BYTES: u32 = 64 << 20;

pub struct CaptureSettings {
    /// The trace; `None`: `rocsync-<pid>-<time>.json`.
    pub output: Option<PathBuf>,
    /// The raw capture too (JSON Lines).
    pub raw: Option<PathBuf>,
    /// Replace an existing `output` or `raw` (otherwise refused before tracing).
    pub force: bool,
    /// Each probe point, followed child and the probes' diagnostics on stderr.
    pub verbose: bool,
    /// The runtimes whose libraries are looked for.
    pub runtimes: Vec<&'static Runtime>,
    /// The agents recorded (the others' calls are dropped in the kernel, and counted).
    pub agents: AgentSet,
    /// The functions probed.
    pub apis: ApiChoice,
    pub probes: ProbeOptions,
    /// How long an attach learns running threads' devices (zero: not at all).
    pub learn_devices: std::time::Duration,
    /// The live status line (drawn only on a terminal).
    pub status_line: bool,
    /// The processes the targets start are traced too.
    pub follow: bool,
    /// Where a running daemon listens: the capture's agents are claimed there.
    pub daemon_socket: PathBuf,
    /// The largest a trace file may grow (`--trace-max-bytes`): at it the capture ends.
    pub max_bytes: u64,
    /// `attach --wait`: targets that never load a runtime are an error, and no trace of
    /// nothing is written.
    pub waited: bool,
}
