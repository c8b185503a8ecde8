//! Opening a capture file someone names on the command line (`convert`, `report`): a
//! regular file only, gzip read through a decoder whatever its name.

use std::{
    fs::File,
    io::{BufRead, BufReader},
    path::Path,
};

use anyhow::{Context as _, Result, bail};

mod json;
pub mod walk;

pub use json::{Cut, MAX_BLANK_RUN, MAX_HELD, MAX_STRING, Squeezed, bytes, json_text};

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

/// What a file's first bytes say it is: rocsync's raw capture (`--raw`), a Kineto trace
/// (rocsync's or a profiler's), or neither — so that a command given the wrong kind of
/// file says which kind it got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sniffed {
    Raw,
    Trace,
    Unknown,
}

pub fn sniff(input: &mut dyn BufRead) -> Result<Sniffed> {
    let head = input.fill_buf().context("reading the file")?;
    let head = String::from_utf8_lossy(&head[..head.len().min(4096)]);
    Ok(if head.trim_start().starts_with("{\"rocsync_raw\"") {
        Sniffed::Raw
    } else if head.contains("\"traceEvents\"") || head.contains("\"schemaVersion\"") {
        Sniffed::Trace
    } else {
        Sniffed::Unknown
    })
}

/// The files of `dir` whose names end in one of `ends`, sorted (directories of
/// per-rank traces and captures).
pub fn listed(dir: &Path, ends: &[&str]) -> Result<Vec<std::path::PathBuf>> {
    let mut v: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().map(|n| n.to_string_lossy().into_owned());
            n.is_some_and(|n| ends.iter().any(|e| n.ends_with(e)))
        })
        .collect();
    v.sort();
    Ok(v)
}

/// The file as written: `--raw FILE.gz` and `-o FILE.json.gz` compress, so a gzip stream
/// (by its magic, whatever the name) is read through a decoder.
pub fn decompressed(file: impl std::io::Read + 'static) -> Result<Box<dyn BufRead>> {
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
