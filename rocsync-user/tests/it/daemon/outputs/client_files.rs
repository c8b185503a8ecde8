//! `rocsync trace -o` writes as the client, under the same rules as a capture's outputs:
//! never through a symbolic link or into a FIFO, and under sudo owned by the invoking
//! user — checked on the filesystem. Needs root.

use std::{os::unix::fs::MetadataExt as _, process::Output};

use crate::common::{daemon::*, *};

fn trace_to(
    sock: &std::path::Path,
    pid: u32,
    out: &std::path::Path,
    env: &[(&str, &str)],
) -> Output {
    rocsync()
        .args([
            "trace",
            "--duration",
            "200ms",
            "--pid",
            &pid.to_string(),
            "-o",
        ])
        .arg(out)
        .arg("--socket")
        .arg(sock)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

#[test]
fn trace_output_is_never_a_link_or_fifo_and_belongs_to_the_sudo_user() {
    let name = "trace_output_is_never_a_link_or_fifo_and_belongs_to_the_sudo_user";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let (daemon, mut lines) = start_daemon(&dir, &exe, &[]);
    let mut target = tracked_loop(&dir, &exe, &mut lines, 4000);
    let sock = dir.path("rocsync.sock");
    // A link to a file of someone else's: refused, the file untouched.
    let victim = dir.path("victim");
    std::fs::write(&victim, "precious").unwrap();
    let link = dir.path("link.json");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let out = trace_to(&sock, target.id(), &link, &[]);
    assert!(!out.status.success());
    assert!(stderr_of(&out).contains("symbolic link"));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // A FIFO: refused without blocking on it (nothing reads it).
    let fifo = dir.path("fifo.json");
    make_fifo(&fifo);
    let out = trace_to(&sock, target.id(), &fifo, &[]);
    assert!(!out.status.success());
    assert!(stderr_of(&out).contains("not a regular file"));
    // Under sudo: a regular file of the invoking user's, the trace of the process.
    // Created as the sudo user: in a folder they may write.
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(dir.0.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir(dir.path("theirs")).unwrap();
    std::fs::set_permissions(dir.path("theirs"), std::fs::Permissions::from_mode(0o777)).unwrap();
    let mine = dir.path("theirs/mine.json");
    let out = trace_to(
        &sock,
        target.id(),
        &mine,
        &[("SUDO_UID", "65534"), ("SUDO_GID", "65533")],
    );
    assert_ok(&out);
    let meta = std::fs::symlink_metadata(&mine).unwrap();
    assert!(meta.file_type().is_file());
    assert_eq!((meta.uid(), meta.gid()), (65534, 65533));
    assert!(target.wait().unwrap().success());
    // Its rows are an unbroken run of the process's own logged calls.
    let logged = rocsync_tests::read_log(&dir.path("loop.log"));
    assert_window_of_log(&read_json(&mine), target.id(), &logged);
    stop(daemon);
}
