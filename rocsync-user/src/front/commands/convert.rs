//! `rocsync convert RAW`: replay an archived raw capture through the same resolve and
//! emit stages as the live capture, streaming (memory bounded by live state, not by the
//! file's size).

use std::collections::BTreeMap;

use anyhow::{Context as _, Result, bail};
use serde_json::json;

use crate::{
    calls::{
        emit::{
            outputs::{Outputs, Report},
            processes::ProcessInfo,
            raw::{Item, Reader},
        },
        pipeline::Pipeline,
    },
    front::cli::ConvertArgs,
    read::input::{decompressed, open_regular},
};

/// The exit status when the trace is written but the raw capture had no trailer (as
/// gzip's warning status): what it holds is converted, and a script still sees it is not
/// the whole capture.
pub(super) const TRUNCATED: i32 = 2;

pub fn convert(args: ConvertArgs) -> Result<i32> {
    let file = open_regular(&args.raw, "convert reads a raw capture file")?;
    let meta = file.metadata()?;
    let out = args.output.clone().unwrap_or_else(|| {
        // r.jsonl → r.json, and r.jsonl.gz → r.json too.
        let raw = &args.raw;
        let plain = if raw.extension().is_some_and(|e| e == "gz") {
            raw.with_extension("")
        } else {
            raw.clone()
        };
        plain.with_extension("json")
    });
    if same_file(&out, &meta) {
        bail!("the output would overwrite the raw capture: name another with -o");
    }
    crate::calls::emit::files::refuse_existing(&out, args.force)?;
    let mut input = decompressed(file)?;
    refuse_a_trace(&mut input, &args.raw)?;
    let mut reader = Reader::new(input)
        .with_context(|| format!("{} is not a rocsync raw capture", args.raw.display()))?;
    let mut outputs = Outputs::at(out, false, None)?;
    let header = reader.header.clone();
    let mut pipeline = Pipeline::new(outputs.open(header.clone())?, header.from_start);
    let mut processes = BTreeMap::new();
    let mut trailer = false;
    while let Some(item) = reader
        .next_item()
        .with_context(|| format!("reading {}", args.raw.display()))?
    {
        trailer |= matches!(item, Item::Trailer(_));
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
    if !trailer {
        pipeline.stats.truncated = Some(match reader.cut_at() {
            Some(n) => format!("the raw capture ends inside line {n}, with no trailer"),
            None => "the raw capture ends with no trailer".into(),
        });
    }
    let (sink, stats) = pipeline.finish().context("writing the trace")?;
    let report = Report {
        parameters: json!({ "mode": "convert", "raw": args.raw }),
        libraries: Vec::new(),
        single_stepped: Vec::new(),
        processes,
    };
    outputs.finish(sink, &stats, report)?;
    if stats.truncated.is_some() {
        crate::say!(
            "rocsync: warning: {} is truncated (no trailer: its capture did not end); the \
             trace holds the {} calls before the cut, and no count of what the capture lost",
            args.raw.display(),
            stats.calls()
        );
        return Ok(TRUNCATED);
    }
    Ok(0)
}

/// A Kineto trace (what `-o` writes, or another profiler's) given for a raw capture is
/// said to be one, rather than failing on its first line's JSON.
fn refuse_a_trace(input: &mut Box<dyn std::io::BufRead>, path: &std::path::Path) -> Result<()> {
    if crate::read::input::sniff(input.as_mut())? == crate::read::input::Sniffed::Trace {
        bail!(
            "{} is a Kineto trace, not a raw capture: convert reads the JSON Lines that --raw \
             writes; the trace itself opens as it is in Perfetto (ui.perfetto.dev) or HTA",
            path.display()
        );
    }
    Ok(())
}

/// Whether `path` names the file `meta` describes (a different spelling included).
fn same_file(path: &std::path::Path, meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino())
}
