//! `rocsync report` on a scenario's trace says what the scenario's own log says: the
//! calls per API, who waited on whom and how often, the longest wait and its producer;
//! the raw capture of the same run reports the same; `--json` parses; `--plot` writes
//! SVG files that parse, with the elements each figure needs. A missing or foreign file
//! is a clear error, never a panic.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

use serde_json::Value;

use crate::common::*;
use rocsync_tests::{LoggedCall, read_log, scenario};

fn report_json(input: &Path) -> Value {
    let out = run_ok(rocsync().arg("report").arg(input).arg("--json"));
    serde_json::from_slice(&out.stdout).expect("report --json prints one JSON document")
}

/// (waiter, producer stream) → waits, from the log: a stream wait's waiter is its stream,
/// an event synchronize's (or query's) its thread; the producer is the stream of the
/// record the log says it waited for.
fn logged_dependencies(log: &[LoggedCall]) -> BTreeMap<(String, String), u64> {
    let by_seq: BTreeMap<u64, &LoggedCall> = log.iter().map(|l| (l.seq, l)).collect();
    let mut want = BTreeMap::new();
    for (wait, record) in expected_edges(log) {
        let (w, Some(r)) = (by_seq[&wait], record) else {
            continue;
        };
        let waiter = if w.api.starts_with("hipStreamWaitEvent") {
            format!("stream {:#x}", w.args[0])
        } else {
            format!("thread {}", w.tid)
        };
        let producer = format!("{:#x}", by_seq[&r].args[1]);
        *want.entry((waiter, producer)).or_default() += 1;
    }
    want
}

#[test]
fn report_says_what_the_scenario_log_says() {
    if !can_trace("report_says_what_the_scenario_log_says") {
        return;
    }
    let dir = TempDir::new();
    let (trace, raw, log) = (
        dir.path("t.json"),
        dir.path("calls.jsonl"),
        dir.path("scenario.log"),
    );
    run_ok(
        rocsync_run_raw(&trace, &raw, &scenario())
            .args(["cross", "30"])
            .env("SCENARIO_LOG", &log),
    );
    let logged = read_log(&log);
    let (_, calls) = read_raw(&raw);
    let corr = seq_to_correlation(&logged, &calls);
    let r = report_json(&trace);

    // Calls per API: every logged call but device selection, which traces leave out.
    let mut want_calls: BTreeMap<String, u64> = BTreeMap::new();
    for l in probed(&logged)
        .iter()
        .filter(|l| !l.api.contains("SetDevice"))
    {
        *want_calls.entry(l.api.clone()).or_default() += 1;
    }
    let mut got_calls: BTreeMap<String, u64> = BTreeMap::new();
    for a in r["per_api"].as_array().unwrap() {
        *got_calls
            .entry(a["api"].as_str().unwrap().into())
            .or_default() += a["calls"].as_u64().unwrap();
    }
    assert_eq!(got_calls, want_calls, "calls per API");
    assert_eq!(r["calls"], want_calls.values().sum::<u64>());
    // The text's table says each API's total blocked time, as the JSON's.
    let text = run_ok(rocsync().arg("report").arg(&trace));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("p99        max      total"), "{text}");
    for a in r["per_api"].as_array().unwrap() {
        let total = readable(a["blocked_total_us"].as_f64().unwrap());
        let api = a["api"].as_str().unwrap();
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with(api) && l.ends_with(&total)),
            "{api}'s total {total} in\n{text}"
        );
    }

    // Who waits on whom, as often as the log says.
    let got_deps: BTreeMap<(String, String), u64> = r["dependencies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            // Fields, not prose: the waiter's kind and handle or thread, the producer's
            // handle.
            let w = &d["waiter"];
            let waiter = match w["kind"].as_str().unwrap() {
                "stream" => format!("stream {}", w["handle"].as_str().unwrap()),
                _ => format!("thread {}", w["tid"]),
            };
            let producer = d["producer"]["handle"].as_str().unwrap().to_string();
            ((waiter, producer), d["waits"].as_u64().unwrap())
        })
        .collect();
    let want_deps = logged_dependencies(&logged);
    assert!(
        want_deps.len() >= 2,
        "stream and thread waiters: {want_deps:?}"
    );
    assert_eq!(got_deps, want_deps, "the dependency table");

    // The longest wait: the longest synchronisation of the capture, with the producer the
    // log names (stream and thread of its record).
    let sync_apis: BTreeSet<&str> = [
        "hipStreamWaitEvent",
        "hipEventSynchronize",
        "hipEventQuery",
        "hipStreamSynchronize",
        "hipDeviceSynchronize",
    ]
    .into();
    let longest = calls
        .iter()
        .filter(|c| sync_apis.contains(c.api.as_str()))
        .max_by_key(|c| {
            (
                c.exit_ns.unwrap() - c.enter_ns,
                std::cmp::Reverse(c.correlation),
            )
        })
        .unwrap();
    let first = &r["longest_waits"][0];
    assert_eq!(first["correlation"], longest.correlation, "{first}");
    let blocked_ns = (first["blocked_us"].as_f64().unwrap() * 1000.0).round() as u64;
    assert_eq!(blocked_ns, longest.exit_ns.unwrap() - longest.enter_ns);
    let seq_of: BTreeMap<u64, u64> = corr.iter().map(|(s, c)| (*c, *s)).collect();
    let edges = expected_edges(&logged);
    if let Some(Some(record)) = edges.get(&seq_of[&longest.correlation]) {
        let rec = logged.iter().find(|l| l.seq == *record).unwrap();
        let p = &first["producer"];
        assert_eq!(p["correlation"], corr[record], "{first}");
        assert_eq!(p["stream"]["handle"], format!("{:#x}", rec.args[1]));
        assert!(
            p["stream"]["index"].as_i64().unwrap() >= 1,
            "Perfetto's number"
        );
        assert_eq!(p["tid"], rec.tid);
        assert!(p["since_record_us"].as_f64().unwrap() > 0.0);
    } else {
        assert!(first["producer"].is_null(), "{first}");
    }
    let waits = r["longest_waits"].as_array().unwrap();
    assert!(
        waits
            .windows(2)
            .all(|w| w[0]["blocked_us"].as_f64() >= w[1]["blocked_us"].as_f64())
    );

    // Unresolved waits, by the log; every drop counter of the trace; nothing unusable.
    let unresolved = edges.values().filter(|r| r.is_none()).count() as u64;
    let got: u64 = r["unresolved"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(got, unresolved);
    assert_eq!(r["losses"], read_json(&trace)["rocsync"]["drops"]);
    assert_eq!(r["unusable"], serde_json::json!({}));

    // The raw capture of the same run reports the same figures (a raw capture has no
    // arrows or track metadata to pass over).
    let mut from_raw = report_json(&raw);
    let mut r = r;
    assert!(from_raw["not_used"].as_object().unwrap().is_empty());
    assert!(r["not_used"]["ac2g arrows (the correlation links the same rows)"].as_u64() > Some(0));
    for figures in [&mut from_raw, &mut r] {
        figures.as_object_mut().unwrap().remove("not_used");
    }
    assert_eq!(from_raw, r, "the raw capture's report");
}

/// A duration in µs as the text writes it: in the unit that reads.
fn readable(us: f64) -> String {
    match us {
        u if u >= 1e6 => format!("{:.1} s", u / 1e6),
        u if u >= 1e3 => format!("{:.1} ms", u / 1e3),
        u if u >= 1.0 => format!("{u:.1} µs"),
        u => format!("{:.0} ns", u * 1e3),
    }
}

#[test]
fn report_plots_parse_as_svg_with_their_elements() {
    if !can_trace("report_plots_parse_as_svg_with_their_elements") {
        return;
    }
    let dir = TempDir::new();
    let trace = dir.path("t.json");
    run_ok(
        rocsync()
            .args(["run", "--no-status", "-o"])
            .arg(&trace)
            .arg("--")
            .arg(scenario())
            .args(["cross", "10"])
            .env("SCENARIO_LOG", dir.path("scenario.log")),
    );
    let r = report_json(&trace);
    let figures = dir.path("figures");
    run_ok(
        rocsync()
            .arg("report")
            .arg(&trace)
            .arg("--plot")
            .arg(&figures),
    );
    let svg = |name: &str| {
        let text = std::fs::read_to_string(figures.join(name)).unwrap();
        let doc = roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(doc.root_element().tag_name().name(), "svg", "{name}");
        let texts: Vec<String> = doc
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .map(|n| n.text().unwrap_or("").trim().to_string())
            .collect();
        let rects = doc.descendants().filter(|n| n.has_tag_name("rect")).count();
        (texts, rects)
    };
    let syncs: u64 = r["per_api"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| !a["device"].is_null())
        .map(|a| a["calls"].as_u64().unwrap())
        .sum();

    // A bar per synchronisation (plus the background and the legend's).
    let (texts, rects) = svg("blocked-per-thread.svg");
    assert!(
        rects as u64 >= syncs,
        "{rects} bars for {syncs} synchronisations"
    );
    assert!(
        texts.iter().any(|t| t == "Stream Wait Event"),
        "legend: {texts:?}"
    );

    // A panel per synchronising API, titled with its count (singular for one).
    let (texts, _) = svg("wait-histograms.svg");
    for a in r["per_api"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| !a["device"].is_null())
    {
        let n = a["calls"].as_u64().unwrap();
        let calls = if n == 1 { "call" } else { "calls" };
        let title = format!("{}: {n} {calls}", a["api"].as_str().unwrap());
        assert!(texts.contains(&title), "{title} in {texts:?}");
    }

    // A labelled node per producer, a labelled row per dependency: its waiter, how many
    // waits (singular for one), how long.
    let (texts, _) = svg("stream-dependencies.svg");
    let deps = r["dependencies"].as_array().unwrap();
    assert!(!deps.is_empty());
    let stream = |s: &Value| match s["index"].as_i64() {
        Some(i) => format!("stream {i} ({})", s["handle"].as_str().unwrap()),
        None => format!("stream {}", s["handle"].as_str().unwrap()),
    };
    for d in deps {
        let producer = format!("{} (pid {})", stream(&d["producer"]), d["pid"]);
        assert!(texts.contains(&producer), "{producer} in {texts:?}");
        let w = &d["waiter"];
        let waiter = match w["kind"].as_str().unwrap() {
            "stream" => stream(w),
            // A thread is labelled with its name where the trace gave one.
            _ => match w["name"].as_str() {
                Some(name) => format!("thread {} ({name})", w["tid"]),
                None => format!("thread {}", w["tid"]),
            },
        };
        let n = d["waits"].as_u64().unwrap();
        let edge = format!(
            "{waiter} (pid {}): {n} {}, {}",
            d["pid"],
            if n == 1 { "wait" } else { "waits" },
            readable(d["blocked_total_us"].as_f64().unwrap())
        );
        assert!(texts.contains(&edge), "{edge} in {texts:?}");
    }
}

#[test]
fn report_on_a_missing_or_foreign_file_is_a_clear_error() {
    let dir = TempDir::new();
    let foreign = dir.path("profile.json");
    std::fs::write(&foreign, r#"{"traceEvents": []}"#).unwrap();
    let garbage = dir.path("garbage.json");
    std::fs::write(&garbage, "not json at all").unwrap();
    let empty = TempDir::new();
    for (input, says) in [
        (dir.path("missing.json"), "cannot open"),
        (foreign, "it has no rocsync object"),
        (garbage, "is not a rocsync Kineto trace"),
        // A directory is one job's traces: what is none is said, and none is an error.
        (dir.path(""), "garbage.json: not a rocsync trace"),
        (empty.path(""), "holds no rocsync trace"),
    ] {
        let out = rocsync().arg("report").arg(&input).output().unwrap();
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{}: {err}", input.display());
        assert!(err.contains(says), "{}: {err}", input.display());
        assert!(!err.contains("panicked"), "{err}");
    }
}
