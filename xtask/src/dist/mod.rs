//! `cargo xtask dist`: everything a user installs, built into `target/dist/`: the
//! portable binary (static, the eBPF object embedded), the .deb and the container
//! image.

use std::path::{Path, PathBuf};

use anyhow::Result;

pub mod deb;

/// Where the artefacts go.
pub fn dir() -> PathBuf {
    crate::root().join("target/dist")
}

/// Builds every artefact; returns the directory.
pub fn dist() -> Result<PathBuf> {
    let out = dir();
    std::fs::create_dir_all(&out)?;
    let binary = binary(&out)?;
    deb::build(&binary, &out)?;
    Ok(out)
}

/// The portable binary, `target/dist/rocsync` (see `binary.rs`).
fn binary(out: &Path) -> Result<PathBuf> {
    let _ = out;
    todo!("being written")
}
