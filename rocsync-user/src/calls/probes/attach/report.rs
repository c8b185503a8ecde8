//! What attaching a library file reports (the runtime's calls, HSA's write path).

use std::path::{Path, PathBuf};

use crate::calls::probes::placement::Placement;

/// What attaching to one library file found.
#[derive(Debug)]
pub struct LibraryReport {
    pub path: PathBuf,
    /// Hooked functions (distinct addresses) and the names probed at each.
    pub probed: Vec<(Placement, Vec<&'static str>)>,
    /// Hooked names this library does not export.
    pub missing: Vec<&'static str>,
    /// It has no static symbol table: functions it carries may be hidden.
    pub stripped: bool,
}

impl LibraryReport {
    pub(in crate::calls::probes) fn new(
        path: &Path,
        probed: Vec<(Placement, Vec<&'static str>)>,
        missing: Vec<&'static str>,
    ) -> Self {
        Self {
            path: path.to_path_buf(),
            probed,
            missing,
            stripped: false,
        }
    }
}
