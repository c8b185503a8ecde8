//! `rocsync doctor`: the checks of [`crate::front::doctor`], as a table or JSON.

use std::io::Write as _;

use anyhow::{Context as _, Result};

use crate::front::cli::DoctorArgs;

/// Prints what this machine allows; 0 when everything needed is there, 1 otherwise.
pub fn doctor(args: DoctorArgs) -> Result<i32> {
    let report = crate::front::doctor::run();
    let text = if args.json {
        format!("{:#}\n", report.json())
    } else {
        report.table()
    };
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .context("writing the report")?;
    Ok(if report.missing().is_empty() { 0 } else { 1 })
}
