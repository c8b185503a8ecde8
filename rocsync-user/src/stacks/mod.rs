//! Where each thread of a process is: every thread's Python stack and the blocked
//! thread's native stack, read out of process without stopping it (issue 62), for the
//! hang, stall and behind traces (`docs/stacks.md`).
//!
//! [`read`] runs the reader as a bounded child process ([`child`]) — `rocsync
//! read-stacks`, [`reader`] — and returns what it found as [`Stacks`]: the trace's
//! `stacks` object ([`Stacks::to_json`]), the program's own innermost frame
//! ([`Stacks::where_`]) and the blocked thread's frames as nested trace rows
//! ([`Stacks::rows`]).

mod bounds;
pub mod child;
mod model;
mod native;
mod place;
mod python;
pub mod reader;
mod rows;
mod tasks;

pub use child::{COMMAND, Reader};
pub use model::{Cut, NativeFrame, PyFrame, Stacks, Thread};
pub use place::python_like;
pub use rows::{NATIVE_CATEGORY, PYTHON_CATEGORY};

/// `pid`'s stacks, `blocked_tid` (a host tid, as the probes report it) the thread the
/// trace is for, read by a child of this binary under the default bounds (2 s, 1 GiB).
pub async fn read(pid: u32, blocked_tid: u32) -> Stacks {
    Reader::default().read(pid, blocked_tid).await
}

#[cfg(test)]
mod tests;
