//! Asking a running daemon, from another process: `rocsync trace`, `rocsync status`, and
//! the claim a standalone capture holds while a daemon runs ([`crate::daemon::serving::protocol`]).

use std::{
    io::{BufRead as _, BufReader, IoSliceMut, Write as _},
    mem::MaybeUninit,
    os::{fd::OwnedFd, unix::net::UnixStream},
    path::Path,
    time::Duration,
};

use anyhow::{Context as _, Result, bail};
use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, recvmsg};

use crate::calls::agents::AgentSet;
use crate::daemon::serving::protocol::{ClaimRequest, Reply, Request};
/// The most descriptors an answer carries.
const MAX_FDS: usize = 253;

/// Connects to the daemon.
pub(crate) fn connect(socket: &Path) -> Result<UnixStream> {
    UnixStream::connect(socket).with_context(|| {
        format!(
            "cannot reach the daemon at {} (is `rocsync daemon` running, and may you use it?)",
            socket.display()
        )
    })
}

/// Sends one request and reads its answer line, with any descriptors that came along.
/// A refusal is an error.
pub(crate) fn ask(
    conn: &mut UnixStream,
    request: &Request,
    wait: Duration,
) -> Result<(Reply, Vec<OwnedFd>)> {
    writeln!(conn, "{}", serde_json::to_string(request)?)?;
    answer(conn, wait, || false)
}

/// Reads a request's answer line, with any descriptors that came along, within `wait`;
/// a signal that interrupts the wait calls `interrupted`, which says whether to go on
/// waiting. A refusal is an error.
pub(crate) fn answer(
    conn: &mut UnixStream,
    wait: Duration,
    mut interrupted: impl FnMut() -> bool,
) -> Result<(Reply, Vec<OwnedFd>)> {
    conn.set_read_timeout(Some(wait))?;
    let mut first = vec![0u8; 64 << 10];
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = loop {
        let got = recvmsg(
            &*conn,
            &mut [IoSliceMut::new(&mut first)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        );
        match got {
            Err(rustix::io::Errno::INTR) if interrupted() => continue,
            got => break got,
        }
    }
    .context("no answer from the daemon")?;
    let mut fds = Vec::new();
    for m in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = m {
            fds.extend(rights);
        }
    }
    first.truncate(got.bytes);
    let mut line = String::from_utf8_lossy(&first).into_owned();
    if !line.ends_with('\n') && got.bytes > 0 {
        BufReader::new(&*conn)
            .read_line(&mut line)
            .context("no answer from the daemon")?;
    }
    let reply: Reply = serde_json::from_str(&line)
        .with_context(|| format!("the daemon's answer is not one rocsync knows: {line:?}"))?;
    if let Reply::Refused { error } = reply {
        bail!("the daemon refused: {error}");
    }
    Ok((reply, fds))
}

/// A standalone capture's hold on its agents while a daemon runs: released when dropped
/// (or when this process ends, however it ends).
pub(crate) struct Claim {
    _conn: UnixStream,
}

impl Claim {
    /// Claims `agents` for `name` through the daemon at `socket`. No daemon there: no
    /// claim needed. A daemon session on the same agents: refused, naming it.
    pub(crate) fn take(socket: &Path, name: &str, agents: &AgentSet) -> Result<Option<Claim>> {
        let Ok(mut conn) = UnixStream::connect(socket) else {
            return Ok(None);
        };
        let request = Request::Claim(ClaimRequest {
            name: name.into(),
            agents: agents.clone(),
        });
        ask(&mut conn, &request, Duration::from_secs(10)).with_context(|| {
            format!("a rocsync daemon runs on this node ({})", socket.display())
        })?;
        Ok(Some(Claim { _conn: conn }))
    }
}

/// The claim of a standalone capture (`run`, `attach`) on its `--agents`, through the
/// daemon at `socket` if one runs there.
pub(crate) fn claim_for(
    socket: &Path,
    agents: &AgentSet,
    what: &str,
    verbose: bool,
) -> Result<Option<Claim>> {
    let name = format!("{what} (rocsync pid {})", std::process::id());
    let claim = Claim::take(socket, &name, agents)?;
    if claim.is_some() && verbose {
        crate::say!(
            "rocsync: {agents} claimed through the daemon at {}",
            socket.display()
        );
    }
    Ok(claim)
}
