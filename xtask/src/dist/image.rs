//! The container image: the static binary on `scratch`, as an OCI archive
//! `target/dist/rocsync-VERSION.oci.tar`, tagged `rocsync:VERSION`.
//!
//! Built with Debian's umoci: it writes an OCI layout straight from a directory, with no
//! daemon, no registry and no base image (buildah would want its storage and a `from
//! scratch` container, podman a runtime; umoci needs neither). The layout is then tarred,
//! which is all an OCI archive is (`skopeo copy oci-archive:…`, `podman load`).
//!
//! The root holds only what the binary reads: the binary where the DaemonSet runs it, the
//! pod's example config, Debian's CA bundle (S3 uploads use rustls with the platform's
//! roots, `rustls-platform-verifier` → `rustls-native-certs`, which reads
//! /etc/ssl/certs/ca-certificates.crt: none are compiled in), a passwd/group naming root
//! (user and group lookups), and the directories the daemon writes or has mounted.
//! Mtimes and the image's dates are the commit's, so a rebuild of one commit gives the
//! same layer.

use std::{
    fs,
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, SystemTime},
};

use anyhow::{Context as _, Result, bail};

use crate::run;

/// Where the image finds its files (the DaemonSet's command and mounts name these).
pub(crate) const BINARY: &str = "/usr/local/bin/rocsync";
pub(crate) const CONFIG: &str = "/etc/rocsync/rocsync.toml";
/// Debian's ca-certificates bundle, and where rustls-native-certs looks first.
const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
/// rocsync.toml's metrics_addr port in the pod's config.
const METRICS_PORT: &str = "9464/tcp";

/// Builds the image of `binary` (static: nothing else runs in it) into
/// `out/rocsync-VERSION.oci.tar`; returns that path.
pub(crate) fn build(binary: &Path, out: &Path) -> Result<PathBuf> {
    check_static(binary)?;
    let version = env!("CARGO_PKG_VERSION");
    let work = out.join("image-build");
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work)?;
    let epoch = source_date_epoch()?;
    let root = work.join("root");
    stage(&root, binary)?;
    normalize(&root, epoch)?;

    let layout = work.join("layout");
    let image = format!("{}:rocsync:{version}", layout.display());
    let created = rfc3339(epoch);
    run(Command::new("umoci")
        .args(["init", "--layout"])
        .arg(&layout))
    .context("umoci is missing? scripts/setup installs it")?;
    run(Command::new("umoci").args(["new", "--image", &image]))?;
    let mut insert = Command::new("umoci");
    insert.args(["insert", "--image", &image, "--history.created", &created]);
    insert.args(["--history.created_by", "cargo xtask dist"]);
    // Not root: umoci records the files as root's anyway (uid 0 in the image).
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        insert.arg("--rootless");
    }
    run(insert.arg(&root).arg("/"))?;
    run(&mut config(&image, version, &created))?;
    // Drop the blobs of the intermediate manifests and configs.
    run(Command::new("umoci").args(["gc", "--layout"]).arg(&layout))?;

    let archive = out.join(format!("rocsync-{version}.oci.tar"));
    run(Command::new("tar")
        .args(["--sort=name", "--owner=0", "--group=0", "--numeric-owner"])
        // umoci writes blobs 0600: readable by whoever loads the archive.
        .arg("--mode=a+rX")
        .arg(format!("--mtime=@{epoch}"))
        .arg("-cf")
        .arg(&archive)
        .arg("-C")
        .arg(&layout)
        .args(["oci-layout", "index.json", "blobs"]))?;
    fs::remove_dir_all(&work)?;
    Ok(archive)
}

/// The image's configuration: entrypoint and command as the DaemonSet gives them, the
/// metrics port, OCI labels.
fn config(image: &str, version: &str, created: &str) -> Command {
    let revision = git(&["rev-parse", "HEAD"]).unwrap_or_else(|_| "unknown".into());
    let mut cmd = Command::new("umoci");
    cmd.args([
        "config",
        "--image",
        image,
        "--architecture",
        "amd64",
        "--os",
        "linux",
    ])
    .args(["--created", created, "--history.created", created])
    .args(["--history.created_by", "cargo xtask dist"])
    .args(["--config.entrypoint", BINARY])
    .args(["--config.workingdir", "/", "--config.user", "0:0"])
    .args(["--config.env", "PATH=/usr/local/bin"])
    .args(["--config.exposedports", METRICS_PORT]);
    for arg in ["daemon", "--config", CONFIG] {
        cmd.args(["--config.cmd", arg]);
    }
    let labels = [
        ("title", "rocsync".to_string()),
        ("description", description()),
        ("version", version.to_string()),
        ("revision", revision),
        ("licenses", env!("CARGO_PKG_LICENSE").to_string()),
        ("created", created.to_string()),
    ];
    for (key, value) in labels {
        cmd.args([
            "--config.label",
            &format!("org.opencontainers.image.{key}={value}"),
        ]);
    }
    cmd
}

/// rocsync's own description (rocsync-user/Cargo.toml's), not xtask's.
fn description() -> String {
    let manifest = fs::read_to_string(crate::root().join("rocsync-user/Cargo.toml"));
    manifest
        .ok()
        .and_then(|m| {
            let line = m.lines().find(|l| l.starts_with("description = "))?;
            Some(line.split('"').nth(1)?.to_string())
        })
        .unwrap_or_else(|| "rocsync".into())
}

/// Refuses a binary with a program interpreter: nothing else is in the image.
fn check_static(binary: &Path) -> Result<()> {
    let elf = fs::read(binary).with_context(|| format!("reading {}", binary.display()))?;
    let word = |at: usize, n: usize| -> Option<u64> {
        let b = elf.get(at..at + n)?;
        Some(b.iter().rev().fold(0, |v, &x| v << 8 | u64::from(x)))
    };
    // ELF64 little-endian only (x86_64): e_phoff, e_phentsize, e_phnum; PT_INTERP = 3.
    if elf.get(..6) != Some(b"\x7fELF\x02\x01") {
        bail!("{} is not an x86_64 ELF file", binary.display());
    }
    let (phoff, phentsize, phnum) = (word(0x20, 8), word(0x36, 2), word(0x38, 2));
    let (Some(phoff), Some(size), Some(n)) = (phoff, phentsize, phnum) else {
        bail!("{}: truncated ELF header", binary.display());
    };
    for i in 0..n {
        if word((phoff + i * size) as usize, 4) == Some(3) {
            bail!(
                "{} is dynamically linked: the image has no libc (use the static build)",
                binary.display()
            );
        }
    }
    Ok(())
}

/// The image's root in `root`: the binary, the config, the CA bundle, passwd/group, and
/// the (empty) directories the daemon uses.
fn stage(root: &Path, binary: &Path) -> Result<()> {
    let file = |path: &str, mode: u32, data: &[u8]| -> Result<()> {
        let dest = root.join(path.trim_start_matches('/'));
        fs::create_dir_all(dest.parent().context("a file's folder")?)?;
        fs::write(&dest, data)?;
        fs::set_permissions(&dest, fs::Permissions::from_mode(mode))?;
        Ok(())
    };
    let read = |p: &Path| fs::read(p).with_context(|| format!("reading {}", p.display()));
    file(BINARY, 0o755, &read(binary)?)?;
    let config = crate::root().join("deploy/kubernetes/rocsync.toml");
    file(CONFIG, 0o644, &read(&config)?)?;
    let ca = read(Path::new(CA_BUNDLE)).context("Debian's ca-certificates is needed")?;
    file(CA_BUNDLE, 0o644, &ca)?;
    // Root only: the daemon runs as uid 0 (a name in `users` would resolve here, in the
    // image, not on the node: the config says to give uids).
    file("/etc/passwd", 0o644, b"root:x:0:0:root:/:/sbin/nologin\n")?;
    file("/etc/group", 0o644, b"root:x:0:\n")?;
    // The socket and lock (the node's /run/rocsync), the state (the node's
    // /var/lib/rocsync): mounted over in a pod, there for a plain `docker run`.
    for dir in ["tmp", "run/rocsync", "var/lib/rocsync"] {
        fs::create_dir_all(root.join(dir))?;
    }
    Ok(())
}

/// Gives every directory below `path` a distribution's mode (0755; /tmp 1777, whatever
/// the umask) and every entry the mtime `epoch` (no symlinks are staged).
fn normalize(path: &Path, epoch: u64) -> Result<()> {
    if path.is_dir() {
        let mode = if path.ends_with("tmp") { 0o1777 } else { 0o755 };
        fs::set_permissions(path, fs::Permissions::from_mode(mode))?;
        for entry in fs::read_dir(path)? {
            normalize(&entry?.path(), epoch)?;
        }
    }
    let time = SystemTime::UNIX_EPOCH + Duration::from_secs(epoch);
    fs::File::open(path)?
        .set_times(fs::FileTimes::new().set_modified(time).set_accessed(time))
        .with_context(|| format!("setting the mtime of {}", path.display()))
}

/// `SOURCE_DATE_EPOCH` if set, else the commit's time (reproducible builds' convention).
fn source_date_epoch() -> Result<u64> {
    let value = match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) => v,
        Err(_) => git(&["log", "-1", "--format=%ct"]).unwrap_or_else(|_| "0".into()),
    };
    value
        .trim()
        .parse()
        .with_context(|| format!("SOURCE_DATE_EPOCH {value:?}"))
}

fn git(args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(crate::root())
        .output()?;
    if !out.status.success() {
        bail!("git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8(out.stdout)?.trim().to_string())
}

/// `epoch` as RFC 3339 UTC (what OCI's `created` holds), without a date crate.
fn rfc3339(epoch: u64) -> String {
    let (days, secs) = (epoch / 86400, epoch % 86400);
    // Howard Hinnant's civil_from_days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn rfc3339_dates() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(super::rfc3339(1_767_225_599), "2025-12-31T23:59:59Z");
    }
}
