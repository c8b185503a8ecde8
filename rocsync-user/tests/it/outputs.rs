//! Outputs as root: never through a link, never into a FIFO or device, owned by the sudo
//! user. Uses `convert` (no kernel needed); ownership needs root.

use std::os::unix::fs::MetadataExt as _;

use crate::common::*;

pub(crate) const RAW: &str = concat!(
    r#"{"rocsync_raw":{"version":"0.1.0","clock_offset_ns":1700000000000000000,"command":["app"]}}"#,
    "\n",
    r#"{"api":"hipDeviceSynchronize","pid":9,"tid":9,"correlation":1,"enter_ns":1000,"exit_ns":2000,"ret":0,"args":{}}"#,
    "\n",
    r#"{"rocsync_raw_end":{}}"#,
    "\n"
);

fn raw_in(dir: &TempDir) -> std::path::PathBuf {
    let raw = dir.path("c.jsonl");
    std::fs::write(&raw, RAW).unwrap();
    raw
}

#[test]
fn a_symlink_to_a_fifo_is_refused_without_blocking() {
    let dir = TempDir::new();
    let raw = raw_in(&dir);
    let fifo = dir.path("fifo");
    make_fifo(&fifo);
    let link = dir.path("out.json");
    std::os::unix::fs::symlink(&fifo, &link).unwrap();
    // A blocking open of the FIFO would hang here: the test's timeout is the harness's.
    let out = rocsync()
        .arg("convert")
        .arg(&raw)
        .arg("-o")
        .arg(&link)
        .output()
        .unwrap();
    let stderr = stderr_of(&out);
    assert!(!out.status.success());
    assert!(stderr.contains("symbolic link"), "{stderr}");
    // And the FIFO itself, named directly.
    let out = rocsync()
        .arg("convert")
        .arg(&raw)
        .arg("-o")
        .arg(&fifo)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(stderr_of(&out).contains("not a regular file"));
}

#[test]
fn dash_writes_the_trace_to_standard_output() {
    let dir = TempDir::new();
    let raw = raw_in(&dir);
    let out = run_ok(rocsync().arg("convert").arg(&raw).args(["-o", "-"]));
    let trace: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a trace");
    assert_eq!(trace["rocsync"]["calls"], 1);
}

#[test]
fn under_sudo_outputs_belong_to_the_invoking_user() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        rocsync_tests::skip(
            "under_sudo_outputs_belong_to_the_invoking_user",
            "giving files to another user needs root (CI runs it as root)",
        );
        return;
    }
    let dir = TempDir::new();
    // Created as the sudo user: only where they may write.
    std::fs::set_permissions(
        dir.0.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let raw = raw_in(&dir);
    let trace = dir.path("t.json");
    run_ok(
        rocsync()
            .arg("convert")
            .arg(&raw)
            .arg("-o")
            .arg(&trace)
            .env("SUDO_UID", "65534")
            .env("SUDO_GID", "65533"),
    );
    let m = std::fs::metadata(&trace).unwrap();
    assert_eq!((m.uid(), m.gid()), (65534, 65533));
}

/// A tmpfs of `kib` KiB, unmounted on drop.
struct SmallFs(TempDir);

impl SmallFs {
    fn new(kib: u32) -> Self {
        let dir = TempDir::new();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(dir.0.path())
            .status()
            .unwrap()
            .success();
        assert!(ok, "mounting a tmpfs");
        SmallFs(dir)
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.0.0.path())
            .status();
    }
}

#[test]
fn a_full_disk_keeps_the_raw_capture_and_the_commands_status() {
    if !can_trace("a_full_disk_keeps_the_raw_capture_and_the_commands_status") {
        return;
    }
    let full = SmallFs::new(64);
    let dir = TempDir::new();
    let raw = dir.path("raw.jsonl");
    let out = rocsync_run_raw(&full.0.path("trace.json"), &raw, &rocsync_tests::scenario())
        .args(["threads", "2", "2000"])
        .env("SCENARIO_EXIT", "7")
        .env("SCENARIO_LOG", dir.path("s.log"))
        .output()
        .unwrap();
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(7), "the command's status: {stderr}");
    assert!(stderr.contains("the trace was not written"), "{stderr}");
    assert!(stderr.contains("No space left"), "{stderr}");
    // The raw capture, on another file system, holds every call.
    let (_, calls) = read_raw(&raw);
    let logged = probed(&rocsync_tests::read_log(&dir.path("s.log")));
    assert_eq!(calls.len(), logged.len());
    // Nothing half-written is left on the full file system.
    assert_eq!(std::fs::read_dir(full.0.0.path()).unwrap().count(), 0);
}

/// The raw capture's disk fills: the trace, on a healthy disk, used to be thrown away too
/// while the summary said "lost: nothing". Now the trace holds every call and says the
/// raw capture was cut; the raw capture is kept up to its last complete line.
#[test]
fn a_full_raw_disk_loses_nothing_of_the_trace() {
    if !can_trace("a_full_raw_disk_loses_nothing_of_the_trace") {
        return;
    }
    let full = SmallFs::new(64);
    let dir = TempDir::new();
    let (trace, raw) = (dir.path("trace.json"), full.0.path("raw.jsonl"));
    let out = rocsync_run_raw(&trace, &raw, &rocsync_tests::scenario())
        .args(["threads", "2", "2000"])
        .env("SCENARIO_EXIT", "7")
        .env("SCENARIO_LOG", dir.path("s.log"))
        .output()
        .unwrap();
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(7), "the command's status: {stderr}");
    assert!(
        stderr.contains("lost from the raw capture")
            && stderr.contains("No space left")
            && stderr.contains("the trace holds the whole capture"),
        "{stderr}"
    );
    let logged = probed(&rocsync_tests::read_log(&dir.path("s.log")));
    let t = read_json(&trace);
    assert_eq!(
        t["rocsync"]["calls"],
        logged.len(),
        "the trace holds every call"
    );
    let said = t["rocsync"]["raw_capture_error"]
        .as_str()
        .expect("said in the trace");
    assert!(said.contains("No space left"), "{said}");
    // Kept, ending at a line's end: convert takes what it holds and calls it truncated.
    let kept = std::fs::read(&raw).expect("the raw capture is kept");
    assert_eq!(kept.last(), Some(&b'\n'), "no cut line");
    let converted = rocsync()
        .arg("convert")
        .arg(&raw)
        .arg("-o")
        .arg(dir.path("c.json"))
        .output()
        .unwrap();
    assert_eq!(
        converted.status.code(),
        Some(2),
        "{}",
        stderr_of(&converted)
    );
}

/// `-o -` with standard output closed printed `trace: -` and wrote nothing.
#[test]
fn dash_with_standard_output_closed_is_an_error() {
    use std::os::unix::process::CommandExt as _;
    let dir = TempDir::new();
    let raw = raw_in(&dir);
    let mut cmd = rocsync();
    cmd.arg("convert").arg(&raw).args(["-o", "-"]);
    // SAFETY: close(2) is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::close(1);
            Ok(())
        });
    }
    let out = cmd.stderr(std::process::Stdio::piped()).output().unwrap();
    let stderr = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("standard output is closed"), "{stderr}");
    assert!(!stderr.contains("trace: -"), "{stderr}");
    assert_eq!(
        std::fs::read(&raw).unwrap(),
        RAW.as_bytes(),
        "the input untouched"
    );
}

/// Runs `cmd` with its stderr a pipe whose reader has already left (`… 2>&1 | head`, a
/// log stream gone): what it says there is lost, nothing else.
fn with_closed_stderr(cmd: &mut std::process::Command) -> std::process::ExitStatus {
    let mut child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    child.wait().unwrap()
}

#[test]
fn a_closed_stderr_costs_only_the_diagnostics() {
    let dir = TempDir::new();
    let raw = raw_in(&dir);
    let trace = dir.path("t.json");
    let status = with_closed_stderr(rocsync().arg("convert").arg(&raw).arg("-o").arg(&trace));
    assert!(status.success(), "{status}");
    assert_eq!(read_json(&trace)["rocsync"]["calls"], 1);
}

#[test]
fn a_capture_with_a_closed_stderr_writes_its_trace_and_keeps_the_status() {
    let name = "a_capture_with_a_closed_stderr_writes_its_trace_and_keeps_the_status";
    if !can_trace(name) {
        return;
    }
    let dir = TempDir::new();
    let trace = dir.path("t.json");
    let status = with_closed_stderr(
        rocsync()
            .args(["run", "--no-status", "-o"])
            .arg(&trace)
            .arg("--")
            .arg(rocsync_tests::scenario())
            .args(["threads", "2", "200"])
            .env("SCENARIO_EXIT", "7")
            .env("SCENARIO_LOG", dir.path("s.log")),
    );
    assert_eq!(status.code(), Some(7), "the command's status");
    let logged = probed(&rocsync_tests::read_log(&dir.path("s.log")));
    assert_eq!(read_json(&trace)["rocsync"]["calls"], logged.len());
}

#[test]
fn one_file_named_by_both_o_and_raw_is_refused_before_the_command_runs() {
    let name = "one_file_named_by_both_o_and_raw_is_refused_before_the_command_runs";
    if !can_trace(name) {
        return;
    }
    let dir = TempDir::new();
    let marker = dir.path("ran");
    // The same file by two spellings; the command would leave a marker if it ran.
    let out = rocsync()
        .current_dir(dir.0.path())
        .args([
            "run",
            "--no-status",
            "-o",
            "same.json",
            "--raw",
            "./same.json",
            "--",
        ])
        .args(["sh", "-c", &format!("touch {}", marker.display())])
        .output()
        .unwrap();
    let stderr = stderr_of(&out);
    assert!(!out.status.success());
    assert!(
        stderr.contains("-o and --raw name the same file"),
        "{stderr}"
    );
    assert!(!marker.exists(), "the command ran");
    assert!(!dir.path("same.json").exists());
}
