//! A trace read into the report's [`Capture`](super::Capture): as it streams by
//! (`stream.rs`), field by field (`fields.rs`), within bounds (`held.rs`), from a Kineto
//! trace (`kineto/`) or a raw capture replayed (`raw.rs`), with progress said on a long
//! one (`progress.rs`).

pub(super) mod fields;
pub(super) mod held;
pub(super) mod kineto;
pub(super) mod progress;
pub(super) mod raw;
pub(super) mod stream;
