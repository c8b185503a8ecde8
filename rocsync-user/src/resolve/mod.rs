//! Flush-time resolution: a pure function from captured calls to trace rows.
//!
//! Runs over all calls of a capture ordered by correlation id (never at arrival: records
//! from different threads and CPUs arrive out of order). Per process:
//! - a wait (`hipStreamWaitEvent*`, `hipEventSynchronize`) on event E at correlation W
//!   resolves to the successful `hipEventRecord*` of E with the greatest correlation
//!   R < W, unless a successful `hipEventDestroy(E)` lies between R and W;
//! - a record that returned an error is no producer; a failed wait is still a row;
//! - streams map to devices through `hipStreamCreate*` (the creating thread's current
//!   device, from `hipSetDevice`/`hipGetDevice`), and to small per-device indices.

mod resolver;
mod row;

pub use resolver::{Resolver, changes_state, resolve};
pub use row::{Producer, Resolved, Row, SyncKind};
