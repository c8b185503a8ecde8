//! A flight recorder dump under load (part of `cargo xtask bench-daemon`): a process calls
//! at a paced rate into a daemon with a 10 s flight recorder; once the recorder is full,
//! `rocsync trace --flight` is asked while `/healthz` is scraped every 10 ms. It shows how
//! long the dump takes, the longest wait of a scrape meanwhile (how long the daemon's loop
//! paused) and the call records the probes dropped meanwhile (what the loop did not drain).

use std::{
    fmt::Write as _,
    path::Path,
    process::Command,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use super::daemon::{Caller, Daemon, get, median};
use crate::root;

const RATE: u64 = 300_000;
/// The recorder's span, and how long the process has called when the dump is asked.
const SPAN_S: u64 = 10;
const ASK_AFTER_S: u64 = 12;

/// Call records the probes dropped so far (entries and exits), from `/metrics`.
fn dropped(addr: &str) -> Result<u64> {
    let (_, body) = get(addr, "/metrics")?;
    Ok(body
        .lines()
        .filter(|l| {
            l.starts_with("rocsync_dropped_records_total{reason=\"entry_records\"}")
                || l.starts_with("rocsync_dropped_records_total{reason=\"exit_records\"}")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64)
}

pub(super) fn flight(dir: &Path, exe: &Path, lib: &Path) -> Result<(String, Value)> {
    eprintln!("xtask: a flight recorder dump under load");
    let span = format!("{SPAN_S}s");
    let daemon = Daemon::start(dir, exe, &["--flight-recorder", &span])?;
    let calls = (RATE * (ASK_AFTER_S + 6)).to_string();
    let mut caller = Caller::start(exe, lib, &calls, Some(&RATE.to_string()))?;
    daemon.wait_for(&format!("tracking pid {}", caller.child.id()))?;
    caller.go()?;
    std::thread::sleep(Duration::from_secs(ASK_AFTER_S));

    let addr = daemon.metrics_addr().to_string();
    let dropped_before = dropped(&addr)?;
    let (rss_before, _) = daemon.memory_kib()?;
    let done = Arc::new(AtomicBool::new(false));
    let scraper = {
        let (addr, done) = (addr.clone(), done.clone());
        std::thread::spawn(move || -> Result<Vec<f64>> {
            let mut waits = Vec::new();
            while !done.load(Ordering::Relaxed) {
                waits.push(get(&addr, "/healthz")?.0);
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(waits)
        })
    };
    let start = Instant::now();
    let out = Command::new(root().join("target/release/rocsync"))
        .args(["trace", "--flight", "--socket"])
        .arg(dir.join("rocsync.sock"))
        .output()
        .context("rocsync trace --flight")?;
    let dump_s = start.elapsed().as_secs_f64();
    // A scrape after the dump: what the loop had not drained meanwhile is dropped by now.
    std::thread::sleep(Duration::from_millis(200));
    done.store(true, Ordering::Relaxed);
    let waits = scraper
        .join()
        .map_err(|_| anyhow::anyhow!("the scraper panicked"))??;
    let dropped_during = dropped(&addr)? - dropped_before;
    let (rss_after, rss_peak) = daemon.memory_kib()?;
    if !out.status.success() {
        bail!(
            "rocsync trace --flight: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let file = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let bytes = std::fs::metadata(&file)?.len();
    let _ = std::fs::remove_file(&file);
    caller.finish()?;
    daemon.stop()?;

    let longest = waits.iter().copied().fold(0.0, f64::max);
    let typical = median(waits.clone());
    let mut md = String::from("\n## A flight recorder dump under load\n\n");
    let _ = writeln!(
        md,
        "A process calls `hipStreamSynchronize(NULL)` {RATE} times a second into a daemon \
         with `--flight-recorder {span}`; after {ASK_AFTER_S} s, `rocsync trace --flight` is \
         asked while `/healthz` is scraped every 10 ms ({} scrapes). The scrapes' waits show \
         whether the daemon's loop paused; the call records dropped meanwhile, whether it \
         went on draining the probes. The daemon's resident memory: with the recorder full, \
         once the dump is written, and at its peak.\n",
        waits.len()
    );
    let _ = writeln!(
        md,
        "| dump (s) | trace (MiB) | longest scrape (ms) | median scrape (ms) | call records dropped meanwhile | RSS full / after / peak (MiB) |\n| ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    let _ = writeln!(
        md,
        "| {dump_s:.2} | {:.0} | {:.1} | {:.2} | {dropped_during} | {} / {} / {} |",
        bytes as f64 / (1 << 20) as f64,
        longest * 1e3,
        typical * 1e3,
        rss_before / 1024,
        rss_after / 1024,
        rss_peak / 1024
    );
    let v = json!({
        "rate": RATE, "span_s": SPAN_S, "dump_s": dump_s, "trace_bytes": bytes,
        "scrapes": waits.len(), "scrape_longest_s": longest, "scrape_median_s": typical,
        "dropped_during": dropped_during,
        "rss_kib": { "full": rss_before, "after": rss_after, "peak": rss_peak },
    });
    Ok((md, v))
}
