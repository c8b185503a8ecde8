//! The daemon's unix socket: one JSON request per connection, from root or a member of
//! the configured group (checked by the peer's credentials), answered with one JSON line.
//!
//! Requests:
//! - `{"trace": {"pids": [P, …] | "all": true | "cgroup": PATH | "flight": true,
//!   "duration_ms": N, "name": S, "agents": "0,1", "send_files": true}}`, answered
//!   `{"files": [PATH, …], "pids": [P, …]}` once written (with `send_files`, a read-only
//!   descriptor of each file rides along), or `{"error": MESSAGE}`;
//! - `{"claim": {"name": S, "agents": "0,1" | null}}`: a standalone capture's agents,
//!   answered `{"claimed": S}` and held until the client closes the connection;
//! - `{"status": {}}`: the tracked processes and the sessions running.

use std::{os::unix::fs::PermissionsExt as _, path::Path, time::Duration};

use anyhow::{Context as _, Result, bail};
use rustix::{
    fs::OFlags,
    net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags, sendmsg},
};
use serde_json::{Value, json};
use std::os::unix::fs::OpenOptionsExt as _;
use tokio::{
    io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader},
    net::{UnixListener, UnixStream},
};

use super::traces::{MAX_DURATION, Request, stem};
use crate::agents::{AgentSet, parse_agents};

const MAX_REQUEST: u64 = 16 << 10;
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Listens at `path` (its directory made if missing; a stale socket replaced, anything
/// else refused), readable and writable by root and `group`.
pub fn listen(path: &Path, group: Option<u32>) -> Result<UnixListener> {
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
    Ok(listener)
}

/// Whether the peer is root or in `group` (primary or supplementary).
pub fn allowed(conn: &UnixStream, group: Option<u32>) -> bool {
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
    std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Groups:"))
            .is_some_and(|g| g.split_whitespace().any(|x| x.parse() == Ok(gid)))
    })
}

/// What a client asks.
#[derive(Debug)]
pub enum Asked {
    Trace {
        request: Request,
        /// Send the written files' descriptors with the answer (`rocsync trace -o`).
        send_files: bool,
    },
    Claim {
        name: String,
        agents: AgentSet,
    },
    Status,
}

/// Reads one request line, bounded in size and time.
pub async fn read_request(conn: &mut UnixStream) -> Result<Asked> {
    let mut line = String::new();
    let mut reader = BufReader::new(tokio::io::AsyncReadExt::take(&mut *conn, MAX_REQUEST));
    tokio::time::timeout(READ_TIMEOUT, reader.read_line(&mut line))
        .await
        .context("no request within 5 s")??;
    parse(&line)
}

fn parse(line: &str) -> Result<Asked> {
    let v: Value = serde_json::from_str(line).context("the request is not JSON")?;
    if v.get("status").is_some() {
        return Ok(Asked::Status);
    }
    if let Some(c) = v.get("claim") {
        let name = c["name"].as_str().context("a claim names its session")?;
        if name.is_empty() || name.len() > 200 || name.chars().any(char::is_control) {
            bail!("a session's name is 1 to 200 printable characters");
        }
        let agents = match c["agents"].as_str() {
            Some(a) => parse_agents(a).map_err(anyhow::Error::msg)?,
            None => AgentSet::All,
        };
        return Ok(Asked::Claim {
            name: name.to_string(),
            agents,
        });
    }
    let t = v
        .get("trace")
        .context("unknown request: expected {\"trace\": …}, {\"claim\": …} or {\"status\": {}}")?;
    let all = t["all"].as_bool().unwrap_or(false);
    let flight = t["flight"].as_bool().unwrap_or(false);
    let cgroup = t["cgroup"].as_str().map(String::from);
    let agents = match t["agents"].as_str() {
        Some(a) => match parse_agents(a).map_err(anyhow::Error::msg)? {
            AgentSet::All => 0,
            AgentSet::Only(set) => {
                if set.iter().any(|&d| d >= 64) {
                    bail!("agent ordinals go from 0 to 63");
                }
                set.iter().fold(0u64, |m, &d| m | 1 << d)
            }
        },
        None => 0,
    };
    let pids: Vec<u32> = match t.get("pids") {
        Some(p) => p
            .as_array()
            .context("\"pids\" must be a list")?
            .iter()
            .map(|x| x.as_u64().and_then(|x| u32::try_from(x).ok()))
            .collect::<Option<_>>()
            .context("\"pids\" must hold process ids")?,
        None => Vec::new(),
    };
    if flight && (all || !pids.is_empty() || cgroup.is_some()) {
        bail!("\"flight\" writes every process the recorder holds: no \"pids\" or \"all\"");
    }
    let selectors =
        usize::from(!pids.is_empty()) + usize::from(all) + usize::from(cgroup.is_some());
    if !flight && selectors != 1 {
        bail!("name processes with \"pids\", \"all\" or \"cgroup\": one of the three");
    }
    let ms = t["duration_ms"].as_u64().unwrap_or(1000);
    let duration = Duration::from_millis(ms);
    if duration.is_zero() || duration > MAX_DURATION {
        bail!(
            "\"duration_ms\" must be from 1 to {}",
            MAX_DURATION.as_millis()
        );
    }
    let request = Request {
        flight,
        pids,
        cgroup,
        agents,
        duration,
        name: stem(t["name"].as_str())?,
        output: None,
    };
    Ok(Asked::Trace {
        request,
        send_files: t["send_files"].as_bool().unwrap_or(false),
    })
}

/// Sends the answer and closes.
pub async fn answer(mut conn: UnixStream, v: &Value) {
    answer_keeping(&mut conn, v).await;
}

/// Sends the answer and closes the sending side only: the client keeps the connection
/// (a claim lasts until it closes its end).
pub async fn answer_keeping(conn: &mut UnixStream, v: &Value) {
    let _ = tokio::time::timeout(READ_TIMEOUT, async {
        conn.write_all(format!("{v}\n").as_bytes()).await?;
        conn.shutdown().await
    })
    .await;
}

/// Sends the answer with a read-only descriptor of each file it names (`SCM_RIGHTS`), so
/// a client copies them with its own rights: the daemon never writes where a client says.
pub async fn answer_with_files(mut conn: UnixStream, v: &Value) {
    let files: Vec<&str> = v["files"]
        .as_array()
        .map(|f| f.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let opened: std::io::Result<Vec<std::fs::File>> = files
        .iter()
        .map(|f| {
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(no_follow())
                .open(f)
        })
        .collect();
    let v = match opened {
        Ok(fds) if fds.len() <= MAX_FDS => return send_with_fds(conn, v, &fds).await,
        Ok(fds) => json!({ "error": format!(
            "{} files are more than one answer carries ({MAX_FDS}): copy them from {}",
            fds.len(),
            files.first().copied().unwrap_or_default()
        )}),
        Err(e) => json!({ "error": format!("reopening the traces written: {e}") }),
    };
    answer_keeping(&mut conn, &v).await;
}

/// The most descriptors one message carries (the kernel's `SCM_MAX_FD` is 253).
const MAX_FDS: usize = 250;

/// The daemon's own files, reopened without following a link.
fn no_follow() -> i32 {
    (OFlags::NOFOLLOW | OFlags::CLOEXEC).bits() as i32
}

async fn send_with_fds(mut conn: UnixStream, v: &Value, files: &[std::fs::File]) {
    use std::{io::IoSlice, mem::MaybeUninit, os::fd::AsFd as _};
    let line = format!("{v}\n");
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

    fn trace(line: &str) -> Result<Request> {
        match parse(line)? {
            Asked::Trace { request, .. } => Ok(request),
            other => bail!("not a trace request: {other:?}"),
        }
    }

    #[test]
    fn claims_and_status_are_read() {
        let Asked::Claim { name, agents } =
            parse(r#"{"claim":{"name":"attach pid 7","agents":"1,3"}}"#).unwrap()
        else {
            panic!("a claim");
        };
        assert_eq!(
            (name.as_str(), agents),
            ("attach pid 7", AgentSet::Only([1, 3].into()))
        );
        assert!(matches!(
            parse(r#"{"claim":{"name":"run"}}"#).unwrap(),
            Asked::Claim {
                agents: AgentSet::All,
                ..
            }
        ));
        assert!(parse(r#"{"claim":{"agents":"1"}}"#).is_err());
        assert!(parse(r#"{"claim":{"name":"a\nb"}}"#).is_err());
        assert!(matches!(parse(r#"{"status":{}}"#).unwrap(), Asked::Status));
        assert!(matches!(
            parse(r#"{"trace":{"all":true,"send_files":true}}"#).unwrap(),
            Asked::Trace {
                send_files: true,
                ..
            }
        ));
    }

    #[test]
    fn requests_are_checked() {
        let r = trace(r#"{"trace":{"pids":[12,13],"duration_ms":250,"name":"step-9"}}"#).unwrap();
        assert_eq!(
            (r.pids, r.duration.as_millis(), r.name.as_str()),
            (vec![12, 13], 250, "step-9")
        );
        assert!(trace(r#"{"trace":{"all":true}}"#).unwrap().pids.is_empty());
        assert!(trace(r#"{"trace":{"flight":true}}"#).unwrap().flight);
        assert!(trace(r#"{"trace":{"flight":true,"all":true}}"#).is_err());
        let r = trace(r#"{"trace":{"cgroup":"pod-7","agents":"0,2"}}"#).unwrap();
        assert_eq!((r.cgroup.as_deref(), r.agents), (Some("pod-7"), 0b101));
        assert!(trace(r#"{"trace":{"all":true,"agents":"99"}}"#).is_err());
        for bad in [
            "nope",
            r#"{"other":{}}"#,
            r#"{"trace":{}}"#,
            r#"{"trace":{"pids":[1],"all":true}}"#,
            r#"{"trace":{"pids":[-1]}}"#,
            r#"{"trace":{"all":true,"duration_ms":0}}"#,
            r#"{"trace":{"all":true,"name":"../etc/x"}}"#,
        ] {
            assert!(trace(bad).is_err(), "{bad}");
        }
    }
}
