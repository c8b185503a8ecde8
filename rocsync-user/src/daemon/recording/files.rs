//! A trace's files: named, opened in the state directory with the pipeline into them,
//! the processes they hold identified, and its client told what was written.

use std::{collections::BTreeMap, path::Path};

use anyhow::Result;

use crate::daemon::{
    outputs::statedir,
    serving::protocol::{self, Reply},
    tracking::pods::Pods,
};
use crate::{
    calls::{
        emit::{
            outputs::{CaptureSink, Outputs},
            processes::{ProcessInfo, Written},
            raw::Header,
        },
        pipeline::Pipeline,
    },
    os::{clock, environ},
};

/// Opens a trace's outputs in the state directory and the pipeline into them.
pub(crate) fn open(
    state_dir: &Path,
    stem: &str,
    id: u64,
    output: Option<&Path>,
) -> Result<(Pipeline<CaptureSink>, Outputs)> {
    // Made again should anyone have removed them, by the rules of the start.
    statedir::make(state_dir)?;
    let mut outputs = match output {
        Some(dyno) => Outputs::never_replacing(dyno.to_path_buf())?,
        None => {
            let path = statedir::traces(state_dir).join(format!("{stem}.json"));
            Outputs::at(path, false, None)?
        }
    };
    outputs.said_as(format!("rocsync daemon: trace {id}"));
    let header = Header {
        clock_offset_ns: clock::realtime_offset_ns(),
        start_ns: clock::monotonic_ns() as u64,
        command: vec![format!("rocsync daemon: trace {id}")],
        from_start: false,
    };
    let mut sink = outputs.open(header)?;
    sink.trace_mut().always_per_process = output.is_some();
    let mut pipeline = Pipeline::new(sink, false);
    pipeline.begins_mid_call();
    Ok((pipeline, outputs))
}

/// The answer to a trace's client: the files written and the process each holds.
pub(crate) fn answer(written: Result<Vec<Written>>) -> Reply {
    match written {
        Ok(w) => Reply::Written(protocol::Written {
            files: w.iter().map(|w| w.path.display().to_string()).collect(),
            pids: w.iter().map(|w| w.pid).collect(),
        }),
        Err(e) => Reply::refused(&e.context("writing the traces")),
    }
}

/// What each of `pids` says of itself now (name, rank in a distributed job), for its
/// trace's `distributedInfo` (without it, HTA takes every rank's trace for rank 0), and
/// its pod, as read when it was first tracked.
pub(crate) fn identities(
    pids: impl IntoIterator<Item = u32>,
    pods: &Pods,
) -> BTreeMap<u32, ProcessInfo> {
    pids.into_iter()
        .filter_map(|p| {
            let mut info = environ::read(p)?.info;
            info.pod = pods.pod(p).and_then(|pod| serde_json::to_value(pod).ok());
            Some((p, info))
        })
        .collect()
}

/// `<name>-<UTC time>-<id>`: ids start again at a restart; the time keeps names, and
/// upload keys, unique.
pub(crate) fn numbered_stem(name: &str, id: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!("{name}-{}-{id}", crate::os::clock::utc_stamp(now.as_secs()))
}
