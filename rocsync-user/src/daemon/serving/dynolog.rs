//! dynolog's wire protocol, opt-in (`--dynolog-addr`): so `dyno gputrace --pids …
//! --duration-ms … --log-file …` makes rocsync traces, named as Kineto's on-demand ones
//! (`<log>_<pid>.json`, what dyno prints). Messages are a native-endian i32 length, then
//! JSON; the request is `{"fn": "setKinetOnDemandRequest", "config": "KEY=VALUE\n…",
//! "pids": […], …}`. dynolog has no authentication, so any local user may ask: listen on
//! localhost; log files name a file of the state directory's `dyno/` (where no other
//! request's trace is), of a plain name, and a trace never replaces a file; pid lists
//! and requests waiting are bounded. A synchronized start (`PROFILE_START_TIME`) is
//! kept until its time; iteration-based requests are refused (no step hook here).

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

use crate::calls::emit::processes::per_process_name;
use crate::daemon::{outputs::statedir, serving::protocol::MAX_PIDS};

const MAX_MESSAGE: usize = 64 << 10;
const TIMEOUT: Duration = Duration::from_secs(5);
/// The longest trace a dyno request may ask for: its port has no authentication, and a
/// trace holds every agent it records (Kineto's on-demand traces last seconds).
pub(crate) const MAX_DYNO_DURATION: Duration = Duration::from_secs(60);
/// Kineto's default when a request names no duration.
const DEFAULT_DURATION: Duration = Duration::from_millis(500);
/// How far ahead a synchronized start may lie (a request waits in the daemon until then).
const MAX_START_DELAY: Duration = Duration::from_secs(3600);
/// The longest log file name.
const MAX_NAME: usize = 128;

/// A trace dyno asked for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct OnDemand {
    /// Empty: every tracked process (dyno's default `--pids 0`).
    pub pids: Vec<u32>,
    pub duration: Duration,
    /// The log file as asked, in the state directory's `dyno/`; traces are
    /// `<stem>_<pid>.json` beside it.
    pub log_file: PathBuf,
    /// `PROFILE_START_TIME` (dyno's `--profile-start-time`, Unix ms): when to start, so
    /// that traces of many processes and hosts cover the same window. `None`: now.
    pub start: Option<SystemTime>,
}

/// Reads one framed message.
pub(crate) async fn read(conn: &mut TcpStream) -> Result<Value> {
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
pub(crate) async fn write(conn: &mut TcpStream, v: &Value) {
    let body = v.to_string();
    let len = (body.len() as i32).to_ne_bytes();
    let _ = tokio::time::timeout(TIMEOUT, async {
        conn.write_all(&len).await?;
        conn.write_all(body.as_bytes()).await
    })
    .await;
}

/// The answer dyno reads: the processes matched and triggered, or none (busy, refused).
pub(crate) fn answer(matched: &[u32], busy: bool, error: Option<String>) -> Value {
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

pub(crate) fn parse(v: &Value, state_dir: &Path) -> Result<OnDemand> {
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
                // Negative or not a number: out of range too.
                duration = ms
                    .trim()
                    .parse()
                    .map_or(Duration::ZERO, Duration::from_millis);
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
    if duration.is_zero() || duration > MAX_DYNO_DURATION {
        bail!(
            "ACTIVITIES_DURATION_MSECS must be from 1 to {} (dyno's port has no authentication: a longer trace is asked on rocsync's socket)",
            MAX_DYNO_DURATION.as_millis()
        );
    }
    let log_file = confined(
        &log_file.context("the config has no ACTIVITIES_LOG_FILE")?,
        state_dir,
    )?;
    let pids = match v.get("pids") {
        Some(p) => p
            .as_array()
            .context("\"pids\" must be a list")
            .and_then(|p| {
                anyhow::ensure!(
                    p.len() <= MAX_PIDS,
                    "{} pids: a request names at most {MAX_PIDS}",
                    p.len()
                );
                Ok(p)
            })?
            .iter()
            .map(|x| x.as_u64().and_then(|x| u32::try_from(x).ok()))
            .collect::<Option<Vec<u32>>>()
            .context("\"pids\" must hold process ids")?,
        None => Vec::new(),
    };
    let mut pids: Vec<u32> = pids.into_iter().filter(|&p| p != 0).collect();
    pids.sort_unstable();
    pids.dedup();
    Ok(OnDemand {
        pids,
        duration,
        log_file,
        start: start_time(start_ms, SystemTime::now())?,
    })
}

/// Nothing at the traces' names for `pids` (`<stem>_<pid>.json` beside `log`): a trace
/// never replaces a file, and one at a link or FIFO would not be written at all.
pub(crate) fn names_free(log: &Path, pids: &[u32]) -> Result<()> {
    for &pid in pids {
        let path = log.with_file_name(per_process_name(log, pid));
        let Ok(m) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let kind = match m.file_type() {
            t if t.is_symlink() => "a symbolic link",
            t if t.is_file() => "a file",
            t if t.is_dir() => "a directory",
            _ => "a FIFO, socket or device",
        };
        bail!(
            "{} exists ({kind}): a trace never replaces it; name another log file",
            path.display()
        );
    }
    Ok(())
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

/// A log file of the state directory's `dyno/` (by its real directory), of a plain name
/// (letters, digits, `.`, `-`, `_`) ending `.json`; never one with control characters.
fn confined(log: &Path, state_dir: &Path) -> Result<PathBuf> {
    if log
        .as_os_str()
        .to_string_lossy()
        .chars()
        .any(char::is_control)
    {
        bail!("log file {log:?} holds control characters: refused");
    }
    let dyno = statedir::dyno(state_dir);
    let outside = || {
        anyhow::anyhow!(
            "log file {} is outside {}: dyno traces are written there",
            log.display(),
            dyno.display()
        )
    };
    let name = log
        .file_name()
        .and_then(|n| n.to_str())
        .context("the log file names no file")?;
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_');
    if name.len() > MAX_NAME || name.starts_with('.') || !name.chars().all(plain) {
        bail!("log file name {name:?}: use up to {MAX_NAME} letters, digits, '.', '-' or '_'");
    }
    if !name.ends_with(".json") {
        bail!("log file {name}: rocsync writes Kineto JSON, named *.json");
    }
    let dir = log
        .parent()
        .filter(|d| d.is_absolute())
        .ok_or_else(outside)?;
    let dir = dir.canonicalize().map_err(|_| outside())?;
    let dyno = dyno.canonicalize().context("the state directory's dyno/")?;
    if dir != dyno {
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
        statedir::make(dir.path()).unwrap();
        let log = dir.path().join("dyno/t.json");
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
            dir.path().canonicalize().unwrap().join("dyno/t.json")
        );
        let outside =
            json!({ "fn": "setKinetOnDemandRequest", "config": "ACTIVITIES_LOG_FILE=/tmp/t.json" });
        assert!(
            parse(&outside, dir.path())
                .unwrap_err()
                .to_string()
                .contains("outside")
        );
        let escape = json!({ "fn": "setKinetOnDemandRequest", "config": format!("ACTIVITIES_LOG_FILE={}/dyno/../t.json", dir.path().display()) });
        assert!(parse(&escape, dir.path()).is_err());
        // Another request's traces are out of reach.
        let traces = json!({ "fn": "setKinetOnDemandRequest", "config": format!("ACTIVITIES_LOG_FILE={}/traces/t.json", dir.path().display()) });
        let e = parse(&traces, dir.path()).unwrap_err().to_string();
        assert!(e.contains("outside"), "{e}");
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

    #[test]
    fn names_pids_and_durations_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        statedir::make(dir.path()).unwrap();
        let ask = |file: &str, extra: &str, pids: Value| {
            let config = format!(
                "ACTIVITIES_LOG_FILE={}/dyno/{file}\n{extra}",
                dir.path().display()
            );
            let req = json!({ "fn": "setKinetOnDemandRequest", "config": config, "pids": pids });
            parse(&req, dir.path()).map_err(|e| format!("{e:#}"))
        };
        let e = ask("a\u{1b}[31m.json", "", json!([])).unwrap_err();
        assert!(
            e.contains("control characters") && !e.contains('\u{1b}'),
            "{e}"
        );
        let e = ask("a\rb.json", "", json!([])).unwrap_err();
        assert!(e.contains("control characters"), "{e}");
        let e = ask("a b.json", "", json!([])).unwrap_err();
        assert!(e.contains("letters, digits"), "{e}");
        let many: Vec<u32> = (1..=MAX_PIDS as u32 + 1).collect();
        let e = ask("t.json", "", json!(many)).unwrap_err();
        assert!(e.contains("at most 1024"), "{e}");
        let d = ask("t.json", "", json!([5, 5, 0, 3, 5])).unwrap();
        assert_eq!(d.pids, [3, 5], "deduplicated");
        for ms in ["-5", "0", "60001", "3600001", "x"] {
            let e = ask(
                "t.json",
                &format!("ACTIVITIES_DURATION_MSECS={ms}"),
                json!([]),
            );
            assert!(e.unwrap_err().contains("from 1 to 60000"), "{ms}");
        }
    }
}
