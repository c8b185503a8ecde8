//! dynolog's wire protocol, opt-in (`--dynolog-addr`): so `dyno gputrace --pids …
//! --duration-ms … --log-file …` makes rocsync traces, named as Kineto's on-demand ones
//! (`<log>_<pid>.json`, what dyno prints). Messages are a native-endian i32 length, then
//! JSON; the request is `{"fn": "setKinetOnDemandRequest", "config": "KEY=VALUE\n…",
//! "pids": […], …}`. dynolog has no authentication: listen on localhost, and log files are
//! confined to the state directory. A synchronized start (`PROFILE_START_TIME`) is kept
//! until its time; iteration-based requests are refused (no step hook here).

use std::{
    path::{Path, PathBuf},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::TcpStream,
};

use super::traces::MAX_DURATION;

const MAX_MESSAGE: usize = 64 << 10;
const TIMEOUT: Duration = Duration::from_secs(5);
/// Kineto's default when a request names no duration.
const DEFAULT_DURATION: Duration = Duration::from_millis(500);
/// How far ahead a synchronized start may lie (a request waits in the daemon until then).
const MAX_START_DELAY: Duration = Duration::from_secs(3600);

/// A trace dyno asked for.
#[derive(Debug, PartialEq, Eq)]
pub struct OnDemand {
    /// Empty: every tracked process (dyno's default `--pids 0`).
    pub pids: Vec<u32>,
    pub duration: Duration,
    /// The log file as asked; traces are `<stem>_<pid>.json` beside it.
    pub log_file: PathBuf,
    /// `PROFILE_START_TIME` (dyno's `--profile-start-time`, Unix ms): when to start, so
    /// that traces of many processes and hosts cover the same window. `None`: now.
    pub start: Option<SystemTime>,
}

/// Reads one framed message.
pub async fn read(conn: &mut TcpStream) -> Result<Value> {
    tokio::time::timeout(TIMEOUT, async {
        let mut len = [0u8; 4];
        conn.read_exact(&mut len).await?;
        let len = usize::try_from(i32::from_ne_bytes(len)).context("negative length")?;
        if len > MAX_MESSAGE {
            bail!("a message of {len} bytes (at most {MAX_MESSAGE})");
        }
        let mut body = vec![0; len];
        conn.read_exact(&mut body).await?;
        serde_json::from_slice(&body).context("the message is not JSON")
    })
    .await
    .context("no message within 5 s")?
}

/// Sends one framed message.
pub async fn write(conn: &mut TcpStream, v: &Value) {
    let body = v.to_string();
    let len = (body.len() as i32).to_ne_bytes();
    let _ = tokio::time::timeout(TIMEOUT, async {
        conn.write_all(&len).await?;
        conn.write_all(body.as_bytes()).await
    })
    .await;
}

/// The answer dyno reads: the processes matched and triggered, or none (busy, refused).
pub fn answer(matched: &[u32], busy: bool, error: Option<String>) -> Value {
    let mut v = json!({
        "processesMatched": matched,
        "activityProfilersTriggered": matched,
        "activityProfilersBusy": u32::from(busy),
        "eventProfilersTriggered": [],
        "eventProfilersBusy": 0,
    });
    if let Some(e) = error {
        v["error"] = e.into();
    }
    v
}

pub fn parse(v: &Value, state_dir: &Path) -> Result<OnDemand> {
    if v["fn"] != "setKinetOnDemandRequest" {
        bail!(
            "unsupported request {}: only setKinetOnDemandRequest",
            v["fn"]
        );
    }
    let config = v["config"].as_str().context("the request has no config")?;
    let mut log_file = None;
    let mut duration = DEFAULT_DURATION;
    let mut start_ms = 0;
    for line in config.lines() {
        match line.split_once('=') {
            Some(("ACTIVITIES_LOG_FILE", f)) => log_file = Some(PathBuf::from(f.trim())),
            Some(("ACTIVITIES_DURATION_MSECS", ms)) => {
                let ms: u64 = ms.trim().parse().context("ACTIVITIES_DURATION_MSECS")?;
                duration = Duration::from_millis(ms);
            }
            Some(("PROFILE_START_TIME", ms)) => {
                start_ms = ms.trim().parse().context("PROFILE_START_TIME")?;
            }
            // A window counted in training steps needs the application's step hook.
            Some(("ACTIVITIES_ITERATIONS" | "PROFILE_START_ITERATION", _)) => bail!(
                "iteration-based traces need the application's step hook, which rocsync \
                 does not have: ask for a duration (dyno gputrace --duration-ms)"
            ),
            _ => {}
        }
    }
    if duration.is_zero() || duration > MAX_DURATION {
        bail!(
            "ACTIVITIES_DURATION_MSECS must be from 1 to {}",
            MAX_DURATION.as_millis()
        );
    }
    let log_file = confined(
        &log_file.context("the config has no ACTIVITIES_LOG_FILE")?,
        state_dir,
    )?;
    let pids = match v.get("pids") {
        Some(p) => p
            .as_array()
            .context("\"pids\" must be a list")?
            .iter()
            .map(|x| x.as_u64().and_then(|x| u32::try_from(x).ok()))
            .collect::<Option<Vec<u32>>>()
            .context("\"pids\" must hold process ids")?,
        None => Vec::new(),
    };
    let pids = pids.into_iter().filter(|&p| p != 0).collect();
    Ok(OnDemand {
        pids,
        duration,
        log_file,
        start: start_time(start_ms, SystemTime::now())?,
    })
}

/// A synchronized start: 0 is now; one already past is refused (as Kineto refuses it:
/// the window the other processes record has begun), as is one over an hour ahead.
fn start_time(ms: u64, now: SystemTime) -> Result<Option<SystemTime>> {
    if ms == 0 {
        return Ok(None);
    }
    let start = UNIX_EPOCH + Duration::from_millis(ms);
    match start.duration_since(now) {
        Err(past) => bail!(
            "PROFILE_START_TIME is {} ms in the past: the synchronized window has begun",
            past.duration().as_millis()
        ),
        Ok(ahead) if ahead > MAX_START_DELAY => bail!(
            "PROFILE_START_TIME is {} s ahead (at most {} s)",
            ahead.as_secs(),
            MAX_START_DELAY.as_secs()
        ),
        Ok(_) => Ok(Some(start)),
    }
}

/// A log file inside the state directory (by its real directory), named `*.json`.
fn confined(log: &Path, state_dir: &Path) -> Result<PathBuf> {
    let outside = || {
        anyhow::anyhow!(
            "log file {} is outside {}",
            log.display(),
            state_dir.display()
        )
    };
    let name = log.file_name().context("the log file names no file")?;
    if log.extension().is_none_or(|e| e != "json") {
        bail!(
            "log file {}: rocsync writes Kineto JSON, named *.json",
            log.display()
        );
    }
    let dir = log
        .parent()
        .filter(|d| d.is_absolute())
        .ok_or_else(outside)?;
    let dir = dir.canonicalize().map_err(|_| outside())?;
    let state = state_dir.canonicalize().context("the state directory")?;
    if !dir.starts_with(&state) {
        return Err(outside());
    }
    Ok(dir.join(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gputrace_request_as_dyno_sends_it() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("t.json");
        let req = json!({
            "fn": "setKinetOnDemandRequest",
            "config": format!("ACTIVITIES_LOG_FILE={}\nPROFILE_START_TIME=0\nACTIVITIES_DURATION_MSECS=250\nPROFILE_WITH_STACK=false", log.display()),
            "job_id": 0, "pids": [0], "process_limit": 3,
        });
        let d = parse(&req, dir.path()).unwrap();
        assert_eq!(d.duration, Duration::from_millis(250));
        assert!(d.pids.is_empty(), "pid 0: every process");
        assert_eq!(
            d.log_file,
            dir.path().canonicalize().unwrap().join("t.json")
        );
        let outside =
            json!({ "fn": "setKinetOnDemandRequest", "config": "ACTIVITIES_LOG_FILE=/tmp/t.json" });
        assert!(
            parse(&outside, dir.path())
                .unwrap_err()
                .to_string()
                .contains("outside")
        );
        let escape = json!({ "fn": "setKinetOnDemandRequest", "config": format!("ACTIVITIES_LOG_FILE={}/../t.json", dir.path().display()) });
        assert!(parse(&escape, dir.path()).is_err());
        assert!(parse(&json!({ "fn": "getStatus" }), dir.path()).is_err());
        let by_steps = json!({ "fn": "setKinetOnDemandRequest", "config": format!("ACTIVITIES_LOG_FILE={}\nPROFILE_START_ITERATION=0\nACTIVITIES_ITERATIONS=10", log.display()) });
        let e = parse(&by_steps, dir.path()).unwrap_err().to_string();
        assert!(e.contains("iteration-based"), "{e}");
    }

    #[test]
    fn a_synchronized_start_is_now_ahead_or_refused() {
        let now = UNIX_EPOCH + Duration::from_millis(1_800_000_000_000);
        assert_eq!(start_time(0, now).unwrap(), None);
        assert_eq!(
            start_time(1_800_000_002_500, now).unwrap(),
            Some(now + Duration::from_millis(2500))
        );
        let past = start_time(1_799_999_999_000, now).unwrap_err().to_string();
        assert!(past.contains("1000 ms in the past"), "{past}");
        let far = start_time(1_800_000_000_000 + 7_200_000, now).unwrap_err();
        assert!(far.to_string().contains("7200 s ahead"), "{far}");
    }
}
