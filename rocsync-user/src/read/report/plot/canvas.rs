//! What every figure draws with: the drawing error and the "no data" panel of an empty
//! figure (a file of its own, so that the figures need not import the plots' root).

use anyhow::{Result, anyhow};
use plotters::prelude::*;

/// What an empty figure says.
const NO_DATA: &str = "no data: no synchronisation in this trace";

pub(in crate::read::report) fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing: {e:?}")
}

/// "no data" in the middle of `area`, under its title.
pub(in crate::read::report) fn no_data<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
) -> Result<()> {
    let (w, h) = area.dim_in_pixel();
    area.draw(&Text::new(
        title.to_string(),
        (20, 15),
        ("sans-serif", 20).into_font(),
    ))
    .map_err(err)?;
    let at = (w as i32 / 2 - 150, h as i32 / 2);
    area.draw(&Text::new(NO_DATA, at, ("sans-serif", 16).into_font()))
        .map_err(err)?;
    Ok(())
}
