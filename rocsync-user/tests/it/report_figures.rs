//! `rocsync report --plot`: figures that read — counts on integer ticks, a legend that
//! covers no bar, the dependency graph's labels apart at 24 streams, "no data" on a
//! figure with nothing to draw.

use std::path::Path;

use serde_json::{Value, json};

use crate::{
    common::*,
    report_story::{runtime, sync},
};

/// (text, x, y) of every text of an SVG figure, and its rects (x, y, width, height).
type Texts = Vec<(String, f64, f64)>;
type Rects = Vec<(f64, f64, f64, f64)>;

fn figure(path: &Path) -> (Texts, Rects) {
    let text = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    let num =
        |n: &roxmltree::Node, a: &str| n.attribute(a).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    let texts = (doc.descendants().filter(|n| n.has_tag_name("text")))
        .map(|n| {
            (
                n.text().unwrap_or("").trim().to_string(),
                num(&n, "x"),
                num(&n, "y"),
            )
        })
        .collect();
    let rects = (doc.descendants().filter(|n| n.has_tag_name("rect")))
        .map(|n| {
            (
                num(&n, "x"),
                num(&n, "y"),
                num(&n, "width"),
                num(&n, "height"),
            )
        })
        .collect();
    (texts, rects)
}

fn plot(events: Vec<Value>) -> TempDir {
    let dir = TempDir::new();
    let t = json!({"traceEvents": events, "rocsync": {"drops": {}}});
    std::fs::write(dir.path("t.json"), t.to_string()).unwrap();
    run_ok(
        rocsync()
            .arg("report")
            .arg(dir.path("t.json"))
            .arg("--plot")
            .arg(dir.path("f")),
    );
    dir
}

#[test]
fn a_figure_with_nothing_to_draw_says_no_data() {
    let dir = plot(vec![runtime("hipStreamCreate", 1, 7, 1.0, 2.0, json!({}))]);
    for name in [
        "blocked-per-thread.svg",
        "wait-histograms.svg",
        "stream-dependencies.svg",
    ] {
        let (texts, _) = figure(&dir.path(&format!("f/{name}")));
        assert!(
            texts
                .iter()
                .any(|t| t.0 == "no data: no synchronisation in this trace"),
            "{name}: {texts:?}"
        );
    }
}

/// 24 streams each recording what another stream and a thread wait on: every label of
/// the graph (about 7 px a character at 13 px) has its own row.
#[test]
fn the_dependency_graph_labels_never_overlap_at_24_streams() {
    let mut events = Vec::new();
    let mut corr = 0;
    for s in 0..24u64 {
        let (producer, waiter) = (0x1000 + s, 0x2000 + s);
        corr += 1;
        let rec = corr;
        events.push(runtime(
            "hipEventRecord",
            rec,
            7,
            corr as f64,
            1.0,
            json!({"hip_stream": format!("{producer:#x}")}),
        ));
        for (name, kind, args) in [
            (
                "hipStreamWaitEvent",
                "Stream Wait Event",
                json!({"hip_stream": format!("{waiter:#x}")}),
            ),
            ("hipEventSynchronize", "Event Sync", json!({})),
        ] {
            corr += 1;
            let mut a = json!({"wait_on_stream": format!("{producer:#x}"), "wait_on_hip_event_record_corr_id": rec});
            a.as_object_mut()
                .unwrap()
                .extend(args.as_object().unwrap().clone());
            events.push(runtime(name, corr, 8, corr as f64, 3.0, a));
            events.push(sync(kind, corr, 25 + s as i64, 1 + s as i64));
        }
    }
    let dir = plot(events);
    let (texts, _) = figure(&dir.path("f/stream-dependencies.svg"));
    let labels: Vec<&(String, f64, f64)> =
        texts.iter().filter(|t| t.0.contains("(pid 7)")).collect();
    assert_eq!(labels.len(), 24 + 48, "{texts:?}");
    let boxes: Vec<(f64, f64, f64, f64)> = labels
        .iter()
        .map(|(t, x, y)| (*x, *y, x + 7.0 * t.chars().count() as f64, y + 13.0))
        .collect();
    for (i, a) in boxes.iter().enumerate() {
        for (j, b) in boxes.iter().enumerate().skip(i + 1) {
            let apart = a.2 <= b.0 || b.2 <= a.0 || a.3 <= b.1 || b.3 <= a.1;
            assert!(apart, "{:?} and {:?} overlap", labels[i], labels[j]);
        }
    }
    assert!(
        texts.iter().any(|t| t.0.ends_with(": 1 wait, 3.0 µs")),
        "singular: {texts:?}"
    );
}

#[test]
fn the_legend_covers_no_bar_and_counts_are_whole_numbers() {
    let mut events = Vec::new();
    for i in 0..40u64 {
        let dur = 10f64.powf(1.0 + i as f64 / 8.0);
        events.push(runtime(
            "hipStreamSynchronize",
            i + 1,
            7 + i % 3,
            i as f64 * 1e5,
            dur,
            json!({"hip_stream": "0x10"}),
        ));
        events.push(sync("Stream Sync", i + 1, 1, -1));
    }
    let dir = plot(events);
    let (texts, rects) = figure(&dir.path("f/blocked-per-thread.svg"));
    let legend = texts
        .iter()
        .find(|t| t.0 == "Stream Sync")
        .expect("its legend");
    // Every bar (a rect above the legend's strip) ends above the legend's text.
    let bars = rects
        .iter()
        .filter(|r| r.1 < legend.2 - 20.0 && r.2 < 900.0);
    for r in bars {
        assert!(
            r.1 + r.3 < legend.2 - 12.0,
            "bar {r:?} reaches the legend at {legend:?}"
        );
    }
    let (texts, _) = figure(&dir.path("f/wait-histograms.svg"));
    let fractional = texts.iter().filter(|t| {
        t.0.parse::<f64>().is_ok_and(|v| v.fract() != 0.0)
            || (t.0.contains('.') && t.0.parse::<f64>().is_ok())
    });
    assert_eq!(
        fractional.count(),
        0,
        "a count axis of fractions: {texts:?}"
    );
    assert!(
        texts
            .iter()
            .any(|t| t.0 == "hipStreamSynchronize: 40 calls"),
        "{texts:?}"
    );
}
