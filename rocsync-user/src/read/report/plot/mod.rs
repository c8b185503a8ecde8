//! `--plot DIR`: SVG figures drawn with plotters' SVG backend: blocked time per thread
//! over time, wait-time histograms per API (log-spaced bins: waits span microseconds to
//! seconds, and 1 208 of them once fell in one linear bin), and the stream dependency
//! graph ([`crate::read::report::plot::graph`]). Counts are on integer axes, a legend sits in a strip of
//! its own (it covers nothing), and an empty figure says "no data".

mod canvas;
mod graph;

use std::{
    collections::{BTreeMap, BTreeSet},
    io::Write as _,
    path::{Path, PathBuf},
};

use anyhow::Result;
use plotters::prelude::*;

use crate::calls::emit::files::PendingFile;

use super::{
    capture::{Capture, Observed, us},
    figures::Figures,
    text::dur,
};
use crate::read::report::job::text::plural;

pub(super) use canvas::{err, no_data};

pub(super) const TIMELINE: &str = "blocked-per-thread.svg";
pub(super) const HISTOGRAMS: &str = "wait-histograms.svg";
pub(super) const DEPENDENCIES: &str = "stream-dependencies.svg";
/// Bins per decade of the histograms.
const PER_DECADE: usize = 5;

/// Writes every figure into `dir` (made if needed): as any output, never through a link
/// root does not own, created as the sudo user ([`crate::calls::emit::files`]). The files
/// written.
pub(super) fn write_all(c: &Capture, f: &Figures, dir: &Path) -> Result<Vec<PathBuf>> {
    drop(crate::calls::emit::dirs::make(dir)?);
    let mut svgs = [String::new(), String::new(), String::new()];
    timeline(c, &mut svgs[0])?;
    histograms(c, &mut svgs[1])?;
    crate::read::report::plot::graph::dependencies(f, &mut svgs[2])?;
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

/// Each thread a row; each synchronisation a bar from its start to its return; the
/// legend (the kinds drawn) in a strip below the chart.
fn timeline(c: &Capture, svg: &mut String) -> Result<()> {
    let syncs: Vec<&Observed> = c.calls.iter().filter(|o| o.sync.is_some()).collect();
    let threads: Vec<(u32, u32)> = syncs
        .iter()
        .map(|o| (o.pid, o.tid))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let title = "Time blocked in synchronisations, per thread";
    let root = SVGBackend::with_string(svg, (1000, 150 + 40 * threads.len().max(1) as u32))
        .into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    if syncs.is_empty() {
        no_data(&root, title)?;
        return root.present().map_err(err);
    }
    let end_ms = syncs
        .iter()
        .map(|o| (o.start_ns + o.blocked_ns) as f64 / 1e6)
        .fold(0.0, f64::max)
        .max(1e-3);
    let (h, _) = (root.dim_in_pixel().1, ());
    let (chart_area, legend) = root.split_vertically(h - 40);
    let mut chart = ChartBuilder::on(&chart_area)
        .caption(title, ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(180)
        .build_cartesian_2d(0.0..end_ms * 1.02, -0.5..(threads.len() as f64 - 0.5))
        .map_err(err)?;
    let label = |y: &f64| {
        let i = y.round();
        match threads.get(i as usize) {
            Some((pid, tid)) if (y - i).abs() < 1e-9 => match c.thread_names.get(&(*pid, *tid)) {
                Some(n) => format!("{pid}/{tid} ({n})"),
                None => format!("{pid}/{tid}"),
            },
            _ => String::new(),
        }
    };
    chart
        .configure_mesh()
        .x_desc("ms since the first call")
        .y_desc("pid/thread")
        .y_labels(threads.len() * 2 + 1)
        .y_label_formatter(&label)
        .disable_y_mesh()
        .draw()
        .map_err(err)?;
    let mut drawn = Vec::new();
    for (i, kind) in KINDS.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let bars: Vec<Rectangle<(f64, f64)>> = syncs
            .iter()
            .filter(|o| o.sync.as_deref() == Some(*kind))
            .map(|o| {
                let row = threads.binary_search(&(o.pid, o.tid)).unwrap_or(0) as f64;
                let x0 = o.start_ns as f64 / 1e6;
                // At least a visible sliver: most waits are far shorter than the capture.
                let x1 = ((o.start_ns + o.blocked_ns) as f64 / 1e6).max(x0 + end_ms / 500.0);
                Rectangle::new([(x0, row - 0.35), (x1, row + 0.35)], color.filled())
            })
            .collect();
        if !bars.is_empty() {
            chart.draw_series(bars).map_err(err)?;
            drawn.push((*kind, color));
        }
    }
    // The legend: its own strip, so it covers no bar.
    let font = ("sans-serif", 14).into_font();
    let mut x = 200;
    for (kind, color) in drawn {
        legend
            .draw(&Rectangle::new([(x, 12), (x + 12, 24)], color.filled()))
            .map_err(err)?;
        legend
            .draw(&Text::new(kind, (x + 18, 12), font.clone()))
            .map_err(err)?;
        x += 30 + 8 * kind.len() as i32;
    }
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

/// The log-spaced bins of `times_us`: from the decade of the shortest to that of the
/// longest, [`PER_DECADE`] a decade; each bin's (from, to) and count.
pub(super) fn log_bins(times_us: &[f64]) -> Vec<(f64, f64, u32)> {
    // A wait of 0 (or below a nanosecond) sits in the first bin, at 1 ns.
    let floor = 1e-3;
    let lo = times_us.iter().fold(f64::MAX, |a, &t| a.min(t.max(floor)));
    let hi = times_us.iter().fold(floor, |a, &t| a.max(t));
    let (d0, d1) = (
        lo.log10().floor(),
        hi.log10().ceil().max(lo.log10().floor() + 1.0),
    );
    let n = ((d1 - d0) as usize * PER_DECADE).max(1);
    let edge = |i: usize| 10f64.powf(d0 + i as f64 / PER_DECADE as f64);
    let mut counts = vec![0u32; n];
    for &t in times_us {
        let i = ((t.max(floor).log10() - d0) * PER_DECADE as f64).floor();
        counts[(i.max(0.0) as usize).min(n - 1)] += 1;
    }
    (0..n).map(|i| (edge(i), edge(i + 1), counts[i])).collect()
}

/// One panel per synchronising API: how many calls blocked how long, on log-spaced bins.
fn histograms(c: &Capture, svg: &mut String) -> Result<()> {
    let mut per_api: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for o in c.calls.iter().filter(|o| o.sync.is_some()) {
        per_api.entry(&*o.api).or_default().push(us(o.blocked_ns));
    }
    let panels = per_api.len().max(1);
    let root = SVGBackend::with_string(svg, (800, 260 * panels as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    if per_api.is_empty() {
        no_data(&root, "Time blocked per synchronising API")?;
        return root.present().map_err(err);
    }
    let areas = root.split_evenly((panels, 1));
    for ((api, times), area) in per_api.iter().zip(areas.iter()) {
        let bins = log_bins(times);
        let (lo, hi) = (bins[0].0, bins[bins.len() - 1].1);
        let top = bins.iter().map(|b| b.2).max().unwrap_or(1);
        let n = times.len();
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("{api}: {n} {}", plural(n, "call", "calls")),
                ("sans-serif", 18),
            )
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(50)
            .build_cartesian_2d((lo..hi).log_scale(), 0u32..top + 1 + top / 10)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("time blocked")
            .y_desc("calls")
            .x_label_formatter(&|x| dur(*x))
            .draw()
            .map_err(err)?;
        let bars = bins
            .iter()
            .filter(|b| b.2 > 0)
            .map(|&(a, b, k)| Rectangle::new([(a, 0), (b, k)], BLUE.mix(0.6).filled()));
        chart.draw_series(bars).map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_are_log_spaced_from_the_shortest_decade_to_the_longest() {
        // 1 208 waits of about 10 µs and one of 2 s: a linear bin of 100 ms held them all.
        let mut t = vec![10.0; 1208];
        t.push(2e6);
        let bins = log_bins(&t);
        assert_eq!(bins.len(), 6 * PER_DECADE, "10 µs to 10 s: six decades");
        assert_eq!(bins[0].0, 10.0);
        let ratio = bins[1].0 / bins[0].0;
        assert!((ratio - 10f64.powf(0.2)).abs() < 1e-9, "{ratio}");
        assert_eq!(bins[0].2, 1208);
        assert_eq!(bins.iter().map(|b| b.2).sum::<u32>(), 1209);
        assert_eq!(log_bins(&[0.0])[0].2, 1, "a wait of 0 in the first bin");
    }
}
