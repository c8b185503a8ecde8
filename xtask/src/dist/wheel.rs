//! The Python wheel, so that `pip install rocsync` puts the static binary on the PATH of
//! the environment that runs the job (as py-spy, ruff and uv ship theirs). A wheel is a
//! zip of the files to install and a `.dist-info` that describes them (PEP 427, 491):
//! the binary goes in `rocsync-VERSION.data/scripts/`, which pip installs into the
//! environment's `bin/` with its mode. One wheel serves glibc and musl Pythons alike
//! (the binary links nothing), so it carries both platform tags.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result, bail};
use base64::Engine as _;
use sha2::{Digest as _, Sha256};
use zip::{DateTime, ZipWriter, write::SimpleFileOptions};

/// The platforms a static x86_64 binary runs on: manylinux2014 (glibc 2.17, pip ≥ 19.3)
/// and musllinux 1.1 (pip ≥ 21.3; Alpine's Pythons).
const TAGS: [&str; 3] = [
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "musllinux_1_1_x86_64",
];

/// Writes `out/rocsync-VERSION-py3-none-PLATFORMS.whl`; returns its path.
pub(crate) fn build(binary: &Path, out: &Path) -> Result<PathBuf> {
    let version = python_version(&super::version(binary)?)?;
    let name = format!("rocsync-{version}-py3-none-{}.whl", TAGS.join("."));
    let path = out.join(&name);
    let data = format!("rocsync-{version}.data");
    let info = format!("rocsync-{version}.dist-info");
    let root = crate::root();
    let mut members: Vec<(String, Vec<u8>, u32)> = vec![(
        format!("{data}/scripts/rocsync"),
        std::fs::read(binary).with_context(|| format!("reading {}", binary.display()))?,
        0o755,
    )];
    for license in ["LICENSE-MIT", "LICENSE-APACHE"] {
        let text = std::fs::read(root.join(license))?;
        members.push((format!("{info}/licenses/{license}"), text, 0o644));
    }
    members.push((
        format!("{info}/METADATA"),
        metadata(&version)?.into(),
        0o644,
    ));
    members.push((format!("{info}/WHEEL"), wheel_file().into(), 0o644));
    let record = record(&members, &format!("{info}/RECORD"));
    members.push((format!("{info}/RECORD"), record.into(), 0o644));

    // Reproducible: every member dated 1980-01-01, the zip format's epoch (as
    // SOURCE_DATE_EPOCH builds of wheels clamp to it).
    let time = DateTime::default();
    let tmp = out.join(format!(".{name}.tmp"));
    let mut zip = ZipWriter::new(std::fs::File::create(&tmp)?);
    for (name, bytes, mode) in &members {
        let options = SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .last_modified_time(time)
            .unix_permissions(*mode);
        zip.start_file(name.as_str(), options)?;
        zip.write_all(bytes)?;
    }
    zip.finish()?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// PEP 440's spelling of a Cargo version: `0.2.0-rc.1` is `0.2.0rc1`.
fn python_version(cargo: &str) -> Result<String> {
    let Some((release, pre)) = cargo.split_once('-') else {
        return Ok(cargo.to_string());
    };
    let (kind, n) = pre.split_once('.').unwrap_or((pre, "0"));
    let kind = match kind {
        "alpha" | "a" => "a",
        "beta" | "b" => "b",
        "rc" => "rc",
        _ => bail!("version {cargo}: no PEP 440 spelling of pre-release {pre:?}"),
    };
    if !n.bytes().all(|b| b.is_ascii_digit()) {
        bail!("version {cargo}: pre-release number {n:?}");
    }
    Ok(format!("{release}{kind}{n}"))
}

/// The core metadata (version 2.1: every pip that knows these platform tags reads it).
fn metadata(version: &str) -> Result<String> {
    let readme = std::fs::read_to_string(crate::root().join("README.md"))?;
    // The README's opening, to its first section: what PyPI and `pip show` print.
    let summary_end = readme.find("\n## ").unwrap_or(readme.len());
    Ok(format!(
        "Metadata-Version: 2.1\n\
         Name: rocsync\n\
         Version: {version}\n\
         Summary: Traces GPU synchronization (HIP, CUDA, HSA, NCCL) in unmodified, running processes with eBPF\n\
         License: MIT OR Apache-2.0\n\
         Platform: Linux\n\
         Classifier: Environment :: Console\n\
         Classifier: Operating System :: POSIX :: Linux\n\
         Classifier: Topic :: System :: Monitoring\n\
         Requires-Python: >=3.7\n\
         Description-Content-Type: text/markdown\n\
         \n\
         {}\n",
        readme[..summary_end].trim_end()
    ))
}

fn wheel_file() -> String {
    let mut text = String::from(
        "Wheel-Version: 1.0\n\
         Generator: rocsync xtask dist\n\
         Root-Is-Purelib: false\n",
    );
    for tag in TAGS {
        text.push_str(&format!("Tag: py3-none-{tag}\n"));
    }
    text
}

/// `RECORD`: each member's path, SHA-256 (URL-safe base64, unpadded) and size, as pip
/// checks them at install; the RECORD itself has neither.
fn record(members: &[(String, Vec<u8>, u32)], own: &str) -> String {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut text = String::new();
    for (name, bytes, _) in members {
        let digest = b64.encode(Sha256::digest(bytes));
        text.push_str(&format!("{name},sha256={digest},{}\n", bytes.len()));
    }
    text.push_str(&format!("{own},,\n"));
    text
}
