//! Every Python thread's stack, read with py-spy's library in its non-blocking mode: the
//! interpreter's thread states and frames copied with `process_vm_readv`, the target
//! never stopped nor ptrace-attached. Stacks are matched to threads by their tid in the
//! process's own PID namespace (Python 3.11+ keeps it), mapped to the host's.

use std::collections::HashMap;

use py_spy::{Config, PythonSpy, config::LockingStrategy};

use super::{
    model::{Cut, PyFrame},
    tasks,
};

/// What the Python read found.
#[derive(Debug, Default)]
pub(super) struct PythonStacks {
    pub version: Option<String>,
    /// Innermost first, by host tid.
    pub by_tid: HashMap<u32, Vec<PyFrame>>,
    /// Python threads whose OS thread is unknown (before 3.11 py-spy cannot tell without
    /// stopping the process) or gone.
    pub unmatched: usize,
    /// Why the interpreter could not be read (`unreadable: …`).
    pub error: Option<String>,
}

pub(super) fn read(pid: u32, cut: &mut Cut) -> PythonStacks {
    let config = Config {
        blocking: LockingStrategy::NonBlocking,
        native: false,
        // Names come from the kernel (`comm`): no walk of the threading module's dicts.
        collect_thread_names: false,
        ..Config::default()
    };
    let mut spy = match PythonSpy::new(pid as py_spy::Pid, &config) {
        Ok(spy) => spy,
        Err(e) => return unreadable(e, cut),
    };
    let version = spy.version.to_string();
    let traces = match spy.get_stack_traces() {
        Ok(traces) => traces,
        Err(e) => {
            let mut found = unreadable(e, cut);
            found.version = Some(version);
            return found;
        }
    };
    let host = tasks::namespace_tids(pid);
    let mut found = PythonStacks {
        version: Some(version),
        ..PythonStacks::default()
    };
    for trace in traces {
        let Some(tid) = trace.os_thread_id.and_then(|t| host.get(&t)) else {
            found.unmatched += 1;
            continue;
        };
        let frames = cut.frames(trace.frames);
        let frames = frames
            .into_iter()
            .map(|f| PyFrame {
                function: cut.string(f.name),
                file: cut.string(f.filename),
                line: i64::from(f.line),
            })
            .collect();
        found.by_tid.insert(*tid, frames);
    }
    found
}

fn unreadable(e: anyhow::Error, cut: &mut Cut) -> PythonStacks {
    PythonStacks {
        error: Some(cut.string(format!("unreadable: {e:#}"))),
        ..PythonStacks::default()
    }
}
