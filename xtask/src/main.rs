//! `cargo xtask demo` — set up, build, trace the embedded cross-stream scenario, print the
//!                      trace path.
//! `cargo xtask test` — set up, then run every check CI runs: fmt, clippy, all tests.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, Result, bail};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("demo") => demo(&args[1..]),
        Some("test") => test(),
        Some("setup") => setup(),
        _ => {
            eprintln!("usage: cargo xtask <demo [OUTPUT]|test|setup>");
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("xtask: error: {e:#}");
        std::process::exit(1);
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("xtask: {cmd:?}");
    let status = cmd
        .current_dir(root())
        .status()
        .with_context(|| format!("starting {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed: {status}");
    }
    Ok(())
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// Installs what the build and the tests need (idempotent; needs root for apt-get).
fn setup() -> Result<()> {
    run(Command::new("bash").arg("scripts/setup"))
}

fn demo(args: &[String]) -> Result<()> {
    setup()?;
    run(cargo().args(["build", "--release", "--package", "rocsync-user"]))?;
    let output = args
        .first()
        .cloned()
        .unwrap_or_else(|| "rocsync-demo.json".into());
    let raw = format!("{output}.raw.jsonl");
    run(Command::new(root().join("target/release/rocsync"))
        .args(["run", "--raw", &raw, "--"])
        .arg(rocsync_tests::scenario())
        .args(["cross", "200"]))?;
    eprintln!("xtask: trace written to {}", root().join(&raw).display());
    Ok(())
}

fn test() -> Result<()> {
    setup()?;
    run(cargo().args(["fmt", "--all", "--", "--check"]))?;
    run(cargo().args([
        "clippy",
        "--release",
        "--workspace",
        "--exclude",
        "rocsync-ebpf",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    run(cargo().args(["test", "--release", "--workspace"]))
}
