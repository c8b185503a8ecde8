//! `rocsync trace`: asks the running daemon for a trace and prints the files it wrote.

use std::{
    io::{BufRead as _, BufReader, Write as _},
    os::unix::net::UnixStream,
    time::Duration,
};

use anyhow::{Context as _, Result, bail};
use serde_json::json;

use crate::cli::TraceArgs;

pub fn trace(args: TraceArgs) -> Result<i32> {
    let mut conn = UnixStream::connect(&args.socket).with_context(|| {
        format!(
            "cannot reach the daemon at {} (is `rocsync daemon` running, and may you use it?)",
            args.socket.display()
        )
    })?;
    let request = json!({ "trace": {
        "pids": args.pid, "all": args.all, "flight": args.flight, "cgroup": args.cgroup,
        "agents": args.agents,
        "duration_ms": args.duration_ms, "name": args.name,
    }});
    writeln!(conn, "{request}")?;
    // The daemon answers once the traces are written.
    conn.set_read_timeout(Some(
        Duration::from_millis(args.duration_ms) + Duration::from_secs(60),
    ))?;
    let mut line = String::new();
    BufReader::new(&conn)
        .read_line(&mut line)
        .context("no answer from the daemon")?;
    let v: serde_json::Value = serde_json::from_str(&line)
        .with_context(|| format!("the daemon's answer is not JSON: {line:?}"))?;
    if let Some(e) = v["error"].as_str() {
        bail!("the daemon refused: {e}");
    }
    for f in v["files"]
        .as_array()
        .context("the daemon's answer names no files")?
    {
        println!("{}", f.as_str().unwrap_or_default());
    }
    Ok(0)
}
