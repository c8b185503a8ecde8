//! What the daemon said of a trace it took unasked, in its `rocsync.parameters`: a hang
//! (`hang`), a stall (`stall`), a rank behind (`behind`) or stuck (`stuck`) — the slow call,
//! what it waits on step by step, its collective, the ranks behind, and where the program
//! was (`where`, `stacks`: see docs/analysis.md). Every list is read within a bound and
//! what is past it counted; a field of the wrong type is left out, never an error.

pub(super) mod parameters;

use serde::Serialize;

pub(super) use crate::read::report::word::parameters::Parameters;
use crate::read::report::{
    load::fields::Scalar,
    word::parameters::{CollIn, NativeIn, PyIn, StepIn, ThreadIn, WordIn},
};

/// The daemon's word, as the report shows it (`trigger` in `--json`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Word {
    /// `hang`, `stall`, `behind` or `stuck`.
    pub kind: &'static str,
    pub pid: Option<u64>,
    pub tid: Option<u64>,
    /// The slow call (a hang's, a stall's).
    pub api: Option<String>,
    /// How long it was blocked: a hang's when found, a stall's in all.
    pub blocked_ms: Option<f64>,
    /// How its trace ended (`returned`, `exited`, `bound`).
    pub ended: Option<String>,
    /// What the call waits on, step by step.
    pub waits_on: Vec<Step>,
    /// The collective it waits in (hang, stall), or is at (behind, stuck).
    pub collective: Option<Collective>,
    /// The ranks behind it (hang, stall), the furthest first.
    pub behind: Vec<Behind>,
    /// The rank that waits for this one (behind).
    pub waited_by: Option<WaitedBy>,
    /// The innermost frame of the program's own code on the blocked thread.
    #[serde(rename = "where")]
    pub place: Option<String>,
    pub stacks: Option<Stacks>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Collective {
    pub api: Option<String>,
    pub seq: u64,
    pub comm: Option<String>,
    pub rank: Option<u64>,
    pub nranks: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Behind {
    pub pid: Option<u64>,
    pub rank: Option<u64>,
    pub seq: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WaitedBy {
    pub pid: Option<u64>,
    pub api: Option<String>,
    pub collective: Option<Collective>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Stacks {
    pub read_at_unix_us: Option<u64>,
    pub took_ms: Option<f64>,
    pub python_version: Option<String>,
    pub error: Option<String>,
    /// The blocked thread first, as the daemon wrote them.
    pub threads: Vec<Thread>,
    /// What the daemon's bounds left out (`cut` in the trace), and the report's own.
    pub cut_threads: u64,
    pub cut_frames: u64,
    pub cut_strings: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Thread {
    pub tid: Option<u64>,
    pub name: Option<String>,
    pub blocked: bool,
    /// Innermost first: `function (file:line)`, the file's last component.
    pub python_stack: Option<Vec<String>>,
    pub python_error: Option<String>,
    /// Innermost first: `symbol (object+offset)`, or the address where unsymbolized.
    pub native_stack: Option<Vec<String>>,
    pub native_error: Option<String>,
}

impl Thread {
    /// Its frames, innermost first: Python's, then the native ones under them.
    pub fn frames(&self) -> impl Iterator<Item = &String> {
        let py = self.python_stack.iter().flatten();
        py.chain(self.native_stack.iter().flatten())
    }
}

impl Stacks {
    /// The thread the trace is for: the blocked one, else the first.
    pub fn blocked(&self) -> Option<&Thread> {
        (self.threads.iter().find(|t| t.blocked)).or(self.threads.first())
    }
}

fn text(v: &Scalar) -> Option<String> {
    v.as_str().map(String::from)
}

fn collective(c: &CollIn) -> Option<Collective> {
    Some(Collective {
        api: crate::read::report::load::fields::api_name(&c.api),
        seq: c.seq.as_u64()?,
        comm: crate::read::report::load::fields::hex(&c.comm),
        rank: c.rank.as_u64(),
        nranks: c.nranks.as_u64(),
    })
}

/// A step of the chain, as the daemon wrote it: the stream or event it is at, and what
/// it found there (a collective, the event waited on, the stream that recorded it, or
/// why it cannot say).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Step {
    pub stream: Option<String>,
    pub event: Option<String>,
    pub collective: Option<Collective>,
    pub waited_on_event: Option<String>,
    pub recorded_on_stream: Option<String>,
    /// What the stream waited on, said when nothing the probes saw.
    pub waited: Option<String>,
    pub unknown: Option<String>,
}

impl Step {
    /// As a line: `stream 0x2: ncclAllReduce #21 of comm 0x9d…`.
    pub fn said(&self) -> String {
        let mut at = Vec::new();
        at.extend(self.stream.as_ref().map(|s| format!("stream {s}")));
        at.extend(self.event.as_ref().map(|e| format!("event {e}")));
        let what = if let Some(c) = &self.collective {
            let api = c.api.as_deref().unwrap_or("collective");
            let comm = c.comm.as_deref().unwrap_or("unknown");
            format!("{api} #{} of comm {comm}", c.seq)
        } else if let Some(e) = &self.waited_on_event {
            format!("waited on event {e}")
        } else if let Some(s) = &self.recorded_on_stream {
            format!("recorded on stream {s}")
        } else if let Some(why) = &self.unknown {
            format!("unknown: {why}")
        } else if let Some(w) = &self.waited {
            format!("waited on {w}")
        } else {
            "?".into()
        };
        format!("{}: {what}", at.join(" "))
    }
}

fn step(s: &StepIn) -> Step {
    Step {
        stream: text(&s.stream),
        event: text(&s.event),
        collective: s.collective.0.as_ref().and_then(collective),
        waited_on_event: text(&s.waited_on_event),
        recorded_on_stream: text(&s.recorded_on_stream),
        waited: text(&s.waited),
        unknown: text(&s.unknown),
    }
}

/// `step (train.py:142)`: the file's last component, as `where` names it.
fn py_frame(f: &PyIn) -> String {
    let file = f.file.as_str().unwrap_or("?");
    let file = file.rsplit('/').next().unwrap_or(file);
    let func = f.function.as_str().unwrap_or("?");
    match f.line.as_u64() {
        Some(l) => format!("{func} ({file}:{l})"),
        None => format!("{func} ({file})"),
    }
}

/// `clock_nanosleep (libc.so.6+0x1234)`, or `0x7f3a… (libc.so.6)` unsymbolized.
fn native_frame(f: &NativeIn) -> String {
    let object = f.object.as_str().map(|o| o.rsplit('/').next().unwrap_or(o));
    let place = match (object, f.offset.as_str()) {
        (Some(o), Some(off)) => format!(" ({o}+{off})"),
        (Some(o), None) => format!(" ({o})"),
        _ => String::new(),
    };
    let symbolized = f.symbolized != Scalar::Bool(false);
    match f.symbol.as_str().filter(|_| symbolized) {
        Some(s) => format!("{s}{place}"),
        None => format!("{}{place}", f.address.as_str().unwrap_or("?")),
    }
}

fn thread(t: &ThreadIn, cut: &mut u64) -> Thread {
    *cut += t.python_stack.past + t.native_stack.past;
    let py = (t.python_stack.present).then(|| t.python_stack.kept.iter().map(py_frame).collect());
    let native =
        (t.native_stack.present).then(|| t.native_stack.kept.iter().map(native_frame).collect());
    Thread {
        tid: t.tid.as_u64(),
        name: text(&t.name),
        blocked: t.blocked == Scalar::Bool(true),
        python_stack: py,
        python_error: text(&t.python_error),
        native_stack: native,
        native_error: text(&t.native_error),
    }
}

impl Word {
    /// The word of `kind`, and how many elements of its lists the report's bounds left
    /// out.
    pub(super) fn of(kind: &'static str, w: WordIn) -> (Word, u64) {
        let mut cut = w.waits_on.past + w.behind.past;
        let own = || {
            Some(Collective {
                api: crate::read::report::load::fields::api_name(&w.api),
                seq: w.seq.as_u64()?,
                comm: crate::read::report::load::fields::hex(&w.comm),
                rank: w.rank.as_u64(),
                nranks: w.nranks.as_u64(),
            })
        };
        let coll = match kind {
            "behind" | "stuck" => own(),
            _ => w.collective.0.as_ref().and_then(collective),
        };
        let stacks = w.stacks.0.map(|s| {
            let mut frames = 0;
            let threads = s
                .threads
                .kept
                .iter()
                .map(|t| thread(t, &mut frames))
                .collect();
            let c = s.cut.0.unwrap_or_default();
            let n = |v: &Scalar| v.as_u64().unwrap_or(0);
            cut += s.threads.past + frames;
            Stacks {
                read_at_unix_us: s.read_at_unix_us.as_u64(),
                took_ms: s.took_ms.as_f64(),
                python_version: text(&s.python_version),
                error: text(&s.error),
                threads,
                cut_threads: n(&c.threads) + s.threads.past,
                cut_frames: n(&c.frames) + frames,
                cut_strings: n(&c.strings),
            }
        });
        let word = Word {
            kind,
            pid: w.pid.as_u64(),
            tid: w.tid.as_u64(),
            api: (kind == "hang" || kind == "stall")
                .then(|| text(&w.api))
                .flatten(),
            blocked_ms: w.blocked_ms_when_found.as_f64().or(w.duration_ms.as_f64()),
            ended: text(&w.ended),
            waits_on: w.waits_on.kept.iter().map(step).collect(),
            collective: coll,
            behind: (w.behind.kept.iter())
                .map(|b| Behind {
                    pid: b.pid.as_u64(),
                    rank: b.rank.as_u64(),
                    seq: b.seq.as_u64(),
                })
                .collect(),
            waited_by: w.waited_by.0.as_ref().map(|b| WaitedBy {
                pid: b.pid.as_u64(),
                api: text(&b.api),
                collective: b.collective.0.as_ref().and_then(collective),
            }),
            place: text(&w.place),
            stacks,
        };
        (word, cut)
    }
}

impl Parameters {
    /// The word of the trace (a trace is taken for one reason), with what its bounds
    /// left out, counted.
    pub(in crate::read::report) fn word(self) -> Option<(Word, u64)> {
        let words = [
            ("hang", self.hang),
            ("stall", self.stall),
            ("behind", self.behind),
            ("stuck", self.stuck),
        ];
        let (kind, w) = words.into_iter().find_map(|(k, w)| w.0.map(|w| (k, w)))?;
        Some(Word::of(kind, w))
    }
}

#[cfg(test)]
mod tests;
