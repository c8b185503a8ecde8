//! Builds the eBPF object from `rocsync-ebpf` and places it in `OUT_DIR/rocsync`.
use anyhow::{Context as _, anyhow};
use aya_build::{Package, Toolchain};

fn main() -> anyhow::Result<()> {
    if std::process::Command::new("bpf-linker")
        .arg("--version")
        .output()
        .is_err()
    {
        return Err(anyhow!(
            "bpf-linker is not installed: run scripts/setup (it builds bpf-linker against LLVM 22)"
        ));
    }
    let metadata = cargo_metadata::MetadataCommand::new()
        .no_deps()
        .exec()
        .context("cargo metadata")?;
    let ebpf = metadata
        .packages
        .into_iter()
        .find(|p| p.name.as_str() == "rocsync-ebpf")
        .ok_or_else(|| anyhow!("rocsync-ebpf package not found"))?;
    let root_dir = ebpf
        .manifest_path
        .parent()
        .ok_or_else(|| anyhow!("rocsync-ebpf has no directory"))?;
    // The benchmark-only programs are built only for `--features bench`.
    let features: &[&str] = if std::env::var_os("CARGO_FEATURE_BENCH").is_some() {
        &["bench"]
    } else {
        &[]
    };
    let package = Package {
        name: ebpf.name.as_str(),
        root_dir: root_dir.as_str(),
        features,
        ..Default::default()
    };
    aya_build::build_ebpf([package], Toolchain::default())?;
    strip_debug_info()
}

/// The linker made the object's BTF from its DWARF, which nothing reads after that: the
/// object rocsync embeds is 0.7 MB without it, 3.7 MB with it (one pair of programs per
/// API inlines the same code 35 times).
fn strip_debug_info() -> anyhow::Result<()> {
    let object = std::path::Path::new(&std::env::var("OUT_DIR")?).join("rocsync");
    for tool in [
        "llvm-objcopy-22",
        "/usr/lib/llvm-22/bin/llvm-objcopy",
        "llvm-objcopy",
    ] {
        match std::process::Command::new(tool)
            .arg("--strip-debug")
            .arg(&object)
            .status()
        {
            Ok(s) if s.success() => return Ok(()),
            Ok(s) => return Err(anyhow!("{tool} --strip-debug {}: {s}", object.display())),
            Err(_) => continue,
        }
    }
    println!(
        "cargo:warning=llvm-objcopy not found (scripts/setup installs it with LLVM 22): the \
         probes' object keeps its DWARF"
    );
    Ok(())
}
