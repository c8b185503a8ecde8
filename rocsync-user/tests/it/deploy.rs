//! What operators deploy beside the daemon, checked by Prometheus's own tools: the alert
//! rules (`promtool check rules`, and `promtool test rules` firing each alert on its
//! condition), every Grafana panel's PromQL, and a real Prometheus server scraping a test
//! daemon, whose queries return the calls and the stalls the scenarios logged. Needs `promtool` and
//! `prometheus` (Debian's package; scripts/setup installs it) and, for the server, root.

use std::{
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use rocsync_tests::read_log;
use serde_json::Value;

use crate::common::{daemon::*, *};

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

/// `tool` is installed, or a skip (a failure under `cargo xtask test`).
fn have(tool: &str, test: &str) -> bool {
    let found = Command::new(tool).arg("--version").output().is_ok();
    found || !rocsync_tests::skip(test, &format!("{tool} is not installed (scripts/setup)"))
}

fn promtool(args: &[&str], dir: &Path) -> String {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &stderr_of(&out);
    assert!(out.status.success(), "promtool {args:?}: {text}");
    text
}

#[test]
fn the_alert_rules_pass_promtools_checks_and_unit_tests() {
    if !have(
        "promtool",
        "the_alert_rules_pass_promtools_checks_and_unit_tests",
    ) {
        return;
    }
    let dir = deploy().join("prometheus");
    let checked = promtool(&["check", "rules", "rocsync-rules.yml"], &dir);
    assert!(checked.contains("SUCCESS: 7 rules found"), "{checked}");
    let tested = promtool(&["test", "rules", "rocsync-rules.test.yml"], &dir);
    assert!(tested.contains("SUCCESS"), "{tested}");
}

#[test]
fn every_dashboard_expression_parses() {
    if !have("promtool", "every_dashboard_expression_parses") {
        return;
    }
    let text = std::fs::read_to_string(deploy().join("grafana/rocsync.json")).unwrap();
    let dashboard: Value = serde_json::from_str(&text).unwrap();
    let exprs: Vec<String> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().unwrap().iter())
        .map(|t| t["expr"].as_str().unwrap().to_string())
        .collect();
    assert!(exprs.len() >= 10, "{exprs:?}");
    // Grafana's range variables, as it substitutes them; each expression a recording
    // rule, so that promtool parses it.
    let dir = TempDir::new();
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, e) in exprs.iter().enumerate() {
        let e = e
            .replace("$__rate_interval", "1m")
            .replace("$__range", "1h");
        assert!(!e.contains('$'), "a variable left in {e}");
        rules += &format!("      - record: rocsync_dashboard_panel_{i}\n        expr: '{e}'\n");
    }
    std::fs::write(dir.path("dashboard.yml"), rules).unwrap();
    let checked = promtool(&["check", "rules", "dashboard.yml"], &dir.path(""));
    assert!(
        checked.contains(&format!("SUCCESS: {} rules found", exprs.len())),
        "{checked}"
    );
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One instant query's result values, from Prometheus's HTTP API.
fn query(addr: &str, q: &str) -> Vec<f64> {
    let encoded: String = q
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    // Not listening yet: asked again.
    let Some(text) = http_get(addr, &format!("/api/v1/query?query={encoded}")) else {
        return Vec::new();
    };
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default();
    let Ok(v) = serde_json::from_str::<Value>(body.trim()) else {
        return Vec::new(); // not ready, or a chunked answer cut: asked again
    };
    v["data"]["result"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(|s| s["value"][1].as_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// A GET over HTTP/1.0 (an answer whole, not chunked); `None` when nothing answers.
fn http_get(addr: &str, path: &str) -> Option<String> {
    use std::io::{Read as _, Write as _};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        self.0.end();
    }
}

#[test]
fn a_real_prometheus_scrapes_the_daemon_and_counts_what_the_scenario_logged() {
    let name = "a_real_prometheus_scrapes_the_daemon_and_counts_what_the_scenario_logged";
    if !have("prometheus", name) {
        return;
    }
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    // Stalls counted: over 50 ms, none of the loop's calls, each of the stall scenario's.
    let (daemon, mut lines) = start_daemon(&dir, &exe, &["--capture-on-stall", "50ms"]);
    let metrics = metrics_addr(&lines);
    // Gated until the daemon tracks them: every call they make is counted.
    for (args, log) in [
        (&["gated", "loop", "1500"][..], "loop.log"),
        (&["gated", "stall", "3", "100000"][..], "stall.log"),
    ] {
        let mut target = Gated::start(
            Command::new(&exe)
                .args(args)
                .env("SCENARIO_LOG", dir.path(log)),
        );
        target.open_when_tracked(&mut lines);
        assert!(target.child.wait().unwrap().success());
    }
    let config = dir.path("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: rocsync\n    \
             static_configs:\n      - targets: ['{metrics}']\n"
        ),
    )
    .unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let _server = Server(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path("tsdb").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let logged: Vec<_> = ["loop.log", "stall.log"]
        .iter()
        .flat_map(|log| read_log(&dir.path(log)))
        .collect();
    let records = logged.iter().filter(|c| c.api == "hipEventRecord").count() as f64;
    assert!(records > 0.0);
    // The synchronisations the logs time over the threshold. A log's span holds the
    // kernel's, so the two agree unless a call took about 50 ms: none did.
    let took = |c: &rocsync_tests::LoggedCall| {
        let sync = c.api.ends_with("Synchronize") || c.api.ends_with("StreamWaitEvent");
        sync.then(|| c.after_ns - c.before_ns)
    };
    let ms = 1_000_000;
    assert!(
        logged
            .iter()
            .filter_map(took)
            .all(|ns| !(40 * ms..60 * ms).contains(&ns))
    );
    let stalled = logged
        .iter()
        .filter_map(took)
        .filter(|&ns| ns > 50 * ms)
        .count() as f64;
    assert_eq!(stalled, 3.0, "the stall scenario blocks three times");
    let deadline = Instant::now() + Duration::from_secs(60);
    let counted = "sum(rocsync_sync_calls_total{job=\"rocsync\",api=\"hipEventRecord\"})";
    let stalls = "sum(rocsync_stalls_total{job=\"rocsync\"})";
    loop {
        let up = query(&addr, "up{job=\"rocsync\"}");
        if up == [1.0] && query(&addr, counted) == [records] && query(&addr, stalls) == [stalled] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus never saw the daemon's {records} hipEventRecord calls and {stalled} stalls: \
             up {up:?}, counted {:?}, stalls {:?}",
            query(&addr, counted),
            query(&addr, stalls)
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    stop(daemon);
}
