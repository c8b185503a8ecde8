//! One process of a profiler trace as annotate works on it: built by the command
//! ([`super`]), filled by each flavour's pass ([`super::cuda`], [`super::rocm`]), which
//! import it from here, not from the command.

use std::collections::{HashMap, HashSet};

use super::{matching::Matches, profile::Profile, streams::StreamMap};
use crate::calls::resolve::Row;

/// One process of a profiler trace with what annotate learned of it.
pub(crate) struct Process<'a> {
    pub(super) profile: &'a Profile,
    pub(super) pid: i64,
    /// The correlations of this process's runtime rows.
    pub(super) ours: HashSet<i64>,
    pub(super) matches: Matches,
    pub(super) rows: HashMap<u64, &'a Row>,
    pub(super) streams: StreamMap,
}
