//! A rank of the job as the report shows it: where it is, how, and the stack of its
//! blocked thread; and a trace the report read. What the job is put together of
//! (`mod.rs`), aligned by (`align.rs`) and judged on (`verdict.rs`).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::read::report::{job::ranks::Sig, word::Stacks};

/// One rank of a communicator, in one trace.
#[derive(Clone, Debug, Serialize)]
pub(in crate::read::report) struct Rank {
    pub rank: Option<u64>,
    /// The node whose upload it is: the first folder of its path, if any.
    pub host: Option<String>,
    pub pid: u64,
    pub file: String,
    pub nranks: Option<u64>,
    pub collectives: usize,
    /// Its collectives by operation, named as NCCL RAS names them (`AllReduce`).
    pub collective_counts: BTreeMap<String, u64>,
    /// Where it is: the collective it waits in or is at (the daemon's word), else the
    /// last one its trace holds; aligned.
    pub at: u64,
    /// `blocked`, `stalled`, `behind`, `stuck`, or `last_row`.
    pub how: &'static str,
    /// The collective it waits in, as the daemon named it.
    pub api: Option<String>,
    /// The innermost frame of its own code, as the daemon read it.
    #[serde(rename = "where")]
    pub place: Option<String>,
    /// The stack of its blocked (or lagging) thread.
    pub stack: Option<Stack>,
    #[serde(skip)]
    pub calls: Vec<(u64, Sig)>,
}

/// A trace the report read.
#[derive(Debug, Serialize)]
pub(in crate::read::report) struct Trace {
    pub file: String,
    pub host: Option<String>,
    pub pids: Vec<u64>,
    pub collectives: usize,
    /// Why the daemon took it (`hang`, `stall`, `behind`, `stuck`), if it did.
    pub trigger: Option<&'static str>,
    /// The rank its process said it is (`distributedInfo`), for one without collectives.
    pub rank: Option<u64>,
}

/// The stack of a rank's blocked (or lagging) thread, innermost first.
#[derive(Clone, Debug, Serialize)]
pub(in crate::read::report) struct Stack {
    pub tid: Option<u64>,
    pub name: Option<String>,
    /// Python's frames, then the native ones under them.
    pub frames: Vec<String>,
    /// Why a part could not be read.
    pub errors: Vec<String>,
}

impl Stack {
    pub(in crate::read::report) fn of(s: &Stacks) -> Option<Stack> {
        let t = s.blocked();
        let mut errors: Vec<String> = s.error.iter().cloned().collect();
        if let Some(t) = t {
            errors.extend(t.python_error.iter().map(|e| format!("python: {e}")));
            errors.extend(t.native_error.iter().map(|e| format!("native: {e}")));
        }
        Some(Stack {
            tid: t.and_then(|t| t.tid),
            name: t.and_then(|t| t.name.clone()),
            frames: t.map(|t| t.frames().cloned().collect()).unwrap_or_default(),
            errors,
        })
    }
}
