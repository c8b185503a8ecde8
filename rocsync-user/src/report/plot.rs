//! `--plot DIR`: SVG figures drawn with plotters' SVG backend: blocked time per thread
//! over time, wait-time histograms per API, and the stream dependency graph.

use std::{
    collections::{BTreeMap, BTreeSet},
    io::Write as _,
    path::{Path, PathBuf},
};

use anyhow::{Result, anyhow};
use plotters::prelude::*;

use crate::emit::files::PendingFile;

use super::{
    capture::{Capture, Observed},
    figures::{Figures, us},
};

pub const TIMELINE: &str = "blocked-per-thread.svg";
pub const HISTOGRAMS: &str = "wait-histograms.svg";
pub const DEPENDENCIES: &str = "stream-dependencies.svg";
const BINS: usize = 20;

/// Writes every figure into `dir` (made if needed): as any output, never through a link
/// root does not own, created as the sudo user ([`crate::emit::files`]). The files
/// written.
pub fn write_all(c: &Capture, f: &Figures, dir: &Path) -> Result<Vec<PathBuf>> {
    drop(crate::emit::dirs::make(dir)?);
    let mut svgs = [String::new(), String::new(), String::new()];
    timeline(c, &mut svgs[0])?;
    histograms(c, &mut svgs[1])?;
    dependencies(f, &mut svgs[2])?;
    let first = PendingFile::create(&dir.join(TIMELINE))?;
    let files = [first.sibling(HISTOGRAMS)?, first.sibling(DEPENDENCIES)?];
    let mut written = Vec::new();
    for (file, svg) in std::iter::once(first).chain(files).zip(&svgs) {
        let mut out = file.stream()?;
        out.write_all(svg.as_bytes())?;
        out.close()?;
        written.push(file.persist()?);
    }
    Ok(written)
}

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing: {e:?}")
}

/// Each thread a row; each synchronisation a bar from its start to its return.
fn timeline(c: &Capture, svg: &mut String) -> Result<()> {
    let syncs: Vec<&Observed> = c.calls.iter().filter(|o| o.sync.is_some()).collect();
    let threads: Vec<(u32, u32)> = syncs
        .iter()
        .map(|o| (o.pid, o.tid))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let end_ms = syncs
        .iter()
        .map(|o| (o.start_ns + o.blocked_ns) as f64 / 1e6)
        .fold(0.0, f64::max)
        .max(1e-3);
    let root = SVGBackend::with_string(svg, (1000, 120 + 40 * threads.len().max(1) as u32))
        .into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Time blocked in synchronisations, per thread",
            ("sans-serif", 20),
        )
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(140)
        .build_cartesian_2d(0.0..end_ms * 1.25, -0.5..(threads.len() as f64 - 0.5))
        .map_err(err)?;
    let label = |y: &f64| {
        let i = y.round();
        match threads.get(i as usize) {
            Some((pid, tid)) if (y - i).abs() < 1e-9 => format!("{pid}/{tid}"),
            _ => String::new(),
        }
    };
    chart
        .configure_mesh()
        .x_desc("ms since the first call")
        .y_desc("pid/thread")
        .y_labels(threads.len().max(1) * 2 + 1)
        .y_label_formatter(&label)
        .disable_y_mesh()
        .draw()
        .map_err(err)?;
    for (i, kind) in KINDS.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let bars = syncs
            .iter()
            .filter(|o| o.sync.as_deref() == Some(*kind))
            .map(|o| {
                let row = threads.binary_search(&(o.pid, o.tid)).unwrap_or(0) as f64;
                let x0 = o.start_ns as f64 / 1e6;
                // At least a visible sliver: most waits are far shorter than the capture.
                let x1 = ((o.start_ns + o.blocked_ns) as f64 / 1e6).max(x0 + end_ms / 500.0);
                Rectangle::new([(x0, row - 0.35), (x1, row + 0.35)], color.filled())
            });
        chart
            .draw_series(bars)
            .map_err(err)?
            .label(*kind)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// CUPTI's names of the synchronisation kinds, one colour each.
const KINDS: [&str; 4] = [
    "Stream Wait Event",
    "Event Sync",
    "Stream Sync",
    "Context Sync",
];

/// One panel per synchronising API: how many calls blocked how long.
fn histograms(c: &Capture, svg: &mut String) -> Result<()> {
    let mut per_api: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for o in c.calls.iter().filter(|o| o.sync.is_some()) {
        per_api.entry(&*o.api).or_default().push(o.blocked_ns);
    }
    let panels = per_api.len().max(1);
    let root = SVGBackend::with_string(svg, (800, 260 * panels as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let areas = root.split_evenly((panels, 1));
    for ((api, times), area) in per_api.iter().zip(areas.iter()) {
        let max = us(*times.iter().max().unwrap_or(&0)).max(1e-3);
        let width = max / BINS as f64;
        let mut counts = [0u32; BINS];
        for &t in times {
            counts[((us(t) / width) as usize).min(BINS - 1)] += 1;
        }
        let top = *counts.iter().max().unwrap_or(&1) as f64;
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{api}: {} calls", times.len()), ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(50)
            .build_cartesian_2d(0.0..max, 0.0..top * 1.1)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("µs blocked")
            .y_desc("calls")
            .draw()
            .map_err(err)?;
        chart
            .draw_series(
                counts
                    .iter()
                    .enumerate()
                    .filter(|(_, n)| **n > 0)
                    .map(|(i, n)| {
                        let x = i as f64 * width;
                        Rectangle::new([(x, 0.0), (x + width, *n as f64)], BLUE.mix(0.6).filled())
                    }),
            )
            .map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}

/// Waiters and recording streams on a circle; an arrow from each producer to its
/// waiter, as thick as the waits are many, labelled with their count and time blocked.
fn dependencies(f: &Figures, svg: &mut String) -> Result<()> {
    let nodes: Vec<(u32, &str)> = f
        .dependencies
        .iter()
        .flat_map(|d| [(d.pid, d.producer.as_str()), (d.pid, d.waiter.as_str())])
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let (w, h) = (900i32, 700i32);
    let root = SVGBackend::with_string(svg, (w as u32, h as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let title = ("sans-serif", 20).into_font();
    root.draw(&Text::new("Who waits on whom", (20, 15), title))
        .map_err(err)?;
    let (cx, cy, r) = (w / 2, h / 2 + 10, (h / 2 - 110).max(60));
    let at = |i: usize| {
        let a = std::f64::consts::TAU * i as f64 / nodes.len().max(1) as f64;
        (
            cx + (r as f64 * a.cos()) as i32,
            cy + (r as f64 * a.sin()) as i32,
        )
    };
    let most = f.dependencies.iter().map(|d| d.waits).max().unwrap_or(1) as f64;
    let small = ("sans-serif", 13).into_font();
    for d in &f.dependencies {
        let from = at(nodes
            .binary_search(&(d.pid, d.producer.as_str()))
            .unwrap_or(0));
        let to = at(nodes
            .binary_search(&(d.pid, d.waiter.as_str()))
            .unwrap_or(0));
        let stroke = 1 + (5.0 * d.waits as f64 / most) as u32;
        let style = RED.mix(0.7).stroke_width(stroke);
        root.draw(&PathElement::new(vec![from, to], style))
            .map_err(err)?;
        // The arrow head, short of the waiter's node.
        let (dx, dy) = ((to.0 - from.0) as f64, (to.1 - from.1) as f64);
        let len = dx.hypot(dy).max(1.0);
        let (ux, uy) = (dx / len, dy / len);
        let tip = (to.0 - (ux * 14.0) as i32, to.1 - (uy * 14.0) as i32);
        let side = |s: f64| {
            (
                tip.0 - (ux * 12.0 - s * uy * 6.0) as i32,
                tip.1 - (uy * 12.0 + s * ux * 6.0) as i32,
            )
        };
        root.draw(&Polygon::new(
            vec![tip, side(1.0), side(-1.0)],
            RED.filled(),
        ))
        .map_err(err)?;
        let mid = ((from.0 + to.0) / 2 + 6, (from.1 + to.1) / 2 - 6);
        let text = format!("{} waits, {:.1} µs", d.waits, d.blocked_total_us);
        root.draw(&Text::new(text, mid, small.clone()))
            .map_err(err)?;
    }
    for (i, (pid, name)) in nodes.iter().enumerate() {
        let p = at(i);
        let fill = if name.starts_with("thread") {
            &GREEN
        } else {
            &BLUE
        };
        root.draw(&Circle::new(p, 10, fill.mix(0.8).filled()))
            .map_err(err)?;
        root.draw(&Text::new(
            format!("{name} (pid {pid})"),
            (p.0 + 14, p.1 + 4),
            small.clone(),
        ))
        .map_err(err)?;
    }
    if nodes.is_empty() {
        root.draw(&Text::new(
            "no resolved wait on an event",
            (cx - 100, cy),
            small,
        ))
        .map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}
