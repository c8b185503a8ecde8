//! `rocsync report`: what a user looks at first in a capture — blocked time per API and
//! device, the longest waits with their producers, who waits on whom, unresolved waits,
//! losses — as text, as one JSON document, or as SVG figures. Given a directory of one
//! job's traces, its communicators' ranks and the laggard ([`job`]).
//!
//! A capture is read into [`Capture`] (from a Kineto trace, [`kineto`], or from a raw
//! capture replayed through the resolve stage, [`raw`]); [`figures`] computes the
//! [`Figures`] that [`text`] prints and [`plot`] draws.

mod capture;
mod figures;
mod job;
mod load;
mod plot;
mod text;
mod word;

use job::text as job_text;
use load::{kineto, progress, raw};
use std::path::PathBuf;

use anyhow::{Context as _, Result};

pub use capture::{Capture, Observed, Produced};
pub use figures::Figures;

use crate::read::input::{decompressed, open_regular};

/// What `rocsync report` was asked.
pub struct Settings {
    /// A Kineto trace rocsync wrote, or a raw capture (`--raw`), gzip or not.
    pub input: PathBuf,
    pub json: bool,
    /// Where to write the SVG figures.
    pub plot: Option<PathBuf>,
}

/// Runs the report; the exit status.
pub fn run(s: &Settings) -> Result<i32> {
    if s.input.is_dir() {
        return run_job(s);
    }
    let file = open_regular(&s.input, "report reads a trace or raw capture file")?;
    let size = file.metadata().map_or(0, |m| m.len());
    let mut input = decompressed(progress::Reading::new(file, size))?;
    // A raw capture's first line is its header object; a trace is one object whose keys
    // come in another order: the first bytes tell which.
    let raw = raw::looks_raw(input.fill_buf().context("reading the file")?);
    let shown = s.input.display();
    let capture = if raw {
        raw::read(input)
            .with_context(|| format!("{shown} is not a readable rocsync raw capture"))?
    } else {
        kineto::read(input).with_context(|| format!("{shown} is not a rocsync Kineto trace"))?
    };
    let figures = Figures::of(&capture);
    if s.json {
        crate::os::stdio::print(&format!("{}\n", serde_json::to_string_pretty(&figures)?))?;
    } else {
        crate::os::stdio::print(&text::render(&figures))?;
    }
    if let Some(dir) = &s.plot {
        let written = plot::write_all(&capture, &figures, dir)
            .with_context(|| format!("writing the figures into {}", dir.display()))?;
        for f in written {
            crate::say!("rocsync: figure {}", f.display());
        }
    }
    Ok(0)
}

/// A directory of one job's traces: its communicators' ranks and laggards.
fn run_job(s: &Settings) -> Result<i32> {
    if s.plot.is_some() {
        anyhow::bail!("--plot draws one trace's figures: give it a file, not a directory");
    }
    let job = job::read_dir(&s.input)?;
    if s.json {
        crate::os::stdio::print(&format!("{}\n", serde_json::to_string_pretty(&job)?))?;
    } else {
        crate::os::stdio::print(&job_text::render(&job))?;
    }
    Ok(0)
}
