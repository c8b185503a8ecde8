//! Resolution: each call, in correlation order, becomes a [`Row`] — the wait rule ([`wait`])
//! names the record a wait depends on or says why it cannot, and each stream wait over
//! HSA is linked to the barrier packet it submitted ([`barrier`]). Pure: no I/O.
//!
//! Per process:
//! - a wait (`*StreamWaitEvent*`, `*EventSynchronize`, `*EventQuery`) on event E at
//!   correlation W resolves to the successful `*EventRecord*` of E with the greatest
//!   correlation R < W, unless a successful `*EventDestroy(E)` lies between R and W;
//! - a record that returned an error is no producer; a failed wait is still a row;
//! - a wait whose latest record may be lost, was filtered, or predates the capture is
//!   unresolved with that reason, never resolved to an older record;
//! - streams map to devices through `*StreamCreate*` (the creating thread's device, which
//!   starts at 0 and moves with `*SetDevice`), and to small per-device indices.

mod barrier;
mod row;
mod wait;

pub use barrier::Barriers;
pub use row::{BarrierRef, Producer, Row, SyncKind, Unresolved};
pub use wait::{Resolver, sync_kind};
