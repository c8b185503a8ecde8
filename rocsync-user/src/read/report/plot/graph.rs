//! The stream dependency graph: recording streams in a column on the left, one row
//! each; on the right one row per dependency (its waiter, how many waits, how long); an
//! arrow from each recording stream to each of its waiters, as thick as the waits are
//! many. Every label has a row of its own, so none overlaps another, however many
//! streams (on a circle, 24 streams' labels ran into each other).

use anyhow::Result;
use plotters::prelude::*;

use crate::read::report::{
    figures::{Figures, Waiter},
    job::text::plural,
    plot::{err, no_data},
    text::{dur, stream, thread},
};

/// Height of a row: above the labels' font size, so that none touches the next.
const ROW: i32 = 26;
const TOP: i32 = 60;

/// The waiter, as labelled: `thread 12 (python3) (pid 7)`.
pub(super) fn waiter_label(w: &Waiter, pid: u32) -> String {
    let w = match w {
        Waiter::Stream { handle, index } => stream(&crate::read::report::figures::Stream {
            handle: handle.clone(),
            index: *index,
        }),
        Waiter::Thread { tid, name } => thread(*tid, name.as_deref()),
    };
    format!("{w} (pid {pid})")
}

pub(super) fn dependencies(f: &Figures, svg: &mut String) -> Result<()> {
    let mut producers: Vec<(u32, String)> = (f.dependencies.iter())
        .map(|d| (d.pid, format!("{} (pid {})", stream(&d.producer), d.pid)))
        .collect();
    producers.sort();
    producers.dedup();
    let rows = producers.len().max(f.dependencies.len()).max(1) as i32;
    let (w, h) = (1100i32, TOP + ROW * rows + 40);
    let root = SVGBackend::with_string(svg, (w as u32, h as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let title = "Who waits on whom";
    if f.dependencies.is_empty() {
        no_data(&root, title)?;
        return root.present().map_err(err);
    }
    root.draw(&Text::new(title, (20, 15), ("sans-serif", 20).into_font()))
        .map_err(err)?;
    let small = ("sans-serif", 13).into_font();
    let (left_x, right_x) = (380, 640);
    let y = |i: usize| TOP + ROW * i as i32;
    let most = f.dependencies.iter().map(|d| d.waits).max().unwrap_or(1) as f64;
    for (i, d) in f.dependencies.iter().enumerate() {
        let label = format!("{} (pid {})", stream(&d.producer), d.pid);
        let from_row = producers.iter().position(|p| p.1 == label).unwrap_or(0);
        let (from, to) = ((left_x + 10, y(from_row)), (right_x - 10, y(i)));
        let stroke = 1 + (4.0 * d.waits as f64 / most) as u32;
        root.draw(&PathElement::new(
            vec![from, to],
            RED.mix(0.6).stroke_width(stroke),
        ))
        .map_err(err)?;
        // The arrow head, at the waiter's node.
        let (dx, dy) = ((to.0 - from.0) as f64, (to.1 - from.1) as f64);
        let len = dx.hypot(dy).max(1.0);
        let (ux, uy) = (dx / len, dy / len);
        let tip = (to.0 - (ux * 2.0) as i32, to.1 - (uy * 2.0) as i32);
        let side = |s: f64| {
            (
                tip.0 - (ux * 10.0 - s * uy * 5.0) as i32,
                tip.1 - (uy * 10.0 + s * ux * 5.0) as i32,
            )
        };
        root.draw(&Polygon::new(
            vec![tip, side(1.0), side(-1.0)],
            RED.filled(),
        ))
        .map_err(err)?;
        let fill = match d.waiter {
            Waiter::Thread { .. } => GREEN,
            Waiter::Stream { .. } => BLUE,
        };
        root.draw(&Circle::new((right_x, y(i)), 7, fill.mix(0.8).filled()))
            .map_err(err)?;
        let n = d.waits as usize;
        let text = format!(
            "{}: {n} {}, {}",
            waiter_label(&d.waiter, d.pid),
            plural(n, "wait", "waits"),
            dur(d.blocked_total_us)
        );
        root.draw(&Text::new(text, (right_x + 12, y(i) - 7), small.clone()))
            .map_err(err)?;
    }
    for (i, (_, label)) in producers.iter().enumerate() {
        root.draw(&Circle::new((left_x, y(i)), 7, BLUE.mix(0.8).filled()))
            .map_err(err)?;
        // Right-aligned against its node: its own row, left of it.
        let width = 7 * label.chars().count() as i32;
        root.draw(&Text::new(
            label.clone(),
            (left_x - 12 - width, y(i) - 7),
            small.clone(),
        ))
        .map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}
