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

/// A JSON text's bytes with every run of whitespace outside strings cut to
/// [`MAX_BLANK_RUN`] bytes: the text means the same, its formatting stays as written
/// (indentation, `"rank": 0`), and a file of gigabytes of blanks (a few megabytes
/// gzipped) costs nothing to hold.
pub struct Squeezed<R> {
    inner: R,
    in_string: bool,
    escaped: bool,
    blanks: usize,
}

/// Whitespace kept in a row: deeper than any trace's indentation.
pub const MAX_BLANK_RUN: usize = 256;

impl<R: std::io::Read> Squeezed<R> {
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            in_string: false,
            escaped: false,
            blanks: 0,
        }
    }
}

impl<R: std::io::Read> std::io::Read for Squeezed<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let n = self.inner.read(buf)?;
            if n == 0 {
                return Ok(0);
            }
            let mut kept = 0;
            for i in 0..n {
                let b = buf[i];
                let keep = if self.in_string {
                    match (self.escaped, b) {
                        (true, _) => self.escaped = false,
                        (false, b'\\') => self.escaped = true,
                        (false, b'"') => self.in_string = false,
                        _ => {}
                    }
                    true
                } else if matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                    self.blanks += 1;
                    self.blanks <= MAX_BLANK_RUN
                } else {
                    self.blanks = 0;
                    self.in_string = b == b'"';
                    true
                };
                if keep {
                    buf[kept] = b;
                    kept += 1;
                }
            }
            // A read of blanks only past the run reads on: 0 would mean the end.
            if kept > 0 {
                return Ok(kept);
            }
        }
    }
}

/// The JSON text of `input`, squeezed, at most `max` bytes: a larger one is an error
/// that says so (never a text cut short).
pub fn json_text(input: impl std::io::Read, max: u64, what: &str) -> Result<String> {
    use std::io::Read as _;
    let mut text = String::new();
    Squeezed::new(input)
        .take(max + 1)
        .read_to_string(&mut text)
        .with_context(|| format!("reading {what} (JSON text)"))?;
    if text.len() as u64 > max {
        bail!(
            "{what} is larger than {} GiB of JSON text (blanks aside): it is held in memory \
             whole; split it, or write a smaller one",
            max >> 30
        );
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    fn squeezed(s: &str) -> String {
        let mut out = String::new();
        Squeezed::new(s.as_bytes())
            .read_to_string(&mut out)
            .unwrap();
        out
    }

    #[test]
    fn blank_runs_are_cut_outside_strings_only() {
        let blanks = " ".repeat(10_000);
        let text = format!("{{\"a\":{blanks}1, \"s\": \"{blanks}\\\"{blanks}\"}}");
        let out = squeezed(&text);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["a"], 1);
        assert_eq!(
            v["s"].as_str().unwrap().len(),
            2 * 10_000 + 1,
            "strings untouched"
        );
        assert_eq!(out.len(), text.len() - (10_000 - MAX_BLANK_RUN));
        // Formatting as written below the run.
        assert_eq!(squeezed("{\n  \"rank\": 0\n}"), "{\n  \"rank\": 0\n}");
    }

    #[test]
    fn a_text_past_the_bound_is_an_error_not_cut_short() {
        let e = json_text("[1, 2, 3]".as_bytes(), 4, "t").unwrap_err();
        assert!(e.to_string().contains("larger than"), "{e}");
        let blanks = format!("[1{}]", " ".repeat(1 << 20));
        assert_eq!(
            json_text(blanks.as_bytes(), 300, "t").unwrap().len(),
            3 + MAX_BLANK_RUN
        );
    }
}
