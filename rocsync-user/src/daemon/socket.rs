//! The daemon's unix socket: one JSON request per connection, from root or a member of
//! the configured group (checked by the peer's credentials), answered with one JSON line.
//!
//! Request: `{"trace": {"pids": [P, …] | "all": true | "cgroup": PATH | "flight": true,
//! "duration_ms": N, "name": S, "agents": "0,1"}}`.
//! Answer: `{"files": [PATH, …]}` once written, or `{"error": MESSAGE}`.

use std::{os::unix::fs::PermissionsExt as _, path::Path, time::Duration};

use anyhow::{Context as _, Result, bail};
use serde_json::Value;
use tokio::{
    io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader},
    net::{UnixListener, UnixStream},
};

use super::traces::{MAX_DURATION, Request, stem};

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

/// Reads one request line, bounded in size and time.
pub async fn read_request(conn: &mut UnixStream) -> Result<Request> {
    let mut line = String::new();
    let mut reader = BufReader::new(tokio::io::AsyncReadExt::take(&mut *conn, MAX_REQUEST));
    tokio::time::timeout(READ_TIMEOUT, reader.read_line(&mut line))
        .await
        .context("no request within 5 s")??;
    parse(&line)
}

fn parse(line: &str) -> Result<Request> {
    let v: Value = serde_json::from_str(line).context("the request is not JSON")?;
    let t = v
        .get("trace")
        .context("unknown request: expected {\"trace\": …}")?;
    let all = t["all"].as_bool().unwrap_or(false);
    let flight = t["flight"].as_bool().unwrap_or(false);
    let cgroup = t["cgroup"].as_str().map(String::from);
    let agents = match t["agents"].as_str() {
        Some(a) => match crate::agents::parse_agents(a).map_err(anyhow::Error::msg)? {
            crate::agents::AgentSet::All => 0,
            crate::agents::AgentSet::Only(set) => {
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
    Ok(Request {
        flight,
        pids,
        cgroup,
        agents,
        duration,
        name: stem(t["name"].as_str())?,
        output: None,
    })
}

/// Sends the answer and closes.
pub async fn answer(mut conn: UnixStream, v: &Value) {
    let _ = tokio::time::timeout(READ_TIMEOUT, async {
        conn.write_all(format!("{v}\n").as_bytes()).await?;
        conn.shutdown().await
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_checked() {
        let r = parse(r#"{"trace":{"pids":[12,13],"duration_ms":250,"name":"step-9"}}"#).unwrap();
        assert_eq!(
            (r.pids, r.duration.as_millis(), r.name.as_str()),
            (vec![12, 13], 250, "step-9")
        );
        assert!(parse(r#"{"trace":{"all":true}}"#).unwrap().pids.is_empty());
        assert!(parse(r#"{"trace":{"flight":true}}"#).unwrap().flight);
        assert!(parse(r#"{"trace":{"flight":true,"all":true}}"#).is_err());
        let r = parse(r#"{"trace":{"cgroup":"pod-7","agents":"0,2"}}"#).unwrap();
        assert_eq!((r.cgroup.as_deref(), r.agents), (Some("pod-7"), 0b101));
        assert!(parse(r#"{"trace":{"all":true,"agents":"99"}}"#).is_err());
        for bad in [
            "nope",
            r#"{"status":{}}"#,
            r#"{"trace":{}}"#,
            r#"{"trace":{"pids":[1],"all":true}}"#,
            r#"{"trace":{"pids":[-1]}}"#,
            r#"{"trace":{"all":true,"duration_ms":0}}"#,
            r#"{"trace":{"all":true,"name":"../etc/x"}}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
