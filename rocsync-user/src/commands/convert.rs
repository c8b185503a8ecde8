//! `rocsync convert RAW`: replay an archived raw capture through the same resolve and
//! emit stages as the live capture, streaming (memory bounded by live state, not by the
//! file's size).

use std::{collections::BTreeMap, fs::File, io::BufReader};

use anyhow::{Context as _, Result, bail};
use serde_json::json;

use crate::{
    cli::ConvertArgs,
    emit::{
        outputs::{Outputs, Report},
        processes::ProcessInfo,
        raw::{Item, Reader},
    },
    pipeline::Pipeline,
};

pub fn convert(args: ConvertArgs) -> Result<i32> {
    let file =
        File::open(&args.raw).with_context(|| format!("cannot open {}", args.raw.display()))?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        bail!("{} is not a regular file", args.raw.display());
    }
    let out = args
        .output
        .clone()
        .unwrap_or_else(|| args.raw.with_extension("json"));
    if same_file(&out, &meta) {
        bail!("the output would overwrite the raw capture: name another with -o");
    }
    let mut reader = Reader::new(BufReader::new(file))
        .with_context(|| format!("{} is not a rocsync raw capture", args.raw.display()))?;
    let mut outputs = Outputs::at(out, false, None)?;
    let header = reader.header.clone();
    let mut pipeline = Pipeline::new(outputs.open(header.clone())?, header.from_start);
    let mut processes = BTreeMap::new();
    while let Some(item) = reader
        .next_item()
        .with_context(|| format!("reading {}", args.raw.display()))?
    {
        if let Item::Trailer(t) = &item
            && let Some(p) = t.processes.as_object()
        {
            processes = p
                .iter()
                .filter_map(|(pid, v)| Some((pid.parse().ok()?, ProcessInfo::from_json(v))))
                .collect();
        }
        pipeline.replay(item);
        if let Some(e) = pipeline.take_error() {
            return Err(anyhow::Error::from(e).context("writing the trace"));
        }
    }
    let (sink, stats) = pipeline.finish().context("writing the trace")?;
    let report = Report {
        parameters: json!({ "mode": "convert", "raw": args.raw }),
        libraries: Vec::new(),
        single_stepped: Vec::new(),
        processes,
    };
    outputs.finish(sink, &stats, report)?;
    Ok(0)
}

/// Whether `path` names the file `meta` describes (a different spelling included).
fn same_file(path: &std::path::Path, meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino())
}
