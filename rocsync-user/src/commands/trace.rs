//! `rocsync trace`: asks the running daemon for a trace and prints the files it wrote;
//! with `-o`, copies them where the user says, with the user's own rights.
//! `rocsync status`: what the daemon tracks and records.

use std::{
    fs::File,
    os::fd::OwnedFd,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Context as _, Result, bail};
use serde_json::json;

use crate::{
    cli::{StatusArgs, TraceArgs},
    daemon::client,
    emit::{files::PendingFile, processes::per_process_name},
};

pub fn trace(args: TraceArgs) -> Result<i32> {
    // A path that cannot be written fails now, before anything is recorded.
    if let Some(o) = &args.output {
        drop(PendingFile::create(o)?);
    }
    let mut conn = client::connect(&args.socket)?;
    let request = json!({ "trace": {
        "pids": args.pid, "all": args.all, "flight": args.flight, "cgroup": args.cgroup,
        "agents": args.agents,
        "duration_ms": args.duration_ms, "name": args.name,
        "send_files": args.output.is_some(),
    }});
    // The daemon answers once the traces are written.
    let wait = Duration::from_millis(args.duration_ms) + Duration::from_secs(60);
    let (v, fds) = client::ask(&mut conn, &request, wait)?;
    let files = v["files"]
        .as_array()
        .context("the daemon's answer names no files")?;
    let Some(output) = args.output else {
        let names: Vec<&str> = files.iter().filter_map(|f| f.as_str()).collect();
        print_lines(&names)?;
        return Ok(0);
    };
    let pids: Vec<Option<u32>> = v["pids"]
        .as_array()
        .map(|p| p.iter().map(|p| p.as_u64().map(|p| p as u32)).collect())
        .unwrap_or_default();
    if files.is_empty() || fds.len() != files.len() || pids.len() != files.len() {
        bail!(
            "the daemon sent {} of {} files; they are in its state directory",
            fds.len(),
            files.len()
        );
    }
    let kept: Vec<&str> = files.iter().filter_map(|f| f.as_str()).collect();
    let written = copy_out(&output, fds, &pids)
        .with_context(|| format!("the daemon's copies are kept: {}", kept.join(", ")))?;
    let written: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
    print_lines(&written)?;
    Ok(0)
}

/// Writes each received file to `output` (several: `<stem>_<pid><ext>` beside it), as the
/// user's own outputs are written.
fn copy_out(output: &Path, fds: Vec<OwnedFd>, pids: &[Option<u32>]) -> Result<Vec<PathBuf>> {
    let name = |pid: Option<u32>| -> Result<String> {
        match (fds.len() > 1, pid) {
            (false, _) => Ok(output
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into()),
            (true, Some(pid)) => Ok(per_process_name(output, pid)),
            (true, None) => bail!("the daemon named no process for one of several files"),
        }
    };
    // Every output reserved first, in the one directory opened.
    let first = PendingFile::create(&output.with_file_name(name(pids[0])?))?;
    let mut files = vec![];
    for &pid in &pids[1..] {
        files.push(first.sibling(&name(pid)?)?);
    }
    files.insert(0, first);
    let mut written = Vec::new();
    for (fd, file) in fds.into_iter().zip(files) {
        let mut stream = file.stream()?;
        std::io::copy(&mut File::from(fd), &mut stream)
            .and_then(|_| stream.close())
            .with_context(|| format!("writing {}", file.path().display()))?;
        written.push(file.persist()?);
    }
    Ok(written)
}

pub fn status(args: StatusArgs) -> Result<i32> {
    let mut conn = client::connect(&args.socket)?;
    let (v, _) = client::ask(&mut conn, &json!({ "status": {} }), Duration::from_secs(10))?;
    if args.json {
        return print_lines(&[v.to_string()]).map(|()| 0);
    }
    let list = |key: &str| v[key].as_array().cloned().unwrap_or_default();
    let str_of = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
    let mut out = vec![format!("tracked processes: {}", list("tracked").len())];
    for p in list("tracked") {
        out.push(format!("  {:>8}  {}", p["pid"], str_of(&p["exe"])));
    }
    out.push(format!("traces recording: {}", list("traces").len()));
    for t in list("traces") {
        out.push(format!("  {}", str_of(&t["session"])));
    }
    out.push(format!("traces being written: {}", list("writing").len()));
    for w in list("writing") {
        out.push(format!("  {}", str_of(&w)));
    }
    out.push(format!(
        "dyno traces scheduled: {}",
        list("scheduled").len()
    ));
    for t in list("scheduled") {
        let (name, ms) = (str_of(&t["session"]), &t["starts_in_ms"]);
        out.push(format!("  {name} (starts in {ms} ms)"));
    }
    out.push(format!("standalone captures: {}", list("claims").len()));
    for c in list("claims") {
        out.push(format!("  {}", str_of(&c)));
    }
    print_lines(&out)?;
    Ok(0)
}

/// Lines on stdout; a stdout that cannot be written (a pipe whose reader left) is an
/// error, not a panic.
fn print_lines(lines: &[impl AsRef<str>]) -> Result<()> {
    use std::io::Write as _;
    let mut text = String::new();
    for l in lines {
        text.push_str(l.as_ref());
        text.push('\n');
    }
    std::io::stdout()
        .write_all(text.as_bytes())
        .context("writing to standard output")
}
