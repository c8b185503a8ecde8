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

use crate::{
    calls::emit::{
        files::{PendingFile, refuse_existing},
        processes::per_process_name,
    },
    daemon::{
        MAX_TRACE_DURATION as MAX_DURATION,
        protocol::{Reply, Request, TraceRequest},
        remote,
        untrusted::escaped,
    },
    front::cli::{StatusArgs, TraceArgs},
};

pub fn trace(args: TraceArgs) -> Result<i32> {
    let duration = match args.duration_ms {
        Some(ms) => {
            crate::say!(
                "rocsync: warning: --duration-ms is deprecated: use --duration {ms}ms (or seconds: 10, 1.5s, 2m)"
            );
            Duration::from_millis(ms)
        }
        None => args.duration,
    };
    if duration.is_zero() || duration > MAX_DURATION {
        bail!(
            "--duration {duration:?}: a trace records for more than zero and at most {}s",
            MAX_DURATION.as_secs()
        );
    }
    // A path that cannot be written fails now, before anything is recorded.
    if let Some(o) = &args.output {
        refuse_existing(o, args.force)?;
        drop(PendingFile::create(o)?);
    }
    let mut conn = remote::connect(&args.socket)?;
    let request = Request::Trace(TraceRequest {
        pids: args.pid,
        all: args.all,
        flight: args.flight,
        cgroup: args.cgroup,
        pod: args.pod,
        agents: args.agents.unwrap_or_default(),
        duration_ms: Some(
            u64::try_from(duration.as_millis())
                .unwrap_or(u64::MAX)
                .max(1),
        ),
        name: args.name,
        send_files: args.output.is_some(),
    });
    // The daemon answers once the traces are written. Ctrl-C (SIGTERM, SIGHUP) ends the
    // trace now rather than this client: its side of the connection closed, the daemon
    // writes what it recorded and answers as ever. A second one leaves at once.
    let wait = duration.saturating_add(Duration::from_secs(60));
    interrupt::catch(true);
    let closer = conn.try_clone()?;
    {
        use std::io::Write as _;
        writeln!(conn, "{}", serde_json::to_string(&request)?)?;
    }
    let (reply, fds) = remote::answer(&mut conn, wait, || {
        if !interrupt::taken() {
            return false;
        }
        interrupt::catch(false);
        crate::say!(
            "rocsync: interrupted: the daemon ends the trace now and writes what it recorded \
             (again to leave without waiting for its name)"
        );
        let _ = closer.shutdown(std::net::Shutdown::Write);
        let _ = closer.set_read_timeout(Some(Duration::from_secs(30)));
        true
    })?;
    let Reply::Written(written) = reply else {
        bail!("the daemon's answer names no files");
    };
    let (files, pids) = (written.files, written.pids);
    let Some(output) = args.output else {
        print_lines(&files)?;
        return Ok(0);
    };
    if files.is_empty() || fds.len() != files.len() || pids.len() != files.len() {
        bail!(
            "the daemon sent {} of {} files; they are in its state directory",
            fds.len(),
            files.len()
        );
    }
    let written = copy_out(&output, fds, &pids, args.force)
        .with_context(|| format!("the daemon's copies are kept: {}", files.join(", ")))?;
    let written: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
    print_lines(&written)?;
    Ok(0)
}

/// Ctrl-C, SIGTERM and SIGHUP while `rocsync trace` waits: they interrupt the wait (no
/// `SA_RESTART`) instead of ending the client. One inherited as ignored stays so.
mod interrupt {
    use std::sync::atomic::{AtomicBool, Ordering};

    static TAKEN: AtomicBool = AtomicBool::new(false);

    extern "C" fn taken_now(_: libc::c_int) {
        TAKEN.store(true, Ordering::SeqCst);
    }

    /// Catches them (`catch`), or gives them their default back.
    pub(super) fn catch(catch: bool) {
        let handler = match catch {
            true => taken_now as extern "C" fn(libc::c_int) as libc::sighandler_t,
            false => libc::SIG_DFL,
        };
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: sigaction with valid structures; the handler only stores an atomic.
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                libc::sigaction(sig, std::ptr::null(), &mut old);
                if old.sa_sigaction == libc::SIG_IGN {
                    continue;
                }
                let mut new: libc::sigaction = std::mem::zeroed();
                new.sa_sigaction = handler;
                libc::sigemptyset(&mut new.sa_mask);
                libc::sigaction(sig, &new, std::ptr::null_mut());
            }
        }
    }

    /// Whether one came (once).
    pub(super) fn taken() -> bool {
        TAKEN.swap(false, Ordering::SeqCst)
    }
}

/// Writes each received file to `output` (several: `<stem>_<pid><ext>` beside it), as the
/// user's own outputs are written.
fn copy_out(
    output: &Path,
    fds: Vec<OwnedFd>,
    pids: &[Option<u32>],
    force: bool,
) -> Result<Vec<PathBuf>> {
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
    // Every output checked and reserved first, in the one directory opened.
    for &pid in pids {
        refuse_existing(&output.with_file_name(name(pid)?), force)?;
    }
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
    let mut conn = remote::connect(&args.socket)?;
    let (reply, _) = remote::ask(&mut conn, &Request::Status {}, Duration::from_secs(10))?;
    if args.json {
        return print_lines(&[reply.line().trim_end()]).map(|()| 0);
    }
    let Reply::Status(s) = reply else {
        bail!("the daemon's answer is no status");
    };
    let mut out = vec![format!("tracked processes: {}", s.tracked.len())];
    for p in &s.tracked {
        // Unpadded, as the JSON value it was printed from (its width was ignored).
        let mut line = format!("  {}  {}", p.pid, p.exe);
        if let Some(pod) = &p.pod {
            // Short, as `docker ps` shows it (`--json` has all of it).
            let container = pod
                .container
                .as_deref()
                .map_or("?", |c| &c[..c.len().min(12)]);
            line.push_str(&format!("  pod {}  container {container}", pod.shown()));
        }
        if let Some(c) = &p.probes {
            let (share, priced) = (c.cpu_share * 100.0, c.priced.replace('_', "-"));
            line.push_str(&format!("  probes {share:.2}% of its CPU ({priced})"));
            if let Some(at) = c.polls_shed_at {
                // The log's figure: the share above was measured with them off.
                line.push_str(&format!(", {:.1}% when its polls were shed", at * 100.0));
            }
        }
        out.push(line);
        for c in &p.communicators {
            let opt = |v: Option<u32>| v.map_or("?".into(), |v| v.to_string());
            out.push(format!(
                "    comm {}  rank {} of {}  at #{}",
                c.comm.as_deref().unwrap_or("unknown"),
                opt(c.rank),
                opt(c.nranks),
                c.seq
            ));
        }
    }
    out.push(format!("traces recording: {}", s.traces.len()));
    out.extend(s.traces.iter().map(|t| format!("  {}", t.session)));
    out.push(format!("traces being written: {}", s.writing.len()));
    out.extend(s.writing.iter().map(|w| format!("  {w}")));
    out.push(format!("dyno traces scheduled: {}", s.scheduled.len()));
    for t in &s.scheduled {
        let (name, ms) = (&t.session, t.starts_in_ms);
        out.push(format!("  {name} (starts in {ms} ms)"));
    }
    out.push(format!(
        "stall traces (newest last): {}",
        s.stall_traces.len()
    ));
    out.extend(s.stall_traces.iter().map(|t| format!("  {t}")));
    out.push(format!("hangs traced now: {}", s.hangs.len()));
    for h in &s.hangs {
        let waits = h.waits_on.as_deref().unwrap_or("unknown");
        let place = (h.location.as_ref()).map_or(String::new(), |w| format!(" in {w}"));
        out.push(format!(
            "  pid {} thread {} {} blocked{place} {:.1} s, waits on {waits}",
            h.pid, h.tid, h.api, h.blocked_s
        ));
    }
    out.push(format!("return probes: {}", s.returns_probed));
    out.push(format!("standalone captures: {}", s.claims.len()));
    out.extend(s.claims.iter().map(|c| format!("  {c}")));
    // Names are their owners' (an executable may be named with a newline or an escape
    // sequence): a line can neither be forged nor colour the terminal.
    let out: Vec<String> = out.iter().map(|l| escaped(l)).collect();
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
