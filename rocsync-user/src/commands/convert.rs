//! `rocsync convert RAW`: resolve an archived raw capture into a Kineto trace, by the same
//! code path as a live capture.

use std::io::BufReader;

use anyhow::{Context as _, Result};
use serde_json::json;

use super::finish::write_trace;
use crate::{cli::ConvertArgs, output::PendingFile, resolve::resolve, trace::raw};

pub fn convert(args: ConvertArgs) -> Result<i32> {
    let file = std::fs::File::open(&args.raw)
        .with_context(|| format!("cannot open {}", args.raw.display()))?;
    let out = args
        .output
        .clone()
        .unwrap_or_else(|| args.raw.with_extension("json"));
    if out == args.raw {
        anyhow::bail!("the output would overwrite the raw capture: name it with -o");
    }
    let pending = PendingFile::create(&out)?;
    let (header, calls) = raw::read(BufReader::new(file))
        .with_context(|| format!("{} is not a rocsync raw capture", args.raw.display()))?;
    let resolved = resolve(&calls);
    let path = write_trace(
        pending,
        &calls,
        &resolved,
        &header,
        json!({ "mode": "convert", "raw": args.raw }),
    )?;
    eprintln!(
        "rocsync: {} calls, waits resolved: {}, unresolved: {}\n  trace: {}",
        calls.len(),
        resolved.waits_resolved,
        resolved.waits_unresolved,
        path.display()
    );
    Ok(0)
}
