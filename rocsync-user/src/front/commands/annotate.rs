//! `rocsync annotate TRACE --capture RAW`: the command line to [`crate::read::annotate`]'s
//! settings; the summary on stderr (or as JSON on stdout).

use anyhow::Result;

use crate::{
    front::cli::AnnotateArgs,
    read::annotate::{Settings, annotate as run},
};

pub fn annotate(args: AnnotateArgs) -> Result<i32> {
    let settings = Settings {
        trace: args.trace,
        capture: args.capture,
        output: args.output,
        force: args.force,
    };
    let summaries = run(&settings)?;
    if args.json {
        crate::os::stdio::print(&format!("{}\n", serde_json::to_string_pretty(&summaries)?))?;
    } else {
        for s in &summaries {
            crate::say!("{}", s.text());
        }
    }
    Ok(0)
}
