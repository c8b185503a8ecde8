//! One door after a trace is written: every place a written trace goes — the store it
//! is uploaded to, the state directory that keeps it within retention's limits — is a
//! [`Destination`], and `destinations.rs` hands each trace to every one in turn. A new
//! store (OTLP, another bucket) is one file implementing it, and one line in
//! `Destinations::all`.

use std::collections::BTreeMap;

use crate::daemon::outputs::retention::Owners;

/// A trace the daemon finished: its files and whose each is, or none (it failed).
pub(crate) struct Trace<'a> {
    pub files: &'a [String],
    /// The process each file holds; `None`: several.
    pub pids: &'a [Option<u32>],
    /// The traced processes' pods (namespace, name).
    pub pods: &'a BTreeMap<u32, (String, String)>,
    /// The traced processes' jobs (their world communicator's id).
    pub jobs: &'a BTreeMap<u32, String>,
    /// The traced processes' users.
    pub owners: &'a Owners,
    /// Writing it failed: nothing was written (a full disk, maybe).
    pub failed: bool,
}

/// Where a written trace goes.
pub(crate) trait Destination {
    /// Takes `trace`; returns how many traces waiting for another destination (an
    /// upload) it removed, lost to it.
    fn take(&mut self, trace: &Trace<'_>) -> u64;

    /// `n` traces waiting for this destination were removed before it had them.
    fn lost(&mut self, _n: u64) {}

    /// Says what its log held back (at the daemon's prune tick).
    fn flush(&mut self) {}

    /// Says all its log held back (the daemon stops).
    fn say_held(&mut self) {}
}
