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
    sink: Sink,
}

enum Sink {
    /// A regular file: written beside, renamed into place when complete.
    Atomic(NamedTempFile),
    /// A device or pipe (`/dev/null`, a FIFO): written directly, never replaced.
    Direct(File),
}

impl PendingFile {
    /// Reserves `path`: creates a temporary file beside it, proving the directory writable.
    pub fn create(path: &Path) -> Result<Self> {
        if path.is_dir() {
            bail!("output path {} is a directory: name a file", path.display());
        }
        let sink = if path.exists() && !path.metadata().is_ok_and(|m| m.is_file()) {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .with_context(|| format!("cannot write output {}", path.display()))?;
            Sink::Direct(file)
        } else {
            let dir = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
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
            Sink::Atomic(tmp)
        };
        Ok(Self {
            path: path.to_path_buf(),
            sink,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Renames the final file within the same directory (names that depend on the
    /// target's pid are known only once it runs).
    pub fn set_file_name(&mut self, name: &str) {
        if matches!(self.sink, Sink::Atomic(_)) {
            self.path.set_file_name(name);
        }
    }

    /// A writer for the content (gzip-compressed when the name ends in `.gz`); close it,
    /// then [`persist`](Self::persist).
    pub fn stream(&self) -> Result<FileStream> {
        let file = match &self.sink {
            Sink::Atomic(tmp) => tmp.as_file(),
            Sink::Direct(f) => f,
        };
        let w = BufWriter::with_capacity(1 << 20, file.try_clone()?);
        Ok(if self.path.extension().is_some_and(|e| e == "gz") {
            FileStream::Gz(flate2::write::GzEncoder::new(
                w,
                flate2::Compression::fast(),
            ))
        } else {
            FileStream::Plain(w)
        })
    }

    /// Writes the content through `fill`, then renames the file into place.
    pub fn commit(
        self,
        fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<PathBuf> {
        let mut w = self.stream()?;
        fill(&mut w)
            .and_then(|()| w.close())
            .with_context(|| format!("writing {}", self.path.display()))?;
        self.persist()
    }

    /// Moves the complete file into place.
    pub fn persist(self) -> Result<PathBuf> {
        let path = self.path;
        if let Sink::Atomic(tmp) = self.sink {
            // tempfile creates 0600 files; a trace is an ordinary user file.
            std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o644))?;
            tmp.persist(&path)
                .with_context(|| format!("renaming into {}", path.display()))?;
        }
        Ok(path)
    }
}

/// An output being written.
pub enum FileStream {
    Plain(BufWriter<File>),
    Gz(flate2::write::GzEncoder<BufWriter<File>>),
}

impl FileStream {
    /// Ends the compressed stream, if any, and flushes.
    pub fn close(self) -> std::io::Result<()> {
        match self {
            FileStream::Plain(mut w) => w.flush(),
            FileStream::Gz(z) => z.finish()?.flush(),
        }
    }
}

impl Write for FileStream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            FileStream::Plain(w) => w.write(buf),
            FileStream::Gz(z) => z.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            FileStream::Plain(w) => w.flush(),
            FileStream::Gz(z) => z.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_are_written_directly_and_never_replaced() {
        let f = PendingFile::create(Path::new("/dev/null")).unwrap();
        f.commit(|w| w.write_all(b"x")).unwrap();
        use std::os::unix::fs::FileTypeExt as _;
        assert!(
            std::fs::metadata("/dev/null")
                .unwrap()
                .file_type()
                .is_char_device()
        );
    }

    #[test]
    fn files_appear_only_when_complete() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        let f = PendingFile::create(&path).unwrap();
        assert!(!path.exists());
        f.commit(|w| w.write_all(b"{}")).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{}");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary left"
        );
    }
}
