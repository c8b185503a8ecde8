//! The portable binary `cargo xtask dist` builds (`ROCSYNC_DIST/rocsync`): static — it
//! asks for no dynamic loader —, it runs in a root holding nothing but itself and a
//! passwd file, says its version, commit and probes' build id there, and resolves users
//! and groups from that root's files; on the host, a user and a group that only an NSS
//! module knows (libnss-extrausers, in a private mount namespace) resolve too, through
//! the host's `getent`. Needs root (chroot, mounts).

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use object::read::elf::{FileHeader as _, ProgramHeader as _};

use crate::common::*;

/// The binary under test, or a skip where `cargo xtask dist` did not run.
fn dist_binary(name: &str) -> Option<PathBuf> {
    let Some(dir) = std::env::var_os("ROCSYNC_DIST") else {
        rocsync_tests::skip(name, "ROCSYNC_DIST is not set (cargo xtask test sets it)");
        return None;
    };
    let bin = Path::new(&dir).join("rocsync");
    assert!(bin.is_file(), "{} is missing", bin.display());
    Some(bin)
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into(), stderr_of(out))
}

/// `rocsync --version`'s fields: version, commit, build id.
fn version_fields(line: &str) -> (String, String, String) {
    // rocsync 0.1.0 (commit abc1234, eBPF object sha256:0123456789abcdef)
    let mut words = line.split_whitespace();
    let version = words.nth(1).unwrap().to_string();
    let commit = words.nth(1).unwrap().trim_end_matches(',').to_string();
    let id = line.rsplit("sha256:").next().unwrap().trim_end_matches(')');
    (version, commit, id.trim().to_string())
}

#[test]
fn the_binary_is_static_and_runs_in_a_root_without_libc() {
    let name = "the_binary_is_static_and_runs_in_a_root_without_libc";
    let Some(bin) = dist_binary(name) else {
        return;
    };
    let data = std::fs::read(&bin).unwrap();
    let elf = object::elf::FileHeader64::<object::Endianness>::parse(&*data).unwrap();
    let endian = elf.endian().unwrap();
    let headers = elf.program_headers(endian, &*data).unwrap();
    assert!(
        !headers
            .iter()
            .any(|p| p.p_type(endian) == object::elf::PT_INTERP),
        "{} asks for a dynamic loader",
        bin.display()
    );

    // A root with the binary and two files: no libc, no loader, no getent.
    let dir = TempDir::new();
    let root = dir.path("root");
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::copy(&bin, root.join("rocsync")).unwrap();
    std::fs::write(
        root.join("etc/passwd"),
        "root:x:0:0:root:/:/rocsync\nann:x:1234:1234::/:/rocsync\n",
    )
    .unwrap();
    std::fs::write(root.join("etc/group"), "root:x:0:\nvideo:x:44:ann\n").unwrap();
    let chrooted = |args: &[&str]| {
        Command::new("/usr/sbin/chroot")
            .arg(&root)
            .arg("/rocsync")
            .args(args)
            .env_clear()
            .output()
            .unwrap()
    };
    let out = chrooted(&["--version"]);
    assert_ok(&out);
    let (stdout, _) = text(&out);
    let (version, commit, id) = version_fields(stdout.trim());
    assert_eq!(version, env!("CARGO_PKG_VERSION"));
    // The development build of the same tree says the same commit.
    let dev = rocsync().arg("--version").output().unwrap();
    let (_, dev_commit, _) = version_fields(text(&dev).0.trim());
    assert_eq!(commit, dev_commit);
    assert!(
        id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{stdout}"
    );

    // Users and groups from the root's own files.
    let out = chrooted(&["daemon", "--check", "--user", "ann", "--group", "video"]);
    assert_ok(&out);
    let (stdout, _) = text(&out);
    assert!(
        has_setting(&stdout, "user", "ann") && has_setting(&stdout, "group", "gid 44"),
        "{stdout}"
    );
    let out = chrooted(&["daemon", "--check", "--user", "bob"]);
    assert!(!out.status.success());
    assert!(
        text(&out).1.contains("no user named \"bob\""),
        "{:?}",
        text(&out)
    );
}

#[test]
fn users_only_an_nss_module_knows_resolve_through_the_hosts_getent() {
    let name = "users_only_an_nss_module_knows_resolve_through_the_hosts_getent";
    let Some(bin) = dist_binary(name) else {
        return;
    };
    let module = Path::new("/usr/lib/libnss_extrausers.so.2");
    assert!(
        module.exists(),
        "libnss-extrausers (scripts/setup installs it)"
    );
    let dir = TempDir::new();
    let nss = dir.path("nsswitch.conf");
    std::fs::write(&nss, "passwd: files extrausers\ngroup: files extrausers\n").unwrap();
    let extra = dir.path("extrausers");
    std::fs::create_dir_all(&extra).unwrap();
    std::fs::write(extra.join("passwd"), "dirann:x:4321:4321::/:/bin/false\n").unwrap();
    std::fs::write(extra.join("group"), "dirgroup:x:4322:dirann\n").unwrap();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    assert!(
        !passwd.contains("dirann"),
        "a directory user in /etc/passwd"
    );
    // The module's files replace the host's only in this mount namespace. `daemon
    // --check` resolves both names; `run -u` starts its command as the user with the
    // user's groups (getent's initgroups), as `id` shows.
    let trace = dir.path("id.json");
    let script = format!(
        "mount --bind {nss} /etc/nsswitch.conf && mount --bind {extra} /var/lib/extrausers \
         && {bin} daemon --check --user dirann --group dirgroup \
         && {bin} run --daemon-socket {nobody} -u dirann -o {trace} -- /usr/bin/id",
        nss = nss.display(),
        extra = extra.display(),
        bin = bin.display(),
        trace = trace.display(),
        // A socket no daemon answers: a daemon on the host is none of this test's.
        nobody = dir.path("no-daemon.sock").display()
    );
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_ok(&out);
    let (stdout, stderr) = text(&out);
    assert!(
        has_setting(&stdout, "user", "dirann") && stdout.contains("4322"),
        "{stdout}"
    );
    let id = stdout
        .lines()
        .find(|l| l.starts_with("uid="))
        .unwrap_or_else(|| panic!("id printed nothing: {stdout}{stderr}"));
    assert!(
        id.starts_with("uid=4321(dirann) gid=4321") && id.contains("4322(dirgroup)"),
        "{id}"
    );
}

/// Whether `daemon --check` printed `key  value`.
fn has_setting(check: &str, key: &str, value: &str) -> bool {
    check.lines().any(|l| {
        l.strip_prefix(key)
            .is_some_and(|v| v.starts_with(' ') && v.trim() == value)
    })
}
