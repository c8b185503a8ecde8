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
    aya_build::build_ebpf([package], Toolchain::default())
}
