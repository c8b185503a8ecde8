//! The .deb as users get it (`cargo xtask dist` writes it to `$ROCSYNC_DIST`): lintian
//! reports no error, and installed by dpkg into a throwaway root (never this machine's:
//! `dpkg --root` with its own database; the maintainer scripts run outside a chroot with
//! DPKG_ROOT set, as dpkg's `--force-script-chrootless` does) it gives a rocsync that
//! runs, its man pages and completions, a unit `systemd-analyze verify` accepts; `dpkg -r`
//! leaves only the conffile (and the daemon's state) and `dpkg --purge` nothing.
//! Needs lintian, man-db and systemd (scripts/setup installs them) and root (dpkg).

use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
    process::{Command, Output},
};

use crate::common::{TempDir, stderr_of};

const CONFFILE: &str = "etc/rocsync/rocsync.toml";

/// The one .deb in `$ROCSYNC_DIST`, or a skip (a failure under `cargo xtask test`).
fn deb(test: &str) -> Option<PathBuf> {
    let Some(dir) = std::env::var_os("ROCSYNC_DIST") else {
        rocsync_tests::skip(test, "ROCSYNC_DIST is unset (cargo xtask test sets it)");
        return None;
    };
    let debs: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", Path::new(&dir).display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "deb"))
        .collect();
    assert_eq!(
        debs.len(),
        1,
        "one .deb in {}: {debs:?}",
        Path::new(&dir).display()
    );
    debs.into_iter().next()
}

fn have(tool: &str, test: &str) -> bool {
    let found = Command::new(tool).arg("--version").output().is_ok();
    found || !rocsync_tests::skip(test, &format!("{tool} is not installed (scripts/setup)"))
}

/// Runs `cmd`; its stdout, or a panic with everything it said.
fn ok(cmd: &mut Command) -> String {
    let out: Output = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{text}{}",
        out.status,
        stderr_of(&out)
    );
    text
}

fn field(deb: &Path, name: &str) -> String {
    ok(Command::new("dpkg-deb").arg("--field").arg(deb).arg(name))
        .trim()
        .to_owned()
}

#[test]
fn lintian_reports_no_errors() {
    let test = "lintian_reports_no_errors";
    let Some(deb) = deb(test) else { return };
    if !have("lintian", test) {
        return;
    }
    // Exit status 1 means "tags found" (warnings count too): the E: lines decide.
    let out = Command::new("lintian")
        .args(["--display-info", "--pedantic"])
        .arg(&deb)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("lintian {}:\n{text}", deb.display());
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "lintian: {out:?}"
    );
    let errors: Vec<&str> = text.lines().filter(|l| l.starts_with("E:")).collect();
    assert!(errors.is_empty(), "lintian errors: {errors:#?}");
}

/// `dpkg --root ROOT` with the maintainer scripts run chrootless (ROOT has no shell).
fn dpkg(root: &Path) -> Command {
    let mut cmd = Command::new("dpkg");
    cmd.arg(format!("--root={}", root.display()))
        .arg("--force-script-chrootless");
    cmd
}

/// Files and links under `root` outside dpkg's own database, relative to it.
fn left(root: &Path) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned();
            if rel == "var/lib/dpkg" {
                continue;
            }
            if path.is_dir() && !path.is_symlink() {
                pending.push(path);
            } else {
                found.insert(rel);
            }
        }
    }
    found
}

#[test]
fn installs_into_a_throwaway_root_works_and_removes_cleanly() {
    let test = "installs_into_a_throwaway_root_works_and_removes_cleanly";
    let Some(deb) = deb(test) else { return };
    if !["man", "systemd-analyze", "dpkg-deb"]
        .iter()
        .all(|t| have(t, test))
    {
        return;
    }
    if !rustix::process::geteuid().is_root() {
        rocsync_tests::skip(test, "dpkg needs root");
        return;
    }
    let dir = TempDir::new();
    let root = dir.path("root");
    let admin = root.join("var/lib/dpkg");
    for sub in ["info", "updates", "triggers"] {
        fs::create_dir_all(admin.join(sub)).unwrap();
    }
    fs::write(admin.join("status"), "").unwrap();
    fs::write(admin.join("available"), "").unwrap();

    // The binary shipped is static: no libc to depend on. A development .deb made from
    // a dynamic build depends on libc6, which the empty root lacks but the host, whose
    // loader runs it, has.
    let depends = field(&deb, "Depends");
    let portable = deb.with_file_name("rocsync");
    if portable.is_file() {
        let headers = ok(Command::new("readelf").arg("-l").arg(&portable));
        let dynamic = headers.contains("INTERP");
        assert!(
            dynamic || depends.is_empty(),
            "static, yet Depends: {depends}"
        );
    }
    let mut install = dpkg(&root);
    if !depends.is_empty() {
        eprintln!("{test}: a dynamic build (Depends: {depends}): installing with --force-depends");
        install.arg("--force-depends");
    }
    ok(install.arg("--install").arg(&deb));
    let status = ok(dpkg(&root).args(["--status", "rocsync"]));
    assert!(status.contains("Status: install ok installed"), "{status}");
    assert!(
        status.contains(&format!("/{CONFFILE} ")),
        "not a conffile: {status}"
    );

    // The binary runs from where the package put it.
    let binary = root.join("usr/bin/rocsync");
    let version = ok(Command::new(&binary).arg("--version"));
    let want = field(&deb, "Version").replace('~', "-");
    assert!(
        version.starts_with(&format!("rocsync {want} (commit ")),
        "{version}"
    );
    // The unit's ExecStartPre: the installed binary accepts the installed configuration.
    ok(Command::new(&binary)
        .args(["daemon", "--check", "--config"])
        .arg(root.join(CONFFILE)));

    // Man pages where man finds them, for the command and each subcommand.
    let man = root.join("usr/share/man");
    for page in ["rocsync", "rocsync-attach", "rocsync-daemon"] {
        let found = ok(Command::new("man").arg("-w").arg(page).env("MANPATH", &man));
        assert!(
            found.trim().starts_with(man.to_str().unwrap()),
            "{page}: {found}"
        );
    }
    // bash loads the completion and binds it to rocsync.
    let bash = root.join("usr/share/bash-completion/completions/rocsync");
    let bound = ok(Command::new("bash")
        .arg("-c")
        .arg(format!("source {} && complete -p rocsync", bash.display())));
    assert!(
        bound.contains("_rocsync") && bound.trim().ends_with(" rocsync"),
        "{bound}"
    );
    for other in [
        "usr/share/zsh/vendor-completions/_rocsync",
        "usr/share/fish/vendor_completions.d/rocsync.fish",
    ] {
        assert!(root.join(other).is_file(), "{other} missing");
    }

    verify_unit(&root, &man);

    // What running it leaves: the operator's `systemctl enable`, the daemon's state.
    ok(Command::new("systemctl")
        .arg(format!("--root={}", root.display()))
        .args(["enable", "rocsync.service"]));
    let wants = root.join("etc/systemd/system/multi-user.target.wants/rocsync.service");
    assert!(wants.is_symlink());
    let state = root.join("var/lib/rocsync/traces/t.json");
    fs::create_dir_all(state.parent().unwrap()).unwrap();
    fs::write(&state, "{}").unwrap();

    let shipped: Vec<String> = ok(Command::new("dpkg-deb").arg("--contents").arg(&deb))
        .lines()
        .map(|l| l.split_once("./").unwrap().1.to_owned())
        .filter(|p| !p.is_empty())
        .collect();
    ok(dpkg(&root).args(["--remove", "rocsync"]));
    for path in &shipped {
        let there = root.join(path).symlink_metadata().is_ok();
        let kept = path == CONFFILE || path.ends_with('/');
        assert!(!there || kept, "dpkg -r left {path}");
    }
    assert!(
        root.join(CONFFILE).is_file(),
        "dpkg -r removed the configuration"
    );
    assert!(state.is_file(), "dpkg -r removed the daemon's state");
    assert!(
        wants.is_symlink(),
        "dpkg -r dropped the operator's enablement"
    );

    ok(dpkg(&root).args(["--purge", "rocsync"]));
    assert_eq!(
        left(&root),
        BTreeSet::new(),
        "dpkg --purge left files behind"
    );
    for gone in ["etc/rocsync", "var/lib/rocsync"] {
        assert!(!root.join(gone).exists(), "dpkg --purge left {gone}");
    }
    let status = dpkg(&root).args(["--status", "rocsync"]).output().unwrap();
    assert!(
        !status.status.success(),
        "still known after purge: {status:?}"
    );
}

/// `systemd-analyze verify` of the installed unit, against the root: its ExecStart
/// binary must exist there and its Documentation= pages must be found (MANPATH). The
/// root holds no systemd, so the targets every service is ordered against and the
/// ExecReload= `/bin/kill` are stubbed for the check and removed after it.
fn verify_unit(root: &Path, man: &Path) {
    let stubs: Vec<PathBuf> = ["sysinit", "basic", "shutdown"]
        .iter()
        .map(|t| root.join(format!("etc/systemd/system/{t}.target")))
        .chain([root.join("bin/kill")])
        .collect();
    for stub in &stubs {
        fs::create_dir_all(stub.parent().unwrap()).unwrap();
        fs::write(
            stub,
            "[Unit]\nDescription=stub for systemd-analyze verify\n",
        )
        .unwrap();
    }
    use std::os::unix::fs::PermissionsExt as _;
    fs::set_permissions(&stubs[3], fs::Permissions::from_mode(0o755)).unwrap();
    let out = Command::new("systemd-analyze")
        .arg(format!("--root={}", root.display()))
        .args(["verify", "rocsync.service"])
        .env("MANPATH", man)
        .output()
        .unwrap();
    let err = stderr_of(&out);
    assert!(
        out.status.success() && err.trim().is_empty(),
        "{out:?}\n{err}"
    );
    for stub in &stubs {
        fs::remove_file(stub).unwrap();
    }
    for dir in ["etc/systemd/system", "etc/systemd", "bin"] {
        fs::remove_dir(root.join(dir)).unwrap();
    }
}
