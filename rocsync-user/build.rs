//! Builds the eBPF object from `rocsync-ebpf` and places it in `OUT_DIR/rocsync`; names
//! the commit built and the object's hash for `rocsync --version`.
use std::{env, path::PathBuf, process::Command};

use anyhow::{Context as _, anyhow};
use cargo_metadata::{Artifact, CompilerMessage, Message};
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
    build_probes(root_dir.as_str(), features)?;
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

/// Builds the probes as aya-build 0.2 does (nightly, `bpfel-unknown-none`,
/// `-Z build-std=core`, BTF from DWARF) into `OUT_DIR/rocsync`, and says only what the
/// compiler says of the code. aya-build passes every line of the inner cargo on as a
/// `warning:` (57 of them, "Compiling …", on a fresh build): a newcomer reads them as
/// problems. Cargo's own lines are shown when the build fails, where they help.
fn build_probes(root_dir: &str, features: &[&str]) -> anyhow::Result<()> {
    println!("cargo:rerun-if-changed={root_dir}");
    let out_dir = PathBuf::from(env::var("OUT_DIR")?);
    let arch = env::var("CARGO_CFG_TARGET_ARCH")?;
    let mut cmd = match Command::new("rustup").arg("--version").output() {
        Ok(_) => {
            let mut c = Command::new("rustup");
            c.args(["run", "nightly", "cargo"]);
            c
        }
        Err(_) => Command::new("cargo"),
    };
    cmd.args([
        "build",
        "--package",
        "rocsync-ebpf",
        "--bins",
        "--message-format=json",
        "--release",
        "--target",
        "bpfel-unknown-none",
        "-Z",
        "build-std=core",
        "--features",
        &features.join(","),
    ])
    .arg("--target-dir")
    .arg(out_dir.join("aya-build/target/rocsync-ebpf"))
    .env(
        "CARGO_ENCODED_RUSTFLAGS",
        format!("--cfg=bpf_target_arch=\"{arch}\"\x1f-Cdebuginfo=2\x1f-Clink-arg=--btf"),
    )
    .env_remove("RUSTC")
    .env_remove("RUSTC_WORKSPACE_WRAPPER");
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    let mut built = Vec::new();
    for message in Message::parse_stream(&out.stdout[..]) {
        match message.context("cargo's JSON messages")? {
            Message::CompilerArtifact(Artifact {
                executable: Some(exe),
                target,
                ..
            }) => built.push((target.name, exe.into_std_path_buf())),
            // What the compiler says of the probes' code: warnings and errors, kept.
            Message::CompilerMessage(CompilerMessage { message, .. }) => {
                for line in message.rendered.unwrap_or_default().lines() {
                    println!("cargo:warning={line}");
                }
            }
            _ => {}
        }
    }
    if !out.status.success() {
        for line in String::from_utf8_lossy(&out.stderr).lines() {
            println!("cargo:warning={line}");
        }
        return Err(anyhow!("building the probes failed: {}", out.status));
    }
    for (name, exe) in built {
        std::fs::copy(&exe, out_dir.join(&name))
            .with_context(|| format!("copying {} into OUT_DIR", exe.display()))?;
    }
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
