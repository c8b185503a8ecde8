//! `rocsync report TRACE|RAW [--json] [--plot DIR]`: the typed arguments into the
//! report's plain settings.

use anyhow::Result;

use crate::{front::cli::ReportArgs, read::report};

pub fn report(args: ReportArgs) -> Result<i32> {
    report::run(&report::Settings {
        input: args.input,
        json: args.json,
        plot: args.plot,
    })
}
