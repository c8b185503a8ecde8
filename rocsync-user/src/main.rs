use std::process::ExitCode;

use clap::Parser as _;
use rocsync::{
    cli::{Cli, Command},
    commands,
};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rocsync: error: cannot start the event loop: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run(a) => commands::run(a).await,
            Command::Attach(a) => commands::attach(a).await,
            Command::Convert(a) => commands::convert(a),
        }
    });
    match result {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("rocsync: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
