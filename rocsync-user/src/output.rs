//! Output files are created up front (so an unwritable path fails before any capture) and
//! appear under their final name only when complete (temporary file + rename).

use std::{
    fs::File,
    io::{BufWriter, Write},
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result, bail};
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
            bail!("output path {} is a directory: name a file", path.display());
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

    /// Renames the final file within the same directory (names that depend on the
    /// target's pid are known only once it runs).
    pub fn set_file_name(&mut self, name: &str) {
        self.path.set_file_name(name);
    }

    /// Writes the content through `fill` (gzip-compressed when the name ends in `.gz`),
    /// then renames the file into place.
    pub fn commit(
        self,
        fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<PathBuf> {
        let file: &File = self.tmp.as_file();
        let mut w = BufWriter::with_capacity(1 << 20, file);
        let written = if self.path.extension().is_some_and(|e| e == "gz") {
            let mut z = flate2::write::GzEncoder::new(&mut w, flate2::Compression::fast());
            fill(&mut z).and_then(|()| z.finish().map(drop))
        } else {
            fill(&mut w)
        };
        written.with_context(|| format!("writing {}", self.path.display()))?;
        w.flush()?;
        drop(w);
        // tempfile creates 0600 files; a trace is an ordinary user file.
        std::fs::set_permissions(self.tmp.path(), std::fs::Permissions::from_mode(0o644))?;
        let path = self.path;
        self.tmp
            .persist(&path)
            .with_context(|| format!("renaming into {}", path.display()))?;
        Ok(path)
    }
}
