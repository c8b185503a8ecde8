//! `cargo xtask dist`: everything a user installs, built into `target/dist/`: the
//! portable binary (static, the eBPF object embedded), the .deb, the container image
//! and the Python wheel.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, Result, bail, ensure};

pub(crate) mod deb;
pub(crate) mod image;
pub(crate) mod wheel;

/// Where the artefacts go.
pub(crate) fn dir() -> PathBuf {
    crate::root().join("target/dist")
}

/// Builds every artefact; returns the directory.
pub(crate) fn dist() -> Result<PathBuf> {
    let out = dir();
    std::fs::create_dir_all(&out)?;
    let binary = binary(&out)?;
    eprintln!("xtask: {}", binary.display());
    let deb = deb::build(&binary, &out)?;
    eprintln!("xtask: {}", deb.display());
    let image = image::build(&binary, &out)?;
    eprintln!("xtask: {}", image.display());
    let wheel = wheel::build(&binary, &out)?;
    eprintln!("xtask: {}", wheel.display());
    Ok(out)
}

/// The binary's own version (`rocsync 0.1.0 (commit ...)`), as Cargo spells it.
fn version(binary: &Path) -> Result<String> {
    let out = Command::new(binary)
        .arg("--version")
        .output()
        .with_context(|| format!("running {} --version", binary.display()))?;
    ensure!(
        out.status.success(),
        "{} --version failed",
        binary.display()
    );
    let text = String::from_utf8(out.stdout)?;
    let version = text
        .strip_prefix("rocsync ")
        .and_then(|rest| rest.split_whitespace().next())
        .with_context(|| format!("unexpected --version: {text}"))?;
    ensure!(
        version.starts_with(|c: char| c.is_ascii_digit()),
        "unexpected version {version:?}"
    );
    Ok(version.to_string())
}

/// The portable binary, `target/dist/rocsync`: glibc linked statically (a static-pie),
/// so it runs on any x86_64 Linux with the kernel features rocsync needs — glibc 2.28
/// distributions, musl images, a root with no libc at all. The alternative, linking
/// against an old glibc (zig), would still need a glibc on the host; musl needs a
/// musl-built libunwind this machine's registries do not carry. User and group names
/// are resolved through the host's `getent` (src/users/getent.rs), not the static
/// glibc's NSS. Built in a target directory of its own: the flags differ from the
/// development build's, and sharing one would rebuild both each time.
fn binary(out: &Path) -> Result<PathBuf> {
    const TARGET: &str = "x86_64-unknown-linux-gnu";
    let target_dir = crate::root().join("target/dist-build");
    crate::run(
        crate::cargo()
            .args(["build", "--release", "--target", TARGET])
            .args(["--package", "rocsync-user", "--bin", "rocsync"])
            .env("CARGO_TARGET_DIR", &target_dir)
            // For the target only: build scripts (and the probes' nightly build) stay
            // as they are.
            .env(
                "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS",
                "-C target-feature=+crt-static",
            ),
    )?;
    let built = target_dir.join(TARGET).join("release/rocsync");
    let dest = out.join("rocsync");
    std::fs::copy(&built, &dest).with_context(|| format!("copying {}", built.display()))?;
    let interp = Command::new("readelf").args(["-l"]).arg(&dest).output();
    if let Ok(o) = interp
        && String::from_utf8_lossy(&o.stdout).contains("INTERP")
    {
        bail!(
            "{} asks for a dynamic loader: it is not static",
            dest.display()
        );
    }
    Ok(dest)
}
