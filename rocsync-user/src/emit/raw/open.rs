//! Opening what a user names as input (a raw capture, a profiler trace): a regular file
//! only (a FIFO would hang), read through gzip when it is compressed.

use std::{
    fs::File,
    io::{BufRead, BufReader},
};

use anyhow::{Context as _, Result, bail};

/// The raw capture as written: `--raw FILE.gz` compresses it, so a gzip stream (by its
/// magic, whatever the name) is read through a decoder.
pub fn decompressed(file: File) -> Result<Box<dyn BufRead>> {
    let mut input = BufReader::new(file);
    let gzip = input
        .fill_buf()
        .context("reading the input")?
        .starts_with(&[0x1f, 0x8b]);
    Ok(if gzip {
        Box::new(BufReader::new(flate2::bufread::MultiGzDecoder::new(input)))
    } else {
        Box::new(input)
    })
}

/// Opens `path` for reading without blocking on what is not a regular file (a FIFO
/// with no writer would hang `open`), then refuses anything else.
pub fn open_regular(path: &std::path::Path) -> Result<File> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd = rustix::fs::open(path, flags, Mode::empty())
        .with_context(|| format!("cannot open {}", path.display()))?;
    let st = rustix::fs::fstat(&fd)?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
        bail!(
            "{} is not a regular file (a FIFO, device or directory): rocsync reads regular files only",
            path.display()
        );
    }
    rustix::fs::fcntl_setfl(&fd, OFlags::empty())?;
    Ok(File::from(fd))
}
