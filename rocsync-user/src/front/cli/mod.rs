//! The command line as typed: parsed and checked value by value, nothing more. Each
//! command turns these into the plain settings it runs with (`commands/settings.rs`);
//! nothing below `commands/` sees a clap type.

use std::{path::PathBuf, time::Duration};

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum, ValueHint};

use rocsync_common::Api;

use crate::{calls::agents::AgentSet, daemon::protocol::DEFAULT_SOCKET, kubernetes::PodName};

mod daemon;
#[cfg(test)]
mod documented;

pub use daemon::DaemonArgs;

#[derive(Debug, Parser)]
#[command(
    name = "rocsync",
    version = crate::VERSION,
    about = "Trace GPU synchronisation (event record, stream wait, synchronize) in unmodified HIP and CUDA processes",
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Launch a command and trace it from its first HIP or CUDA call.
    Run(RunArgs),
    /// Trace running processes (HIP or CUDA).
    Attach(AttachArgs),
    /// Resolve a raw capture (--raw) into a Kineto trace.
    Convert(ConvertArgs),
    /// What a trace or raw capture says first: blocked time per API and device, the
    /// longest waits and their producers, who waits on whom, unresolved waits, losses.
    Report(ReportArgs),
    /// Merge a capture into a torch.profiler (Kineto) trace of the same process and time:
    /// fill the waits CUPTI left unresolved (CUDA), add the sync rows Kineto never writes
    /// (ROCm).
    Annotate(AnnotateArgs),
    /// Run always on: count every GPU process's synchronisations in the kernel and serve
    /// them as Prometheus metrics; record traces on request.
    Daemon(Box<DaemonArgs>),
    /// Ask the running daemon for a trace of some processes.
    Trace(TraceArgs),
    /// What the running daemon tracks, and the sessions recording.
    Status(StatusArgs),
    /// What this machine allows: kernel features, capabilities, GPU runtimes (each tried
    /// with a real attach); exits 1 when something needed is missing.
    Doctor(DoctorArgs),
    /// A first trace, with no GPU: rocsync runs a training loop's shape on a simulated
    /// HIP runtime built into it, traces it as `run` does and reports the trace.
    Demo(DemoArgs),
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where the trace goes (replaced if it exists)
    #[arg(short, long, value_name = "PATH", default_value = "rocsync-demo.json", value_hint = ValueHint::FilePath)]
    pub output: PathBuf,
    /// Be the traced program (what `rocsync demo` runs under `rocsync run`)
    #[arg(long, hide = true)]
    pub program: bool,
}

// `rocsync generate man|completions DIR`, for packagers (as `rg --generate`): kept out of
// `Cli` (main.rs sees it first) so the pages and completions made from `Cli` neither list
// nor complete it.
#[derive(Debug, Parser)]
#[command(
    name = "rocsync generate",
    bin_name = "rocsync generate",
    version = crate::VERSION,
    about = "Write rocsync's man pages or shell completions into DIR (for packagers)"
)]
pub struct GenerateArgs {
    pub what: Generated,
    /// Where the files go (created if missing)
    pub dir: PathBuf,
}

// `rocsync read-stacks --pid P --tid T` (hidden): the daemon's stack reader, run as a
// bounded child of its own (`stacks::child`); kept out of `Cli` as `generate` is.
#[derive(Debug, Parser)]
#[command(
    name = "rocsync read-stacks",
    bin_name = "rocsync read-stacks",
    version = crate::VERSION,
    about = "Print a process's stacks as JSON lines (the daemon runs this as a bounded child)"
)]
pub struct ReadStacksArgs {
    /// The process
    #[arg(long, value_name = "PID")]
    pub pid: u32,
    /// The blocked thread (a host tid) [default: the main thread]
    #[arg(long, value_name = "TID")]
    pub tid: Option<u32>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Generated {
    /// rocsync.1 and rocsync-<command>.1
    Man,
    /// rocsync.bash, _rocsync (zsh), rocsync.fish
    Completions,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print the checks as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The daemon's socket
    #[arg(long, value_name = "PATH", default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Print the daemon's answer as JSON
    #[arg(long)]
    pub json: bool,
}

/// One target is required; naming it without one lists them all.
#[derive(Debug, Args)]
#[command(group(
    ArgGroup::new("target")
        .required(true)
        .args(["pid", "all", "cgroup", "pod", "flight"])
))]
pub struct TraceArgs {
    /// Processes to trace (each must be one the daemon tracks): -p 1,2 or -p 1 -p 2
    #[arg(long, short, value_name = "PID", value_delimiter = ',', value_hint = ValueHint::Other)]
    pub pid: Vec<u32>,
    /// Every process the daemon tracks
    #[arg(long)]
    pub all: bool,
    /// The tracked processes whose cgroup path contains PATH (a pod, a container)
    #[arg(long, value_name = "PATH")]
    pub cgroup: Option<String>,
    /// Every tracked process of this Kubernetes pod (as `rocsync status` names it, or
    /// its UID where its names are unknown)
    #[arg(long, value_name = "NAMESPACE/NAME|UID", value_parser = PodName::parse)]
    pub pod: Option<PodName>,
    /// Record only these agents (devices), e.g. 0,1
    #[arg(long, value_name = "LIST", conflicts_with = "flight", value_parser = AgentSet::parse)]
    pub agents: Option<AgentSet>,
    /// What the flight recorder holds now (every process's last seconds), at once
    #[arg(long)]
    pub flight: bool,
    /// How long to record: seconds (10, 1.5) or with a unit (500ms, 10s, 2m)
    #[arg(long, short, value_name = "DURATION", default_value = "1s",
          allow_negative_numbers = true, value_parser = crate::units::parse_duration)]
    pub duration: Duration,
    /// Deprecated: --duration takes milliseconds as `500ms`
    #[arg(long, value_name = "MS", hide = true, conflicts_with = "duration")]
    pub duration_ms: Option<u64>,
    /// The traces' name (files are <name>-<time>-<id>[_<pid>].json in the daemon's state directory)
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Also write the traces here, as you (several processes: <stem>_<pid><ext>; `.gz`
    /// compresses); the daemon keeps its copy under its retention
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace -o files that exist (refused otherwise)
    #[arg(short, long)]
    pub force: bool,
    /// The daemon's socket
    #[arg(long, value_name = "PATH", default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
}

#[derive(Debug, Args)]
pub struct CaptureArgs {
    /// Kineto JSON trace to write (".gz" compresses) [default: rocsync-<pid>-<time>.json]
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also write every call as JSON Lines (see `rocsync convert`; ".gz" compresses)
    #[arg(long, value_name = "FILE")]
    pub raw: Option<PathBuf>,
    /// Replace -o and --raw files that exist (refused otherwise, before tracing)
    #[arg(short, long)]
    pub force: bool,
    /// Report each probed function and undecodable record
    #[arg(short, long)]
    pub verbose: bool,
    /// Trace only this runtime [default: every runtime the process maps]
    #[arg(long, value_parser = ["hip", "cuda", "nccl", "cuda-driver"])]
    pub backend: Option<String>,
    /// Ring buffer between the probes and rocsync, and room for as many records in the
    /// call ring: MiB, or KiB with a `K` suffix (a power of two, from 4K to 1024)
    /// [default: a 64 MiB call ring, 3 s of 150 000 calls/s, and an 8 MiB ring buffer]
    #[arg(long, value_name = "MIB", value_parser = parse_ring_size)]
    pub ring_size: Option<u32>,
    /// The largest a trace file may grow (bytes, or with K, M or G; at least 1M): at it
    /// the capture ends, and its trace says `truncated`
    #[arg(long, value_name = "SIZE", default_value = "512M", value_parser = parse_trace_max_bytes)]
    pub trace_max_bytes: u64,
    /// Probe each function's first instruction even where it is an endbr64 (to measure
    /// what probe placement saves)
    #[arg(long, hide = true)]
    pub probe_at_entry: bool,
    /// Attach the call probes as classic perf-event uprobes, not multi-uprobe links
    /// (the default on Linux ≥ 6.6: ≈ 5 % of the trap cheaper per call)
    #[arg(long)]
    pub classic_uprobes: bool,
    /// Record only these GPU agents (device ordinals, comma-separated) [default: all];
    /// calls on other devices are dropped in the kernel
    #[arg(long, value_name = "LIST", value_parser = AgentSet::parse)]
    pub agents: Option<AgentSet>,
    /// Functions not to probe, comma-separated: each probe costs a trap per call
    #[arg(long, value_name = "SYMBOLS", value_delimiter = ',', value_parser = parse_api)]
    pub skip: Vec<Api>,
    /// Functions to probe besides the default set, comma-separated: hipGetDevice,
    /// cudaGetDevice, and the launches and copies (hipLaunchKernel, hipMemcpyAsync,
    /// cudaLaunchKernel, cudaMemcpyAsync; `launches` names all four), which `rocsync
    /// annotate` uses to learn streams seen nowhere else. Each is hot: a trap per call
    #[arg(long, value_name = "SYMBOLS", value_delimiter = ',', value_parser = parse_apis)]
    pub probe: Vec<ApiList>,
    /// No live status line (it is shown only when stderr is a terminal)
    #[arg(long)]
    pub no_status: bool,
    /// Trace only the target process, not the children it forks (probes then go into
    /// the target alone; by default they are file-wide and the kernel filters by the
    /// traced process tree)
    #[arg(long)]
    pub no_follow: bool,
    /// Where a running `rocsync daemon` listens: this capture's agents are claimed there
    /// (refused if a daemon trace records any of them); no daemon, no claim
    #[arg(long, value_name = "PATH", default_value = DEFAULT_SOCKET)]
    pub daemon_socket: PathBuf,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub out: CaptureArgs,
    /// The HIP runtime the command uses (HIP only), probed before it starts (libraries it maps are
    /// found and probed in any case)
    #[arg(long, value_name = "PATH")]
    pub hip_lib: Option<PathBuf>,
    /// Run the command as this user, with their groups (as `strace -u`); without it the
    /// command runs as rocsync does (root under sudo)
    #[arg(short = 'u', long = "user", value_name = "USER")]
    pub user: Option<String>,
    /// Stop tracing after this long: seconds (10, 1.5) or with a unit (500ms, 10s, 2m);
    /// the command goes on untraced, and rocsync still exits with its status [default:
    /// until the command exits or Ctrl-C]
    #[arg(long, short, value_name = "DURATION", allow_negative_numbers = true,
          value_parser = crate::units::parse_duration)]
    pub duration: Option<Duration>,
    /// The command and its arguments (`--` before it is optional: what follows the
    /// command is its own, as perf, strace and nsys take it)
    #[arg(required = true, trailing_var_arg = true, num_args = 1.., value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct AttachArgs {
    #[command(flatten)]
    pub out: CaptureArgs,
    /// Processes to trace: -p 1,2 or -p 1 -p 2
    #[arg(
        long,
        short,
        value_name = "PID",
        required = true,
        value_delimiter = ',',
        // Completed with process ids (`commands/generate.rs`), never files.
        value_hint = ValueHint::Other
    )]
    pub pid: Vec<u32>,
    /// Stop after this long: seconds (10, 1.5) or with a unit (500ms, 10s, 2m, 1h)
    /// [default: until Ctrl-C or the process exits]
    #[arg(long, short, value_name = "DURATION", allow_negative_numbers = true,
          value_parser = crate::units::parse_duration)]
    pub duration: Option<Duration>,
    /// Wait for the process to load a GPU runtime (libamdhip64, libcudart or
    /// libhsa-runtime64) instead of failing
    #[arg(long)]
    pub wait: bool,
    /// Learn the devices running threads chose before the attach from *GetDevice, for at
    /// most this long (each call traps meanwhile; a thread that calls none in it has
    /// its device unknown until it sets one). 0 or off: never
    #[arg(long, value_name = "DURATION", default_value = crate::calls::probes::LEARN_DEVICES,
          value_parser = crate::units::parse_learning)]
    pub learn_devices: Duration,
}

#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// Raw capture written by --raw
    pub raw: PathBuf,
    /// Kineto JSON trace to write (".gz" compresses) [default: RAW with .json]
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace the output if it exists (refused otherwise)
    #[arg(short, long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Kineto trace rocsync wrote, or raw capture written by --raw (".gz" or not); or a
    /// directory of one job's traces: each communicator's ranks and the laggard
    #[arg(value_name = "TRACE|RAW|DIR")]
    pub input: PathBuf,
    /// Print the report as one JSON document
    #[arg(long)]
    pub json: bool,
    /// Write SVG figures into DIR (created if needed)
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct AnnotateArgs {
    /// The profiler's trace (Kineto JSON; gzip is read as such), or a directory of
    /// per-rank traces
    pub trace: PathBuf,
    /// rocsync's raw capture (--raw) of the same process at the same time, or a directory
    /// of them (matched to the traces by pid)
    #[arg(long, value_name = "RAW")]
    pub capture: PathBuf,
    /// The annotated trace (a directory when TRACE is one; ".gz" compresses)
    /// [default: beside TRACE, NAME.annotated.json]
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace an output that exists (refused otherwise)
    #[arg(short, long)]
    pub force: bool,
    /// Print the summary as JSON on standard output
    #[arg(long)]
    pub json: bool,
}

/// The ring size in bytes: `8` is 8 MiB, `64K` is 64 KiB (tests force losses with it).
fn parse_ring_size(s: &str) -> Result<u32, String> {
    let bad = || {
        format!(
            "{s:?}: the ring size is a power of two of MiB (at most 1024), or of KiB with K (at least 4K)"
        )
    };
    let bytes = match s.strip_suffix(['K', 'k']) {
        Some(kib) => kib.parse::<u32>().ok().filter(|&k| k >= 4).map(|k| k << 10),
        None => s
            .parse::<u32>()
            .ok()
            .filter(|&m| (1..=1024).contains(&m))
            .map(|m| (m as u64) << 20)
            .and_then(|b| u32::try_from(b).ok()),
    };
    bytes.filter(|b| b.is_power_of_two()).ok_or_else(bad)
}

/// A trace's size bound: the daemon's `--trace-max-bytes` syntax and floor.
fn parse_trace_max_bytes(s: &str) -> Result<u64, String> {
    match crate::units::parse_size(s)? {
        b if b < 1 << 20 => Err(format!(
            "{s:?}: at least 1M (a trace's header and summary alone take kilobytes)"
        )),
        b => Ok(b),
    }
}

/// Functions `--probe` names: one symbol, or `launches` for [`Api::LAUNCHES`].
#[derive(Clone, Debug)]
pub struct ApiList(pub Vec<Api>);

fn parse_apis(s: &str) -> Result<ApiList, String> {
    if s == "launches" {
        return Ok(ApiList(Api::LAUNCHES.to_vec()));
    }
    parse_api(s).map(|a| ApiList(vec![a]))
}

fn parse_api(s: &str) -> Result<Api, String> {
    Api::ALL
        .iter()
        .copied()
        .find(|a| a.symbol() == s)
        .ok_or_else(|| {
            let names: Vec<_> = Api::ALL.iter().map(|a| a.symbol()).collect();
            format!(
                "{s:?} is not a hooked function; they are: {}",
                names.join(", ")
            )
        })
}

#[cfg(test)]
mod tests;
