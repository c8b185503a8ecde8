//! The daemon's unix socket: one request per connection ([`crate::daemon::serving::protocol`]), from root
//! or a member of the configured group (checked by the peer's credentials), answered
//! with one line.

use std::{os::unix::fs::PermissionsExt as _, path::Path, time::Duration};

use anyhow::{Context as _, Result, bail};
use rustix::{
    fs::OFlags,
    net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags, sendmsg},
};
use std::os::unix::fs::OpenOptionsExt as _;
use tokio::{
    io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader},
    net::{UnixListener, UnixStream},
};

use crate::daemon::serving::protocol::{Reply, Request};

const MAX_REQUEST: u64 = 16 << 10;
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// The socket file the daemon made: removed at its end only while it is still that file
/// (another daemon's, made after a stale lock was taken over, is left alone).
pub(crate) struct SocketFile {
    path: std::path::PathBuf,
    id: (u64, u64),
}

impl SocketFile {
    pub(crate) fn remove(&self) {
        use std::os::unix::fs::MetadataExt as _;
        let ours =
            std::fs::symlink_metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.id);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Listens at `path` (its directory made if missing; a stale socket replaced, anything
/// else refused), readable and writable by root and `group`. Called with the node's
/// daemon lock held: no live daemon listens there.
pub(crate) fn listen(path: &Path, group: Option<u32>) -> Result<(UnixListener, SocketFile)> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()) => {
            std::fs::remove_file(path)?;
        }
        Ok(_) => bail!("{} exists and is not a socket", path.display()),
        Err(_) => {}
    }
    let listener =
        UnixListener::bind(path).with_context(|| format!("cannot listen on {}", path.display()))?;
    let mode = if group.is_some() { 0o660 } else { 0o600 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    if let Some(gid) = group {
        std::os::unix::fs::chown(path, Some(0), Some(gid))?;
    }
    let m = std::fs::symlink_metadata(path)?;
    let id = std::os::unix::fs::MetadataExt::dev(&m);
    let file = SocketFile {
        path: path.to_path_buf(),
        id: (id, std::os::unix::fs::MetadataExt::ino(&m)),
    };
    Ok((listener, file))
}

/// Whether the peer is root or in `group` (primary or supplementary).
pub(crate) fn allowed(conn: &UnixStream, group: Option<u32>) -> bool {
    let Ok(cred) = rustix::net::sockopt::socket_peercred(conn) else {
        return false;
    };
    if cred.uid.is_root() {
        return true;
    }
    let Some(gid) = group else {
        return false;
    };
    if cred.gid.as_raw() == gid {
        return true;
    }
    let pid = cred.pid.as_raw_nonzero().get();
    crate::os::procfs::status_field(Some(pid as u32), "Groups")
        .is_some_and(|g| g.split_whitespace().any(|x| x.parse() == Ok(gid)))
}

/// Reads one request line, bounded in size and time.
pub(crate) async fn read_request(conn: &mut UnixStream) -> Result<Request> {
    let mut line = String::new();
    let mut reader = BufReader::new(tokio::io::AsyncReadExt::take(&mut *conn, MAX_REQUEST));
    tokio::time::timeout(READ_TIMEOUT, reader.read_line(&mut line))
        .await
        .context("no request within 5 s")??;
    parse(&line)
}

pub(crate) fn parse(line: &str) -> Result<Request> {
    let request = serde_json::from_str(line).map_err(|e| {
        if e.is_syntax() || e.is_eof() {
            anyhow::anyhow!("the request is not JSON")
        } else {
            anyhow::anyhow!(
                "{e}: expected {{\"trace\": …}}, {{\"claim\": …}} or {{\"status\": {{}}}}"
            )
        }
    })?;
    if let Request::Claim(c) = &request {
        let name = &c.name;
        if name.is_empty() || name.len() > 200 || name.chars().any(char::is_control) {
            bail!("a session's name is 1 to 200 printable characters");
        }
    }
    Ok(request)
}

/// A trace request as the daemon runs it, checked.
pub(crate) struct PendingReply {
    pub conn: UnixStream,
    /// Send the files' descriptors with the answer (`rocsync trace -o`).
    pub send_files: bool,
    /// Ends the watch on the client's side ([`PendingReply::watched`]) once dropped.
    _watch: Option<tokio::sync::oneshot::Sender<()>>,
}

impl PendingReply {
    pub(crate) fn new(conn: UnixStream, send_files: bool) -> Self {
        Self {
            conn,
            send_files,
            _watch: None,
        }
    }

    /// As [`PendingReply::new`], calling `gone` if the client closes its side before the
    /// answer (it went away, or `rocsync trace` was interrupted and says it is done
    /// waiting): what is read of it meanwhile is dropped.
    pub(crate) fn watched(
        conn: UnixStream,
        send_files: bool,
        gone: impl FnOnce() + Send + 'static,
    ) -> Self {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let read = std::os::fd::AsFd::as_fd(&conn)
            .try_clone_to_owned()
            .map(std::os::unix::net::UnixStream::from)
            .and_then(|s| s.set_nonblocking(true).map(|()| s))
            .and_then(UnixStream::from_std);
        if let Ok(mut read) = read {
            tokio::spawn(async move {
                let mut scratch = [0u8; 4096];
                let closed = async {
                    use tokio::io::AsyncReadExt as _;
                    while matches!(read.read(&mut scratch).await, Ok(n) if n > 0) {}
                };
                tokio::select! {
                    () = closed => gone(),
                    _ = stopped => {}
                }
            });
        }
        Self {
            _watch: Some(stop),
            ..Self::new(conn, send_files)
        }
    }

    pub(crate) async fn send(self, reply: &Reply) {
        match (self.send_files, reply) {
            (true, Reply::Written(w)) => answer_with_files(self.conn, reply, &w.files).await,
            _ => answer(self.conn, reply).await,
        }
    }
}

/// Sends the answer and closes.
pub(crate) async fn answer(mut conn: UnixStream, reply: &Reply) {
    answer_keeping(&mut conn, reply).await;
}

/// Sends the answer and closes the sending side only: the client keeps the connection
/// (a claim lasts until it closes its end).
pub(crate) async fn answer_keeping(conn: &mut UnixStream, reply: &Reply) {
    let _ = tokio::time::timeout(READ_TIMEOUT, async {
        conn.write_all(reply.line().as_bytes()).await?;
        conn.shutdown().await
    })
    .await;
}

/// Sends the answer with a read-only descriptor of each file it names (`SCM_RIGHTS`), so
/// a client copies them with its own rights: the daemon never writes where a client says.
async fn answer_with_files(mut conn: UnixStream, reply: &Reply, files: &[String]) {
    let opened: std::io::Result<Vec<std::fs::File>> = files
        .iter()
        .map(|f| {
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(no_follow())
                .open(f)
        })
        .collect();
    let reply = match opened {
        Ok(fds) if fds.len() <= MAX_FDS => {
            return send_with_fds(conn, &reply.line(), &fds).await;
        }
        Ok(fds) => Reply::Refused {
            error: format!(
                "{} files are more than one answer carries ({MAX_FDS}): copy them from {}",
                fds.len(),
                files.first().map(String::as_str).unwrap_or_default()
            ),
        },
        Err(e) => Reply::Refused {
            error: format!("reopening the traces written: {e}"),
        },
    };
    answer_keeping(&mut conn, &reply).await;
}

/// The most descriptors one message carries (the kernel's `SCM_MAX_FD` is 253).
const MAX_FDS: usize = 250;

/// The daemon's own files, reopened without following a link.
fn no_follow() -> i32 {
    (OFlags::NOFOLLOW | OFlags::CLOEXEC).bits() as i32
}

async fn send_with_fds(mut conn: UnixStream, line: &str, files: &[std::fs::File]) {
    use std::{io::IoSlice, mem::MaybeUninit, os::fd::AsFd as _};
    let fds: Vec<_> = files.iter().map(|f| f.as_fd()).collect();
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(fds.len()))];
    let sent = tokio::time::timeout(READ_TIMEOUT, async {
        loop {
            conn.writable().await?;
            let mut control = SendAncillaryBuffer::new(&mut space);
            control.push(SendAncillaryMessage::ScmRights(&fds));
            let iov = [IoSlice::new(line.as_bytes())];
            match conn.try_io(tokio::io::Interest::WRITABLE, || {
                sendmsg(&conn, &iov, &mut control, SendFlags::NOSIGNAL).map_err(Into::into)
            }) {
                Ok(n) => return Ok::<_, std::io::Error>(n),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
    })
    .await;
    if let Ok(Ok(n)) = sent {
        // The descriptors went with the first bytes; the rest of the line follows.
        let _ = tokio::time::timeout(READ_TIMEOUT, async {
            conn.write_all(&line.as_bytes()[n..]).await?;
            conn.shutdown().await
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calls::agents::AgentSet;

    #[test]
    fn claims_and_status_are_read() {
        let Request::Claim(c) =
            parse(r#"{"claim":{"name":"attach pid 7","agents":"1,3"}}"#).unwrap()
        else {
            panic!("a claim");
        };
        assert_eq!(
            (c.name.as_str(), c.agents),
            ("attach pid 7", AgentSet::Only([1, 3].into()))
        );
        assert!(matches!(
            parse(r#"{"claim":{"name":"run"}}"#).unwrap(),
            Request::Claim(c) if c.agents == AgentSet::All
        ));
        assert!(parse(r#"{"claim":{"agents":"1"}}"#).is_err());
        assert!(parse(r#"{"claim":{"name":"a\nb"}}"#).is_err());
        assert!(matches!(
            parse(r#"{"status":{}}"#).unwrap(),
            Request::Status {}
        ));
        assert!(matches!(
            parse(r#"{"trace":{"all":true,"send_files":true}}"#).unwrap(),
            Request::Trace(t) if t.send_files
        ));
    }
}
