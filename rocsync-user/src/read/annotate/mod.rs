//! `rocsync annotate`: merges what a rocsync capture resolved into a torch.profiler /
//! Kineto trace of the same process and time, so that HTA's critical path follows the
//! inter-stream waits the profiler could not name. CUDA: fills the `wait_on_*` fields
//! CUPTI left unresolved ([`cuda`]); ROCm: adds the sync rows Kineto's rocprofiler-sdk
//! backend never writes ([`rocm`]). Three things make it possible: one time base
//! ([`clock`]), which row is which call ([`matching`]), and rocsync's streams in the
//! profiler's numbering ([`streams`]).

mod capture;
mod clock;
mod cuda;
mod edit;
mod matching;
mod process;
mod profile;
mod rocm;
mod streams;
mod summary;

use std::{
    collections::{HashMap, HashSet},
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result, bail};
use rocsync_common::Op;

pub use summary::Summary;

use crate::{
    calls::resolve::Row,
    read::input::{Sniffed, decompressed, json_text, listed, open_regular, sniff},
};
use capture::Capture;
use process::Process;
use profile::{Flavour, Profile};
use streams::StreamMap;

/// The largest profiler trace read (decompressed, its blank runs cut): annotate holds
/// it whole, so it is held to the bound of what `report` holds (at 2 GiB, a 2 MB gzip
/// made it hold 2 GB); its events are bounded too (`profile::MAX_EVENTS`).
const MAX_TRACE: u64 = crate::read::input::MAX_HELD;
/// The longest string of a profiler trace read: its longest (kernel names, call stacks)
/// are kilobytes. The text is copied as written, so a longer one is refused, not cut, and
/// early: one string of 2 GB was held whole.
const MAX_TRACE_STRING: usize = 16 << 20;

/// What to annotate, as plain values.
#[derive(Clone, Debug)]
pub struct Settings {
    /// A profiler trace, or a directory of them (one per rank).
    pub trace: PathBuf,
    /// A raw capture (`--raw`), or a directory of them; matched to traces by pid.
    pub capture: PathBuf,
    /// The output file (a directory when `trace` is one) [default: beside each trace,
    /// `.annotated.json`].
    pub output: Option<PathBuf>,
    /// Replace an output file that exists (refused otherwise, as every command's `-o`).
    pub force: bool,
}

/// Annotates every trace named; one summary per process annotated.
pub fn annotate(s: &Settings) -> Result<Vec<Summary>> {
    if !s.trace.is_dir() {
        let capture = Capture::read(&s.capture)?;
        let out = s
            .output
            .clone()
            .unwrap_or_else(|| edit::default_output(&s.trace));
        return one(&s.trace, &capture, &s.capture, (&out, s.force));
    }
    let captures = captures(&s.capture)?;
    let mut summaries = Vec::new();
    for trace in listed(&s.trace, &[".json", ".json.gz"])? {
        if trace.to_string_lossy().contains(".annotated.") {
            continue;
        }
        let out = match &s.output {
            Some(dir) => dir.join(
                edit::default_output(&trace)
                    .file_name()
                    .context("a trace names no file")?,
            ),
            None => edit::default_output(&trace),
        };
        let profile = read_profile(&trace)?;
        let pids = profile.pids();
        let Some((path, capture)) = captures
            .iter()
            .find(|(_, c)| pids.iter().any(|&p| c.rows.contains_key(&(p as u32))))
        else {
            bail!(
                "no capture in {} traced pid {:?} of {}",
                s.capture.display(),
                pids,
                trace.display()
            );
        };
        summaries.extend(with_profile(
            &trace,
            profile,
            capture,
            path,
            (&out, s.force),
        )?);
    }
    if summaries.is_empty() {
        bail!(
            "{} holds no profiler trace (*.json, *.json.gz)",
            s.trace.display()
        );
    }
    Ok(summaries)
}

fn captures(path: &Path) -> Result<Vec<(PathBuf, Capture)>> {
    if !path.is_dir() {
        return Ok(vec![(path.to_path_buf(), Capture::read(path)?)]);
    }
    let all: Result<Vec<_>> = listed(path, &[".jsonl", ".jsonl.gz"])?
        .into_iter()
        .map(|p| Capture::read(&p).map(|c| (p, c)))
        .collect();
    let all = all?;
    if all.is_empty() {
        bail!(
            "{} holds no raw capture (*.jsonl, *.jsonl.gz)",
            path.display()
        );
    }
    Ok(all)
}

fn read_profile(path: &Path) -> Result<Profile> {
    let file = open_regular(path, "annotate reads a profiler trace file")?;
    let mut input = decompressed(file)?;
    let shown = path.display();
    if sniff(input.as_mut())? == Sniffed::Raw {
        bail!(
            "{shown} is rocsync's raw capture, not a profiler's trace: give it as --capture, \
             and the torch.profiler trace of the same run as the trace"
        );
    }
    let text = json_text(input, (MAX_TRACE, MAX_TRACE_STRING), &shown.to_string())?;
    let profile = Profile::parse(text).with_context(|| format!("{shown}"))?;
    if profile.from_rocsync {
        bail!(
            "{shown} is rocsync's own trace, not a profiler's: annotate merges rocsync's raw \
             capture (--raw) into a torch.profiler trace of the same run"
        );
    }
    Ok(profile)
}

/// `out`: the annotated trace's path, and whether it may replace a file.
fn one(
    trace: &Path,
    capture: &Capture,
    capture_path: &Path,
    out: (&Path, bool),
) -> Result<Vec<Summary>> {
    let profile = read_profile(trace)?;
    with_profile(trace, profile, capture, capture_path, out)
}

fn with_profile(
    trace: &Path,
    profile: Profile,
    capture: &Capture,
    capture_path: &Path,
    (out, force): (&Path, bool),
) -> Result<Vec<Summary>> {
    crate::calls::emit::files::refuse_existing(out, force)?;
    profile
        .check_not_empty()
        .with_context(|| format!("{}", trace.display()))?;
    let pids: Vec<i64> = profile
        .pids()
        .into_iter()
        .filter(|&p| u32::try_from(p).is_ok_and(|p| capture.rows.contains_key(&p)))
        .collect();
    if pids.is_empty() {
        bail!(
            "the capture {} traced pid {:?}, the profiler trace {} is of pid {:?}: not the same process",
            capture_path.display(),
            capture.pids(),
            trace.display(),
            profile.pids()
        );
    }
    let (mut edits, mut added, mut summaries) = (Vec::new(), Vec::new(), Vec::new());
    for pid in pids {
        let mut s = Summary {
            trace: trace.to_path_buf(),
            capture: capture_path.to_path_buf(),
            output: out.to_path_buf(),
            flavour: profile.flavour.name(),
            pid,
            ..Default::default()
        };
        let rows = &capture.rows[&(pid as u32)];
        let mut p = process(&profile, pid, rows, capture, &mut s)
            .with_context(|| format!("pid {pid} of {}", trace.display()))?;
        match profile.flavour {
            Flavour::Cuda => edits.extend(cuda::fill(&p, &mut s)),
            Flavour::Rocm => added.extend(rocm::add(&mut p, &mut s)),
        }
        s.streams.learned = p.streams.len() - s.streams.numbered_new;
        s.streams.map = p
            .streams
            .pairs()
            .into_iter()
            .map(|((d, i), (pd, ps))| format!("{d}:{i} -> {pd}:{ps}"))
            .collect();
        summaries.push(s);
    }
    edit::write(out, force, |w| edit::assemble(&profile, edits, &added, w))?;
    Ok(summaries)
}

/// Aligns the clocks, matches the calls and learns the streams of one process.
fn process<'a>(
    profile: &'a Profile,
    pid: i64,
    rows: &'a [Row],
    capture: &Capture,
    s: &mut Summary,
) -> Result<Process<'a>> {
    let mine: Vec<&profile::RuntimeRow> = profile.runtime.iter().filter(|r| r.pid == pid).collect();
    // Launches and copies are probed only when asked (`--probe launches`): the profiler's
    // rows of them count only against a capture that has them.
    let captured: HashSet<Op> = rows.iter().map(|r| r.call.api.op()).collect();
    let hooked: Vec<&profile::RuntimeRow> = mine
        .iter()
        .copied()
        .filter(|r| {
            r.op.is_some_and(|op| !op.launches() || captured.contains(&op))
        })
        .collect();
    let mut prof_series = clock::Series::new();
    for r in &hooked {
        if let Some(op) = r.op {
            prof_series.entry((r.tid, op)).or_default().push(r.start_ns);
        }
    }
    let mut call_series = clock::Series::new();
    for r in rows {
        call_series
            .entry((r.call.tid as i64, r.call.api.op()))
            .or_default()
            .push(capture.epoch_ns(r.call.enter_ns));
    }
    for v in prof_series.values_mut().chain(call_series.values_mut()) {
        v.sort_unstable();
    }
    let alignment = clock::align(&prof_series, &call_series)?;
    let matches = matching::pair(&hooked, rows, |ns| capture.epoch_ns(ns), &alignment);
    s.clock = summary::Clock {
        offset_ns: alignment.offset_ns,
        drift_ppb: alignment.ppb.round(),
        pairs: matches.residuals.len(),
        residual_p50_ns: matches
            .residuals
            .get(matches.residuals.len() / 2)
            .copied()
            .unwrap_or(0),
        residual_max_ns: matches.residuals.last().copied().unwrap_or(0),
    };
    s.calls = summary::Calls {
        profiler_rows: hooked.len(),
        matched: matches.to_rocsync.len(),
        rows_unmatched: matches.rows_unmatched,
        calls_unmatched: matches.calls_unmatched,
    };
    let by_corr: HashMap<u64, &Row> = rows.iter().map(|r| (r.call.correlation, r)).collect();
    let streams = StreamMap::learn(profile, &matches, &by_corr);
    s.streams.evidence = streams.evidence;
    s.streams.conflicts = streams.conflicts;
    Ok(Process {
        profile,
        pid,
        ours: mine.iter().map(|r| r.correlation).collect(),
        matches,
        rows: by_corr,
        streams,
    })
}
