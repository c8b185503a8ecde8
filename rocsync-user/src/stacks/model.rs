//! What a read of a process's stacks found: the `stacks` object of a hang, stall or
//! behind trace (`docs/stacks.md`), as the reader prints it and the daemon keeps it.

use serde::{Deserialize, Serialize};

/// Every thread's stacks of one process at one moment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stacks {
    pub pid: u32,
    pub read_at_unix_us: u64,
    pub took_ms: f64,
    /// The interpreter's version; `None`: not a Python process, or not readable as one.
    pub python_version: Option<String>,
    /// The executable as the process sees it (what `where` calls the program's own).
    pub executable: Option<String>,
    /// Why nothing could be read (the process is gone, not allowed, the reader died).
    pub error: Option<String>,
    /// The blocked thread first, then the others by tid.
    pub threads: Vec<Thread>,
    pub cut: Cut,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Thread {
    /// The host's tid (what the probes report), whatever PID namespace the process is in.
    pub tid: u32,
    /// `/proc/PID/task/TID/comm`.
    pub name: String,
    /// The thread the trace is for.
    pub blocked: bool,
    /// Innermost first; `None`: no Python frames known on this thread.
    pub python_stack: Option<Vec<PyFrame>>,
    pub python_error: Option<String>,
    /// Innermost first; read for the blocked thread only.
    pub native_stack: Option<Vec<NativeFrame>>,
    /// How it was read: blocked in a system call, or a running thread's perf sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native_read: Option<String>,
    pub native_error: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PyFrame {
    pub function: String,
    pub file: String,
    pub line: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NativeFrame {
    /// The instruction pointer (innermost) or return address, `0x…`.
    pub address: String,
    pub symbol: Option<String>,
    /// The mapped file, as the process sees its path.
    pub object: Option<String>,
    /// `address` in the object's own addresses (what `addr2line -e OBJECT` takes).
    pub offset: Option<String>,
    pub symbolized: bool,
    /// Unwound past a frame pointer found by scanning the stack, not from CFI alone
    /// (written only when true).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub scanned: bool,
    /// Its return address was a return probe's trampoline: named by its caller's call
    /// instruction, `address` the called function's start (written only when true).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub named_by_call: bool,
}

/// What the bounds left out, counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cut {
    pub threads: u64,
    pub frames: u64,
    pub strings: u64,
}

impl Stacks {
    /// The `stacks` object of a trace's parameters.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// The thread the trace is for, if it was read.
    pub fn blocked(&self) -> Option<&Thread> {
        self.threads.iter().find(|t| t.blocked)
    }

    /// A read that found nothing, saying why.
    pub fn failed(pid: u32, why: String) -> Self {
        Self {
            pid,
            error: Some(why),
            ..Self::default()
        }
    }
}

impl NativeFrame {
    pub fn hex(value: u64) -> String {
        format!("{value:#x}")
    }
}
