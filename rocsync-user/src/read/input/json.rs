//! A JSON text as the offline commands read it: blank runs cut ([`Squeezed`]), strings
//! cut to a bound where a command reads only short ones ([`Squeezed::cutting`]) or
//! refused past one where it copies them ([`json_text`]), and one bound on what a command
//! holds of a file ([`MAX_HELD`]).

use std::{cell::Cell, rc::Rc};

use anyhow::{Context as _, Result, bail};

/// Whitespace kept in a row: deeper than any trace's indentation.
pub const MAX_BLANK_RUN: usize = 256;

/// The longest string `report` reads whole: every field it uses is a few dozen bytes (API
/// names, handles, reasons, dtypes); a longer one (a kernel name it passes by, or a
/// hostile 20 KB name) is read as its first KiB, and counted. A string the parser reads
/// costs its length until the row is made: this bounds that too.
pub const MAX_STRING: usize = 1 << 10;

/// The most an offline command holds of what it reads: `report`'s rows and names (all of
/// a directory's traces together), `annotate`'s profiler trace text. A gzip inflates a
/// thousandfold: without it, a 12 MB file took 6 GB.
pub const MAX_HELD: u64 = 512 << 20;

/// What [`Squeezed::cutting`] cut: strings past its bound, and the bytes left out of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cut {
    pub strings: u64,
    pub bytes: u64,
}

/// A JSON text's bytes with every run of whitespace outside strings cut to
/// [`MAX_BLANK_RUN`] bytes: the text means the same, its formatting stays as written
/// (indentation, `"rank": 0`), and a file of gigabytes of blanks (a few megabytes
/// gzipped) costs nothing to hold.
pub struct Squeezed<R> {
    inner: R,
    in_string: bool,
    blanks: usize,
    /// Inside a string: the escape being read.
    escape: Escape,
    /// The last escape was a UTF-16 high surrogate: its low half must follow uncut.
    high: bool,
    /// Bytes kept of the string being read, and whether the rest is being left out.
    kept: usize,
    dropping: bool,
    strings: Strings,
}

/// What is done with a string past a bound.
enum Strings {
    Whole,
    /// Cut to its first `usize` bytes, counted.
    Cut(usize, Rc<Cell<Cut>>),
    /// An error: past `usize` bytes, and whether one was.
    Refuse(usize, bool),
}

#[derive(Clone, Copy, PartialEq)]
enum Escape {
    None,
    Backslash,
    /// `\u`: hex digits left, value so far.
    Hex(u8, u16),
}

impl<R: std::io::Read> Squeezed<R> {
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            in_string: false,
            blanks: 0,
            escape: Escape::None,
            high: false,
            kept: 0,
            dropping: false,
            strings: Strings::Whole,
        }
    }

    /// As [`Squeezed::new`], and every string past `max` bytes cut to its first `max` or
    /// a few more (never inside an escape or a UTF-8 character, so the text stays valid
    /// JSON). What was cut is counted in the returned cell.
    pub fn cutting(inner: R, max: usize) -> (Self, Rc<Cell<Cut>>) {
        let cut = Rc::new(Cell::new(Cut::default()));
        let mut s = Self::new(inner);
        s.strings = Strings::Cut(max, cut.clone());
        (s, cut)
    }

    /// As [`Squeezed::new`], and a string past `max` bytes an error: read by a command
    /// that copies the text as written, which may not cut it.
    pub fn refusing(inner: R, max: usize) -> Self {
        let mut s = Self::new(inner);
        s.strings = Strings::Refuse(max, false);
        s
    }

    /// Whether byte `b`, read inside a string, is kept.
    fn in_string(&mut self, b: u8) -> bool {
        // A cut before `b` leaves valid JSON: no escape half read, no UTF-8 character
        // half kept, no surrogate pair split.
        let boundary = self.escape == Escape::None && !self.high && !(0x80..0xc0).contains(&b);
        match self.escape {
            Escape::None if b == b'"' => {
                self.in_string = false;
                if std::mem::take(&mut self.dropping)
                    && let Strings::Cut(_, cut) = &self.strings
                {
                    let mut c = cut.get();
                    c.strings += 1;
                    cut.set(c);
                }
                return true;
            }
            Escape::None if b == b'\\' => self.escape = Escape::Backslash,
            Escape::None => self.high = false,
            Escape::Backslash if b == b'u' => self.escape = Escape::Hex(4, 0),
            Escape::Backslash => (self.escape, self.high) = (Escape::None, false),
            Escape::Hex(left, v) => {
                let v = v << 4 | (b as char).to_digit(16).unwrap_or(0) as u16;
                self.escape = match left {
                    1 => {
                        self.high = (0xd800..0xdc00).contains(&v);
                        Escape::None
                    }
                    _ => Escape::Hex(left - 1, v),
                };
            }
        }
        match &mut self.strings {
            Strings::Whole => return true,
            Strings::Refuse(max, refused) => {
                *refused |= self.kept >= *max;
                self.kept += 1;
                return true;
            }
            Strings::Cut(max, _) => {
                if !self.dropping && self.kept >= *max && boundary {
                    self.dropping = true;
                }
            }
        }
        if self.dropping {
            self.left_out(1);
            return false;
        }
        self.kept += 1;
        true
    }

    fn left_out(&self, bytes: usize) {
        if let Strings::Cut(_, cut) = &self.strings {
            let mut c = cut.get();
            c.bytes += bytes as u64;
            cut.set(c);
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
            let (mut kept, mut i) = (0, 0);
            while i < n {
                if self.dropping && self.escape == Escape::None && !self.high {
                    // The rest of a cut string, to its next quote or escape, at once: a
                    // file of 20 KB strings is mostly this.
                    let rest = &buf[i..n];
                    let skip = (rest.iter())
                        .position(|&b| b == b'"' || b == b'\\')
                        .unwrap_or(rest.len());
                    if skip > 0 {
                        self.left_out(skip);
                        i += skip;
                        continue;
                    }
                }
                let b = buf[i];
                i += 1;
                let keep = if self.in_string {
                    self.in_string(b)
                } else if matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                    self.blanks += 1;
                    self.blanks <= MAX_BLANK_RUN
                } else {
                    self.blanks = 0;
                    if b == b'"' {
                        (self.in_string, self.kept) = (true, 0);
                        (self.escape, self.high) = (Escape::None, false);
                    }
                    true
                };
                if keep {
                    buf[kept] = b;
                    kept += 1;
                }
            }
            if let Strings::Refuse(max, true) = self.strings {
                return Err(std::io::Error::other(format!(
                    "it has a string over {}: no trace has one (its longest, kernel names \
                     and call stacks, are kilobytes); it is refused rather than held",
                    bytes(max as u64)
                )));
            }
            // A read of cut bytes only reads on: 0 would mean the end.
            if kept > 0 {
                return Ok(kept);
            }
        }
    }
}

/// `512 MiB`, `1 KiB`, or bytes.
pub fn bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// The JSON text of `input`, squeezed, at most `max` bytes, none of its strings over
/// `max_string`: a larger one is an error that says so (never a text cut short).
pub fn json_text(
    input: impl std::io::Read,
    (max, max_string): (u64, usize),
    what: &str,
) -> Result<String> {
    use std::io::Read as _;
    let mut text = String::new();
    Squeezed::refusing(input, max_string)
        .take(max + 1)
        .read_to_string(&mut text)
        .with_context(|| format!("reading {what} (JSON text)"))?;
    if text.len() as u64 > max {
        bail!(
            "{what} is larger than {} MiB of JSON text (blanks aside): it is held in memory \
             whole; profile fewer steps (torch.profiler's schedule), or split it",
            max >> 20
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

    fn cut(s: &str, max: usize) -> (String, Cut) {
        let (mut r, cut) = Squeezed::cutting(s.as_bytes(), max);
        let mut out = String::new();
        r.read_to_string(&mut out).unwrap();
        (out, cut.get())
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
        let e = json_text("[1, 2, 3]".as_bytes(), (4, 10), "t").unwrap_err();
        assert!(e.to_string().contains("larger than"), "{e}");
        let blanks = format!("[1{}]", " ".repeat(1 << 20));
        assert_eq!(
            json_text(blanks.as_bytes(), (300, 10), "t").unwrap().len(),
            3 + MAX_BLANK_RUN
        );
        // A string past its bound is refused, whatever the text's; one at it is read.
        let e = json_text(r#"["abcdefghijk"]"#.as_bytes(), (1 << 20, 10), "t");
        let e = format!("{:#}", e.unwrap_err());
        assert!(e.contains("it has a string over 10 bytes"), "{e}");
        assert!(json_text(r#"["abcdefghij"]"#.as_bytes(), (1 << 20, 10), "t").is_ok());
    }

    #[test]
    fn long_strings_are_cut_to_valid_json_and_counted() {
        let long = "a".repeat(100);
        let (out, c) = cut(&format!(r#"{{"{long}": ["{long}", "short"]}}"#), 8);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["aaaaaaaa"], serde_json::json!(["aaaaaaaa", "short"]));
        assert_eq!(
            c,
            Cut {
                strings: 2,
                bytes: 2 * 92
            }
        );
        // Never inside an escape, a UTF-8 character or a surrogate pair: each variant
        // parses, and the text stays as it was up to the cut.
        for s in [
            r#"ab\"\"\"\"\"\""#,
            r#"ab\u00e9\u00e9\u00e9\u00e9"#,
            "abééééééé",
            r#"ab\ud83d\ude00\ud83d\ude00\ud83d\ude00"#,
            "ab😀😀😀😀",
        ] {
            for max in 0..12 {
                let (out, c) = cut(&format!(r#"["{s}", 1]"#), max);
                let v: Vec<serde_json::Value> = serde_json::from_str(&out)
                    .unwrap_or_else(|e| panic!("{s} cut at {max}: {out}: {e}"));
                let whole: Vec<serde_json::Value> =
                    serde_json::from_str(&format!(r#"["{s}", 1]"#)).unwrap();
                let got = v[0].as_str().unwrap();
                assert!(whole[0].as_str().unwrap().starts_with(got), "{s} at {max}");
                assert_eq!((v[1].clone(), c.strings), (1.into(), 1), "{s} at {max}");
            }
        }
        // A string at the bound is whole, and nothing is counted.
        assert_eq!(
            cut(r#"["abcd"]"#, 4),
            (r#"["abcd"]"#.into(), Cut::default())
        );
    }
}
