//! The .deb, made with Debian's own tools (`dpkg-shlibdeps`, `dpkg-deb`; no cargo-deb):
//! the binary, the systemd unit, the example configuration as a conffile, man pages and
//! completions the binary writes about itself (`rocsync generate`), the README and the
//! licences, each where Debian puts them. The maintainer scripts and the copyright file
//! are plain files in `dist/debian/`; everything else is made here.

use std::{
    fs,
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, Result, bail, ensure};

const PACKAGE: &str = "rocsync";
const ARCH: &str = "amd64";
/// Where the unit in `dist/` expects the binary, and where the package puts it.
const UNIT_BINARY: (&str, &str) = ("/usr/local/bin/rocsync", "/usr/bin/rocsync");

/// Packages `binary` (the portable one) as `out/rocsync_<version>_amd64.deb`.
pub(crate) fn build(binary: &Path, out: &Path) -> Result<PathBuf> {
    let version = version(binary)?;
    let repo = crate::root();
    // debhelper's layout: `debian/control` beside the package's root is what
    // dpkg-shlibdeps looks for.
    let stage = repo.join("target/dist-build/deb");
    let root = stage.join("debian").join(PACKAGE);
    if stage.exists() {
        fs::remove_dir_all(&stage).with_context(|| format!("emptying {}", stage.display()))?;
    }
    let dist = repo.join("dist");
    let debian = dist.join("debian");

    let bin = root.join("usr/bin/rocsync");
    copy(binary, &bin, 0o755)?;
    // As dh_strip: lintian calls an unstripped binary an error. The probes' build id in
    // `rocsync --version` is computed at build time and unchanged by this.
    crate::run(
        Command::new("strip")
            .args(["--remove-section=.comment", "--remove-section=.note"])
            .arg(&bin),
    )?;

    let unit = fs::read_to_string(dist.join("rocsync.service"))?;
    ensure!(
        unit.contains(UNIT_BINARY.0),
        "dist/rocsync.service no longer names {}: update deb.rs",
        UNIT_BINARY.0
    );
    let unit = unit.replace(UNIT_BINARY.0, UNIT_BINARY.1);
    ensure!(
        !unit.contains("/usr/local"),
        "the unit still names /usr/local"
    );
    write(
        &root.join("lib/systemd/system/rocsync.service"),
        &unit,
        0o644,
    )?;
    copy(
        &dist.join("rocsync.toml"),
        &root.join("etc/rocsync/rocsync.toml"),
        0o644,
    )?;

    let man = root.join("usr/share/man/man1");
    generate(&bin, "man", &man)?;
    gzip(&man, &files(&man)?)?;
    let completions = stage.join("completions");
    generate(&bin, "completions", &completions)?;
    let share = root.join("usr/share");
    for (made, dest) in [
        ("rocsync.bash", "bash-completion/completions/rocsync"),
        ("_rocsync", "zsh/vendor-completions/_rocsync"),
        ("rocsync.fish", "fish/vendor_completions.d/rocsync.fish"),
    ] {
        copy(&completions.join(made), &share.join(dest), 0o644)?;
    }

    let doc = share.join("doc").join(PACKAGE);
    copy(&debian.join("copyright"), &doc.join("copyright"), 0o644)?;
    copy(&repo.join("README.md"), &doc.join("README.md"), 0o644)?;
    write(&doc.join("changelog"), &changelog(&version)?, 0o644)?;
    // Policy 12.3: documentation over 4 kB is compressed; changelogs always are.
    gzip(&doc, &["README.md".into(), "changelog".into()])?;
    if let Some(tag) = static_tag(&bin)? {
        write(
            &share.join("lintian/overrides").join(PACKAGE),
            &format!(
                "# Static on purpose: one binary that runs whatever the host's libc (or none),\n\
                 # the eBPF object embedded; the same file ships outside the .deb.\n\
                 {PACKAGE}: {tag} [usr/bin/rocsync]\n"
            ),
            0o644,
        )?;
    }

    let control = root.join("DEBIAN");
    for script in ["postinst", "prerm", "postrm"] {
        copy(&debian.join(script), &control.join(script), 0o755)?;
    }
    write(
        &control.join("conffiles"),
        "/etc/rocsync/rocsync.toml\n",
        0o644,
    )?;
    let md5sums = md5sums(&root)?;
    write(
        &control.join("control"),
        &control_file(&version, &depends(&stage)?, installed_size(&root)?),
        0o644,
    )?;
    write(&control.join("md5sums"), &md5sums, 0o644)?;
    directories_0755(&root)?;

    fs::create_dir_all(out)?;
    let deb = out.join(format!("{PACKAGE}_{version}_{ARCH}.deb"));
    let mut dpkg_deb = Command::new("dpkg-deb");
    dpkg_deb
        .args(["--root-owner-group", "--build"])
        .arg(&root)
        .arg(&deb);
    // Reproducible: every time in the archive is the commit's, not now (this dpkg-deb
    // does not clamp the members' times itself).
    if let Some(epoch) = git(&["log", "-1", "--format=%ct"]) {
        crate::run(Command::new("find").arg(&root).args([
            "-exec",
            "touch",
            "-h",
            "-d",
            &format!("@{epoch}"),
            "{}",
            "+",
        ]))?;
        dpkg_deb.env("SOURCE_DATE_EPOCH", epoch);
    }
    crate::run(&mut dpkg_deb)?;
    Ok(deb)
}

/// The package version: the binary's own, with a Cargo pre-release's `-` made Debian's
/// `~` so `0.2.0-rc.1` sorts before `0.2.0`.
fn version(binary: &Path) -> Result<String> {
    Ok(super::version(binary)?.replace('-', "~"))
}

fn generate(binary: &Path, what: &str, dir: &Path) -> Result<()> {
    crate::run(Command::new(binary).args(["generate", what]).arg(dir))
}

/// `Depends:` from dpkg-shlibdeps, as debhelper's `${shlibs:Depends}`: empty for a
/// static binary (no libc, nothing to depend on), the libraries' packages otherwise.
/// The maintainer scripts need nothing beyond Essential packages (they look for
/// deb-systemd-helper and deb-systemd-invoke before calling them).
fn depends(stage: &Path) -> Result<String> {
    write(&stage.join("debian/control"), "", 0o644)?;
    let out = Command::new("dpkg-shlibdeps")
        .args(["-O", "-e"])
        .arg(format!("debian/{PACKAGE}/usr/bin/rocsync"))
        .current_dir(stage)
        .output()
        .context("running dpkg-shlibdeps (dpkg-dev)")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("dpkg-shlibdeps: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix("shlibs:Depends="))
        .unwrap_or("")
        .to_owned())
}

/// Checks the binary is x86_64; for a static one, the lintian tag it draws, which the
/// package overrides (and only then, so the override is never an unused one): a
/// static-pie looks to lintian like a library that needs none
/// (`shared-library-lacks-prerequisites`, a warning), a plain static executable (a musl
/// build, say) draws `statically-linked-binary`, an error.
fn static_tag(binary: &Path) -> Result<Option<&'static str>> {
    let out = Command::new("readelf")
        .args(["-h", "-l", "-d"])
        .arg(binary)
        .output()?;
    ensure!(out.status.success(), "readelf {}", binary.display());
    let text = String::from_utf8_lossy(&out.stdout);
    ensure!(
        text.contains("Advanced Micro Devices X86-64"),
        "{} is not an x86_64 binary",
        binary.display()
    );
    if text.contains("(NEEDED)") || text.contains("INTERP") {
        return Ok(None);
    }
    Ok(Some(
        if text.contains("DYN (Position-Independent Executable") {
            "shared-library-lacks-prerequisites"
        } else {
            "statically-linked-binary"
        },
    ))
}

fn control_file(version: &str, depends: &str, installed_kib: u64) -> String {
    let depends = if depends.is_empty() {
        String::new()
    } else {
        format!("Depends: {depends}\n")
    };
    format!(
        "Package: {PACKAGE}
Version: {version}
Architecture: {ARCH}
Maintainer: rocsync developers <rocsync@example.invalid>
Installed-Size: {installed_kib}
{depends}Section: devel
Priority: optional
Description: GPU synchronisation tracer for unmodified HIP and CUDA processes
 rocsync traces GPU synchronisation (event record, stream wait, synchronize)
 in unmodified HIP and CUDA processes with eBPF uprobes, and writes Kineto
 traces that Perfetto and HTA open. It runs a command (rocsync run), attaches
 to a running process (rocsync attach), or runs always on as a daemon
 (rocsync.service, not enabled on install) that counts every GPU process's
 synchronisations as Prometheus metrics and records traces on request.
 .
 rocsync doctor says what this machine allows and how to fix what it does not.
",
    )
}

/// A native package's changelog (Debian format), dated by the commit.
fn changelog(version: &str) -> Result<String> {
    let date = git(&["log", "-1", "--format=%aD"])
        .unwrap_or_else(|| "Thu, 01 Jan 1970 00:00:00 +0000".into());
    Ok(format!(
        "{PACKAGE} ({version}) unstable; urgency=medium\n\n  \
         * Release {version}; the changes are in the project's history.\n\n \
         -- rocsync developers <rocsync@example.invalid>  {date}\n"
    ))
}

/// DEBIAN/md5sums: every file, relative to the root, as dh_md5sums writes it.
fn md5sums(root: &Path) -> Result<String> {
    let paths: Vec<PathBuf> = files(root)?
        .into_iter()
        .filter(|p| !p.starts_with("DEBIAN"))
        .collect();
    let out = Command::new("md5sum")
        .args(&paths)
        .current_dir(root)
        .output()?;
    ensure!(out.status.success(), "md5sum failed");
    Ok(String::from_utf8(out.stdout)?)
}

/// Installed-Size in KiB, as dpkg-gencontrol counts it: each file rounded up to a KiB,
/// each directory one.
fn installed_size(root: &Path) -> Result<u64> {
    let mut kib = 0;
    for path in files(root)? {
        if !path.starts_with("DEBIAN") {
            kib += fs::metadata(root.join(&path))?.len().div_ceil(1024);
        }
    }
    Ok(kib + dirs(root)?.len() as u64)
}

/// Every directory 0755 whatever the umask it was made under.
fn directories_0755(root: &Path) -> Result<()> {
    for dir in dirs(root)?.into_iter().chain([PathBuf::new()]) {
        fs::set_permissions(root.join(dir), fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

/// Files under `dir`, relative to it, sorted.
fn files(dir: &Path) -> Result<Vec<PathBuf>> {
    walk(dir, false)
}

/// Directories under `dir` (not itself), relative to it, sorted.
fn dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    walk(dir, true)
}

fn walk(dir: &Path, want_dirs: bool) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        for entry in fs::read_dir(dir.join(&rel))? {
            let entry = entry?;
            let path = rel.join(entry.file_name());
            let is_dir = entry.file_type()?.is_dir();
            if is_dir {
                pending.push(path.clone());
            }
            if is_dir == want_dirs {
                found.push(path);
            }
        }
    }
    found.sort();
    Ok(found)
}

/// `gzip -9n` (no name or time inside: reproducible) of `names` in `dir`.
fn gzip(dir: &Path, names: &[PathBuf]) -> Result<()> {
    crate::run(
        Command::new("gzip")
            .arg("-9nf")
            .args(names.iter().map(|n| dir.join(n))),
    )
}

fn copy(from: &Path, to: &Path, mode: u32) -> Result<()> {
    fs::create_dir_all(to.parent().context("a file's folder")?)?;
    fs::copy(from, to).with_context(|| format!("copying {}", from.display()))?;
    fs::set_permissions(to, fs::Permissions::from_mode(mode))?;
    Ok(())
}

fn write(to: &Path, text: &str, mode: u32) -> Result<()> {
    fs::create_dir_all(to.parent().context("a file's folder")?)?;
    fs::write(to, text).with_context(|| format!("writing {}", to.display()))?;
    fs::set_permissions(to, fs::Permissions::from_mode(mode))?;
    Ok(())
}

/// `git ARGS` in the repository, trimmed; None outside a clone.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(crate::root())
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}
