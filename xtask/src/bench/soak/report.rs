//! The soak's section of bench/soak.md, and its JSON: the table, the daemon's log rate,
//! what the loads did, and what it shows (said from the figures, so that it stays true
//! when they change).

use std::{collections::HashMap, fmt::Write as _, process::Command};

use serde_json::{Value, json};

use super::{Run, sample::Sample};

const MIB: f64 = 1024.0;
/// Resident memory within this share of its baseline counts as back.
pub(super) const RSS_SLACK: f64 = 0.10;

fn sh(cmd: &str) -> String {
    Command::new("sh")
        .args(["-c", cmd])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().replace('\n', " "))
        .unwrap_or_default()
}

/// A log line's kind: its runs of hex digits that hold a digit (pids, ports, names)
/// made `N`, cut short.
fn kind(line: &str) -> String {
    let mut out = String::new();
    let mut run = String::new();
    for c in line.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_hexdigit() {
            run.push(c);
            continue;
        }
        if run.chars().any(|c| c.is_ascii_digit()) {
            out.push('N');
        } else {
            out.push_str(&run);
        }
        run.clear();
        out.push(c);
    }
    out.trim_end().chars().take(110).collect()
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{v:.digits$}"))
}

fn back(after: Option<f64>, same: bool) -> String {
    match after {
        Some(t) => format!("yes, {t:.0} s after the load stopped"),
        None if same => "yes, by the end of the settle period".into(),
        None => "**no** (60 s after the load stopped)".into(),
    }
}

pub(super) fn report(r: &Run, minutes: f64, command: &str) -> (String, Value) {
    let all: Vec<&Sample> = r.load.iter().chain(&r.settle).collect();
    let end = r.load.last().unwrap_or(&r.baseline);
    let peak = |f: &dyn Fn(&Sample) -> f64| all.iter().map(|s| f(s)).fold(f64::MIN, f64::max);
    let peak_scrape = all
        .iter()
        .filter_map(|s| s.scrape_max_ms)
        .fold(0.0, f64::max);
    let failed: u64 = all.iter().map(|s| s.scrape_failed).sum::<u64>() + r.settled.scrape_failed;
    let (b, s) = (&r.baseline, &r.settled);
    let load_s = end.t - b.t;
    let dyno_sent: u64 = r
        .loads
        .iter()
        .filter(|l| l.0 == "dyno")
        .filter_map(|l| l.1["sent"].as_object())
        .flat_map(|sent| sent.values().filter_map(Value::as_u64))
        .sum();
    let dyno_rate = dyno_sent as f64 / load_s.max(1.0);
    // The heap is what a leak grows; the binary's pages come and go with the page cache.
    let rss_back = (s.anon_kib as f64) <= b.anon_kib as f64 * (1.0 + RSS_SLACK);
    let span = if minutes == 1.0 {
        "1 minute".to_string()
    } else {
        format!("{minutes} minutes")
    };
    let mut md = format!("\n## The daemon under {span} of unprivileged churn\n\n");
    let _ = writeln!(
        md,
        "`{command}`, {} (UTC); commit {}; {} cores, kernel {}. Full log of the daemon: \
         target/bench-soak/daemon.log.\n",
        sh("date -u +%Y-%m-%dT%H:%MZ"),
        sh(
            "git rev-parse --short HEAD; git diff --quiet -- . ':!bench' || echo '(with local changes)'"
        ),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        sh("uname -r"),
    );
    md.push_str(&super::loads::describe(&span, dyno_rate));
    let _ = writeln!(
        md,
        "| | baseline | peak under load | end of load | settled | back to baseline |\n\
         | --- | ---: | ---: | ---: | ---: | --- |"
    );
    let row = |md: &mut String, name: &str, f: &dyn Fn(&Sample) -> f64, back: String| {
        let _ = writeln!(
            md,
            "| {name} | {:.0} | {:.0} | {:.0} | {:.0} | {back} |",
            f(b),
            peak(f),
            f(end),
            f(s)
        );
    };
    let same = |f: &dyn Fn(&Sample) -> u64| f(s) == f(b);
    row(
        &mut md,
        "daemon fds",
        &|x| x.fds as f64,
        back(r.back_after[0], same(&|x| x.fds)),
    );
    let link_back = back(r.back_after[1], same(&|x| x.link_fds));
    row(&mut md, "… BPF link fds", &|x| x.link_fds as f64, link_back);
    let yes = |ok: bool| if ok { "yes" } else { "**no**" }.to_string();
    row(
        &mut md,
        "… perf-event fds",
        &|x| x.perf_fds as f64,
        yes(same(&|x| x.perf_fds)),
    );
    row(
        &mut md,
        "… sockets",
        &|x| x.sockets as f64,
        yes(same(&|x| x.sockets)),
    );
    row(
        &mut md,
        "BPF links, system-wide",
        &|x| x.links as f64,
        back(r.back_after[2], same(&|x| x.links)),
    );
    row(
        &mut md,
        "daemon threads",
        &|x| x.threads as f64,
        back(r.back_after[3], same(&|x| x.threads)),
    );
    let rss = |x: &Sample| x.rss_kib as f64 / MIB;
    let anon = |x: &Sample| x.anon_kib as f64 / MIB;
    for (name, f, verdict) in [
        (
            "daemon RSS (MiB)",
            &rss as &dyn Fn(&Sample) -> f64,
            String::new(),
        ),
        (
            "… anonymous (heap, MiB)",
            &anon,
            format!(
                "{} ({:+.1} MiB; within {:.0} % counts)",
                match rss_back {
                    true => back(r.back_after[4], true),
                    false => back(None, false),
                },
                anon(s) - anon(b),
                RSS_SLACK * 100.0
            ),
        ),
    ] {
        let _ = writeln!(
            md,
            "| {name} | {:.1} | {:.1} | {:.1} | {:.1} | {verdict} |",
            f(b),
            peak(f),
            f(end),
            f(s)
        );
    }
    let _ = writeln!(
        md,
        "| `/metrics` scrape (ms) | {} | {peak_scrape:.1} | {} | {} | {failed} failed |",
        opt(b.scrape_ms, 1),
        opt(end.scrape_ms, 1),
        opt(s.scrape_ms, 1)
    );
    let gauge = |md: &mut String, name: &str, f: &dyn Fn(&Sample) -> Option<u64>| {
        let p = all.iter().filter_map(|x| f(x)).max();
        let g = |x: &Sample| f(x).map_or("–".to_string(), |v| v.to_string());
        let p = p.map_or("–".to_string(), |v| v.to_string());
        let _ = writeln!(md, "| {name} | {} | {p} | {} | {} | |", g(b), g(end), g(s));
    };
    gauge(&mut md, "tracked processes (`/metrics`)", &|x| x.tracked);
    gauge(&mut md, "probed files (`/metrics`)", &|x| x.probed_files);
    gauge(&mut md, "files refused, total (`/metrics`)", &|x| x.refused);
    gauge(&mut md, "traces written, total (`/metrics`)", &|x| x.traces);
    let cpu = (end.cpu_s - b.cpu_s) / load_s.max(1.0) * 100.0;
    let shutdown = opt(r.shutdown_s, 2);
    let gone = r.links_gone_after.map_or_else(
        || {
            format!(
                "were still {} 30 s after it exited ({} before it started: other BPF users on \
                 the machine, or links it left)",
                r.links_after_exit, r.links_before
            )
        },
        |t| {
            format!(
                "were back to the {} there were before it started {t:.1} s after it exited",
                r.links_before
            )
        },
    );
    let _ = writeln!(
        md,
        "\nThe daemon used {cpu:.1} % of one core under load. SIGTERM to exit: **{shutdown} s**; \
         the system's BPF links {gone}. Its state directory held {} files, {:.1} MiB, at the \
         end.\n",
        r.state_files,
        r.state_bytes as f64 / MIB / MIB
    );
    let _ = writeln!(
        md,
        "Its log, lines per minute:\n\n| phase | seconds | lines | per minute | warnings |\n| --- | ---: | ---: | ---: | ---: |"
    );
    let mut kinds: HashMap<String, u64> = HashMap::new();
    for (name, secs, lines) in &r.log_phases {
        let warnings = lines.iter().filter(|l| l.contains("warning")).count();
        let per_min = lines.len() as f64 / secs.max(1e-3) * 60.0;
        let _ = writeln!(
            md,
            "| {name} | {secs:.0} | {} | {per_min:.0} | {warnings} |",
            lines.len()
        );
        if *name == "load" {
            for l in lines {
                *kinds.entry(kind(l)).or_default() += 1;
            }
        }
    }
    let mut kinds: Vec<(String, u64)> = kinds.into_iter().collect();
    kinds.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let _ = writeln!(
        md,
        "\nIts most frequent lines under load (numbers as N):\n\n| lines | kind |\n| ---: | --- |"
    );
    for (k, n) in kinds.iter().take(8) {
        let _ = writeln!(
            md,
            "| {n} | `{}` |",
            k.replace('|', "\\|").replace('`', "'")
        );
    }
    let _ = writeln!(md, "\nWhat the loads did (their own counts):\n");
    for (name, v) in &r.loads {
        let _ = writeln!(md, "- {name}: `{v}`");
    }
    let _ = writeln!(
        md,
        "\nFlight dumps left in the state directory at the end: {}, the largest {:.1} MiB \
         (each file is bounded by `--trace-max-bytes`, 512 MiB by default; retention removes \
         the oldest).",
        r.flight_dumps.0,
        r.flight_dumps.1 as f64 / MIB / MIB
    );
    md.push_str(&super::witness::markdown(&r.witness));
    // What it shows, from the figures.
    let mut shows = Vec::new();
    let when = |after: Option<f64>| {
        after.map_or("by the end of the settle period".into(), |t| {
            format!("{t:.0} s after the load had stopped")
        })
    };
    let fds_back = r.back_after[0].is_some() || same(&|x| x.fds);
    shows.push(format!(
        "Descriptors: {} at baseline, {:.0} at peak, {}.",
        b.fds,
        peak(&|x| x.fds as f64),
        if fds_back {
            format!("back to {} {}", b.fds, when(r.back_after[0]))
        } else {
            format!(
                "still {} ({} of them BPF links, {} at baseline) 60 s after the load had stopped",
                s.fds, s.link_fds, b.link_fds
            )
        }
    ));
    let own_back = r.back_after[1].is_some() || same(&|x| x.link_fds);
    shows.push(format!(
        "Its BPF links: {} at baseline, up to {:.0} while the copies were probed, {}.",
        b.link_fds,
        peak(&|x| x.link_fds as f64),
        if own_back {
            format!("back {}", when(r.back_after[1]))
        } else {
            format!("still {} after 60 s", s.link_fds)
        }
    ));
    let others = |x: &Sample| x.links as i64 - x.link_fds as i64;
    if others(s) != others(b) {
        shows.push(format!(
            "The system-wide count also moved by {:+} links that were not the daemon's (other \
             BPF users on the machine, or links still being released).",
            others(s) - others(b)
        ));
    }
    let mid = &r.load[r.load.len() / 2];
    let lowest = r.load.iter().map(anon).fold(f64::MAX, f64::min);
    let highest = r.load.iter().map(anon).fold(0.0, f64::max);
    shows.push(format!(
        "Memory (heap): {:.1} MiB idle; under load from {lowest:.1} to {highest:.1} MiB, \
         {:.1} at the middle and {:.1} at the end; {:.1} settled ({}){}; resident in all \
         {:.1} MiB idle, {:.1} settled.",
        anon(b),
        anon(mid),
        anon(end),
        anon(s),
        if rss_back {
            "back within 10 %"
        } else {
            "**not** back within 10 %"
        },
        if anon(s) < 0.8 * anon(b) {
            " — below the idle heap: an idle daemon keeps start-up memory its allocator \
             hands back once the load makes it trim"
        } else {
            ""
        },
        rss(b),
        rss(s)
    ));
    let slow = all
        .iter()
        .filter(|x| x.scrape_max_ms.is_some_and(|m| m > 100.0))
        .count();
    shows.push(format!(
        "`/metrics` for root: {} ms idle, at most {peak_scrape:.0} ms under load ({slow} of {} \
         samples had a scrape over 100 ms), {} ms settled; {}.",
        opt(b.scrape_ms, 1),
        all.len(),
        opt(s.scrape_ms, 1),
        if failed == 0 {
            "none failed".to_string()
        } else {
            format!("**{failed} failed**")
        }
    ));
    let load_lines = r
        .log_phases
        .iter()
        .find(|p| p.0 == "load")
        .map_or(0, |p| p.2.len());
    shows.push(format!(
        "The log grew by {:.0} lines a minute under load, mostly `{}`.",
        load_lines as f64 / load_s.max(1.0) * 60.0,
        kinds.first().map_or("", |k| k.0.as_str()).replace('`', "'")
    ));
    let _ = writeln!(md, "\n### What it shows\n\n{}", shows.join(" "));
    let json = json!({
        "minutes": minutes, "command": command,
        "churn_rate": super::CHURN_RATE, "dyno_rate": super::DYNO_RATE, "dyno_rate_made": dyno_rate, "slow_per_port": super::SLOW_PER_PORT,
        "thread_burst_ms": super::THREAD_BURST_MS, "comm_jobs": super::COMM_JOBS, "flight_pause_s": super::FLIGHT_PAUSE_S, "daemon_flags": super::FLAGS, "witness": r.witness, "flight_dumps_left": r.flight_dumps.0, "largest_flight_dump_bytes": r.flight_dumps.1,
        "links_before_daemon": r.links_before, "baseline": b.json(), "end_of_load": end.json(),
        "settled": s.json(), "back_after_s": { "fds": r.back_after[0], "link_fds": r.back_after[1], "system_links": r.back_after[2], "threads": r.back_after[3], "heap": r.back_after[4] },
        "rss_back": rss_back, "shutdown_s": r.shutdown_s, "links_gone_after_exit_s": r.links_gone_after,
        "load_cpu_percent": cpu, "state_dir_bytes": r.state_bytes, "state_dir_files": r.state_files,
        "log_lines": r.log_phases.iter().map(|p| json!({"phase": p.0, "seconds": p.1, "lines": p.2.len()})).collect::<Vec<_>>(),
        "top_log_kinds_under_load": kinds.iter().take(8).map(|(k, n)| json!([n, k])).collect::<Vec<_>>(),
        "loads": r.loads.iter().map(|(n, v)| json!({"load": n, "counts": v})).collect::<Vec<_>>(),
        "samples": r.load.iter().map(Sample::json).collect::<Vec<_>>(),
        "settle_samples": r.settle.iter().map(Sample::json).collect::<Vec<_>>(),
    });
    (md, json)
}
