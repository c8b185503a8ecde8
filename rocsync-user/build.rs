//! Builds the eBPF object from `rocsync-ebpf` and places it in `OUT_DIR/rocsync`; names
//! the commit built and the object's hash for `rocsync --version`.
use anyhow::{Context as _, anyhow};
use aya_build::{Package, Toolchain};
use sha2::Digest as _;

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
    strip_debug_info()?;
    let object = std::fs::read(std::path::Path::new(&std::env::var("OUT_DIR")?).join("rocsync"))?;
    // A prefix of the object's SHA-256: `sha256sum` of the object says the same.
    let digest = sha2::Sha256::digest(&object);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let id = &hex[..16];
    println!("cargo:rustc-env=ROCSYNC_PROBES_ID={id}");
    println!("cargo:rustc-env=ROCSYNC_COMMIT={}", git_commit());
    Ok(())
}

/// `git rev-parse --short HEAD` of the checkout built, `-dirty` if tracked files differ
/// from it then; "unknown" outside a git checkout (a source tarball) or without git.
fn git_commit() -> String {
    let git = |args: &[&str]| -> Option<String> {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    // Rerun when HEAD moves: HEAD itself (a checkout), the branch it names (a commit), and
    // the index (staging changes what is dirty); packed refs when the branch is packed.
    if let (Some(dir), Some(common)) = (
        git(&["rev-parse", "--git-dir"]),
        git(&["rev-parse", "--git-common-dir"]),
    ) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        let common = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(common);
        let mut watched = vec![
            dir.join("HEAD"),
            dir.join("index"),
            common.join("packed-refs"),
        ];
        if let Some(r) = std::fs::read_to_string(dir.join("HEAD"))
            .ok()
            .and_then(|h| Some(h.strip_prefix("ref:")?.trim().to_string()))
        {
            watched.push(common.join(r));
        }
        for path in watched.iter().filter(|p| p.exists()) {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    let Some(commit) = git(&["rev-parse", "--short", "HEAD"]) else {
        return "unknown".into();
    };
    match git(&["status", "--porcelain", "--untracked-files=no"]) {
        Some(changes) if !changes.is_empty() => format!("{commit}-dirty"),
        _ => commit,
    }
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
