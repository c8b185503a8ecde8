use std::process::ExitCode;

use clap::Parser as _;
use rocsync::{
    front::cli::{Cli, Command, GenerateArgs, ReadStacksArgs},
    front::commands,
    os::signals::Signals,
};

/// Sees standard output before Rust's runtime replaces a closed one with /dev/null.
#[used]
#[unsafe(link_section = ".init_array")]
static STDIO_AT_LOAD: extern "C" fn() = rocsync::os::stdio::check_at_load;

fn main() -> ExitCode {
    let code = run();
    // What was said is written before rocsync ends (every target continued by now).
    rocsync::os::stderr::flush();
    code
}

fn run() -> ExitCode {
    if std::env::args().nth(1).as_deref() == Some(rocsync::capture::watchdog::ARG) {
        return ExitCode::from(rocsync::capture::watchdog::run() as u8);
    }
    if std::env::args().nth(1).as_deref() == Some("generate") {
        return finish(commands::generate(GenerateArgs::parse_from(
            std::env::args().skip(1),
        )));
    }
    if std::env::args().nth(1).as_deref() == Some(rocsync::stacks::COMMAND) {
        let args = ReadStacksArgs::parse_from(std::env::args().skip(1));
        return ExitCode::from(commands::read_stacks(args) as u8);
    }
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            rocsync::say!("rocsync: error: cannot start the event loop: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            // Signals are caught before anything is loaded, so none kills rocsync with a
            // target stopped.
            Command::Run(a) => commands::run(a, ending_signals()?).await,
            Command::Attach(a) => commands::attach(a, ending_signals()?).await,
            Command::Convert(a) => commands::convert(a),
            Command::Report(a) => commands::report(a),
            Command::Annotate(a) => commands::annotate(a),
            Command::Daemon(a) => commands::daemon(*a, Signals::catch_all()?).await,
            Command::Trace(a) => commands::trace(a),
            Command::Status(a) => commands::status(a),
            Command::Doctor(a) => commands::doctor(a),
            Command::Demo(a) => rocsync::front::demo::demo(&a.output, a.program),
        }
    });
    finish(result)
}

/// The exit status for what a command returned; says its error. Output to a pipe whose
/// reader is gone (`rocsync report X --json | head -1`) ends it quietly, with the status
/// a shell gives a command SIGPIPE ended (rocsync ignores SIGPIPE: a target it holds is
/// let go first, and a closed stderr costs only the diagnostics).
fn finish(result: anyhow::Result<i32>) -> ExitCode {
    match result {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) if rocsync::os::stdio::closed_pipe(&e) => ExitCode::from(128 + libc::SIGPIPE as u8),
        Err(e) => {
            rocsync::say!("rocsync: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The signals that end `run` and `attach`; says which stay ignored as inherited.
fn ending_signals() -> anyhow::Result<Signals> {
    let signals = Signals::catch()?;
    signals.say_ignored();
    Ok(signals)
}
