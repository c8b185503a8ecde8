//! Output files are created up front (so an unwritable path fails before any capture) and
//! appear under their final name only when complete (temporary file + rename).

use std::{
    fs::File,
    io::{BufWriter, Write},
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result};
use tempfile::NamedTempFile;

pub struct PendingFile {
    path: PathBuf,
    tmp: NamedTempFile,
}

impl PendingFile {
    /// Reserves `path`: creates a temporary file beside it, proving the directory writable.
    pub fn create(path: &Path) -> Result<Self> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if path.is_dir() {
            anyhow::bail!("output path {} is a directory: name a file", path.display());
        }
        let tmp = tempfile::Builder::new()
            .prefix(".rocsync-")
            .suffix(".tmp")
            .tempfile_in(dir)
            .with_context(|| {
                format!(
                    "cannot write output {}: directory not writable",
                    path.display()
                )
            })?;
        Ok(Self {
            path: path.to_path_buf(),
            tmp,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the content through `fill`, then renames the file into place.
    pub fn commit(
        self,
        fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<PathBuf> {
        let file: &File = self.tmp.as_file();
        let mut w = BufWriter::with_capacity(1 << 20, file);
        fill(&mut w).with_context(|| format!("writing {}", self.path.display()))?;
        w.flush()?;
        drop(w);
        let path = self.path.clone();
        let tmp = self.tmp;
        // tempfile creates 0600 files; a trace is an ordinary user file.
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o644))?;
        tmp.persist(&path)
            .with_context(|| format!("renaming into {}", path.display()))?;
        Ok(path)
    }
}
