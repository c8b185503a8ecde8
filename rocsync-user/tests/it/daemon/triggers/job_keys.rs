//! A job's upload key takes no trace from outside the job (issue 60, item 6): `nobody`
//! joins root's job's unique id (read from the job's log, as one reading a launcher's
//! store could) and blocks in it, once while the job runs and once after its ranks here
//! have ended; neither hang trace goes under `job-<the job's id>/`, both reach the
//! store, and the daemon says why. The store is moto's S3 server. Needs root and
//! `ROCSYNC_HTA_PYTHON`'s venv with moto.

use std::{
    os::unix::process::CommandExt as _,
    path::Path,
    process::{Command, Stdio},
};

use super::collectives::{STALLS, laggard_job, set_up};
use crate::{
    collectives::comm_id_of,
    common::{Lines, Reaped, TempDir, daemon::*},
    daemon::outputs::uploads::{Keys, Store, free_port, uploading_daemon},
};

/// `nobody`'s rank 1 of the unique id `hex`: one collective, then blocked for good (its
/// own scratch: no one else enters); returned once its hang is said.
fn forger(dir: &TempDir, exe: &Path, hex: &str, lines: &mut Lines) -> Reaped {
    let forger = Reaped(
        Command::new(exe)
            .args(["rank", "1", "2", "1", "9", "0", "0", "1000", "0", hex])
            .env("TMPDIR", dir.path("theirs"))
            .uid(65534)
            .gid(65534)
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let f = forger.0.id();
    lines.wait_for(&format!("hang: pid {f}'s hipStreamSynchronize"));
    forger
}

#[test]
fn another_users_trace_is_never_uploaded_under_a_jobs_key() {
    let name = "another_users_trace_is_never_uploaded_under_a_jobs_key";
    let Some((dir, _, python)) = metrics_test(name) else {
        return;
    };
    let exe = own_nccl_ranks(&dir);
    nobodys_folder(&dir, "theirs");
    let moto = Path::new(&python).with_file_name("moto_server");
    let port = free_port();
    let store = Store::start(&moto, port);
    let (daemon, mut lines) = uploading_daemon(&dir, &exe, port, &STALLS, Keys::File);
    let addr = metrics_addr(&lines);
    let (mut job, rx) = laggard_job(&exe, &dir);
    let hex = rx.recv().unwrap().strip_prefix("uid ").unwrap().to_string();
    let id = comm_id_of(&hex);
    set_up(&rx);
    // While the job's ranks hold the id, then once they have ended (each trace ends
    // with its forger).
    let during = forger(&dir, &exe, &hex, &mut lines);
    let f = vec![during.0.id()];
    assert!(job.wait().unwrap().success());
    drop(during);
    let after = forger(&dir, &exe, &hex, &mut lines);
    let f = [f, vec![after.0.id()]].concat();
    drop(after);
    let theirs: Vec<String> = (f.iter())
        .map(|p| format!("hang-hipStreamSynchronize-{p}-"))
        .collect();
    let mut keys: Vec<String> = Vec::new();
    until(60, "the forgers' hang traces uploaded", || {
        if metric(&addr, "rocsync_upload_pending") > 0.0 {
            return false;
        }
        keys = (store.objects(&python, &dir.path("objects")))
            .into_keys()
            .collect();
        (theirs.iter()).all(|t| keys.iter().any(|k| k.contains(t)))
    });
    for t in &theirs {
        let key = keys.iter().find(|k| k.contains(t)).unwrap();
        assert!(
            key.starts_with("fleet/node-a/"),
            "nobody's trace under {key}, not the node's: {keys:?}"
        );
    }
    lines.wait_for_all(&[&format!(
        "comm {id} is claimed on this node by processes of another user or cgroup too"
    )]);
    stop(daemon);
}
