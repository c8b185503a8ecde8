//! Opening a capture file someone names on the command line (`convert`, `report`): a
//! regular file only, gzip read through a decoder whatever its name.

use std::{
    fs::File,
    io::{BufRead, BufReader},
    path::Path,
};

use anyhow::{Context as _, Result, bail};

/// Opens `path` for reading without blocking on what is not a regular file (a FIFO
/// with no writer would hang `open`), then refuses anything else.
pub fn open_regular(path: &Path, what: &str) -> Result<File> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd = rustix::fs::open(path, flags, Mode::empty())
        .with_context(|| format!("cannot open {}", path.display()))?;
    let st = rustix::fs::fstat(&fd)?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
        bail!(
            "{} is not a regular file (a FIFO, device or directory): {what}",
            path.display()
        );
    }
    rustix::fs::fcntl_setfl(&fd, OFlags::empty())?;
    Ok(File::from(fd))
}

/// The file as written: `--raw FILE.gz` and `-o FILE.json.gz` compress, so a gzip stream
/// (by its magic, whatever the name) is read through a decoder.
pub fn decompressed(file: File) -> Result<Box<dyn BufRead>> {
    let mut input = BufReader::new(file);
    let gzip = input
        .fill_buf()
        .context("reading the file")?
        .starts_with(&[0x1f, 0x8b]);
    Ok(if gzip {
        Box::new(BufReader::new(flate2::bufread::MultiGzDecoder::new(input)))
    } else {
        Box::new(input)
    })
}
