//! The annotated trace: the profiler's text as written, with some `traceEvents` elements
//! replaced and rows appended to the array — nothing else of it changes (key order,
//! number formatting, the top level; HTA finds the rank with a regex over the text).
//! Written atomically beside its final name, which must not exist.

use std::{io::Write, path::Path};

use anyhow::{Context as _, Result, bail};

use super::profile::Profile;
use crate::calls::emit::files::PendingFile;

/// `text` with the integer value of `"key"` replaced by `value`; `None` without that key.
pub(super) fn set_int(text: &str, key: &str, value: i64) -> Option<String> {
    let quoted = format!("\"{key}\"");
    let at = text.find(&quoted)? + quoted.len();
    let rest = &text[at..];
    let colon = rest.find(|c: char| !c.is_ascii_whitespace())?;
    if !rest[colon..].starts_with(':') {
        return None;
    }
    let after = &rest[colon + 1..];
    let start = after.find(|c: char| !c.is_ascii_whitespace())?;
    let len = after[start..]
        .find(|c: char| !matches!(c, '-' | '+' | '.' | 'e' | 'E' | '0'..='9'))
        .unwrap_or(after.len() - start);
    if len == 0 {
        return None;
    }
    let from = at + colon + 1 + start;
    Some(format!("{}{value}{}", &text[..from], &text[from + len..]))
}

/// The whole output, written to `out` as it is made (a copy of the trace held beside it
/// doubled what annotate holds): edits applied (sorted by element), rows appended.
pub(super) fn assemble(
    p: &Profile,
    mut edits: Vec<(usize, String)>,
    added: &[String],
    out: &mut dyn Write,
) -> Result<()> {
    edits.sort_by_key(|e| e.0);
    if !added.is_empty() && p.spans.is_empty() {
        bail!("the profiler trace has no events to annotate");
    }
    let mut at = 0;
    for (i, text) in &edits {
        let (a, b) = p.spans[*i];
        out.write_all(&p.text.as_bytes()[at..a])?;
        out.write_all(text.as_bytes())?;
        at = b;
    }
    if let (false, Some(&(_, end))) = (added.is_empty(), p.spans.last()) {
        out.write_all(&p.text.as_bytes()[at..end])?;
        for row in added {
            out.write_all(b",\n  ")?;
            out.write_all(row.as_bytes())?;
        }
        at = end;
    }
    out.write_all(&p.text.as_bytes()[at..])?;
    Ok(())
}

/// `trace.json[.gz]` → `trace.annotated.json`, beside it.
pub(super) fn default_output(trace: &Path) -> std::path::PathBuf {
    let name = trace
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name
        .strip_suffix(".gz")
        .unwrap_or(&name)
        .strip_suffix(".json")
        .unwrap_or(name.strip_suffix(".gz").unwrap_or(&name))
        .to_string();
    trace.with_file_name(format!("{stem}.annotated.json"))
}

/// Writes what `text` writes to `path` atomically; an existing `path` is refused, now and
/// at the rename, unless `force` (then only a regular file is replaced, as every output
/// is).
pub(super) fn write(
    path: &Path,
    force: bool,
    text: impl FnOnce(&mut dyn Write) -> Result<()>,
) -> Result<()> {
    crate::calls::emit::files::refuse_existing(path, force)?;
    let file = if force {
        PendingFile::create(path)?
    } else {
        PendingFile::create_new(path)?
    };
    let mut w = file.stream()?;
    text(&mut w).with_context(|| format!("writing {}", path.display()))?;
    w.close()
        .with_context(|| format!("writing {}", path.display()))?;
    file.persist()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_an_integer_value_in_place() {
        let t = r#"{"args": {"wait_on_stream": -1, "wait_on_cuda_event_record_corr_id":-1, "stream": 7}}"#;
        let t = set_int(t, "wait_on_stream", 13).unwrap();
        let t = set_int(&t, "wait_on_cuda_event_record_corr_id", 5833).unwrap();
        assert_eq!(
            t,
            r#"{"args": {"wait_on_stream": 13, "wait_on_cuda_event_record_corr_id":5833, "stream": 7}}"#
        );
        assert!(set_int(&t, "absent", 1).is_none());
        assert!(set_int(r#"{"wait_on_stream": "x"}"#, "wait_on_stream", 1).is_none());
    }

    #[test]
    fn names_the_output_beside_the_input() {
        assert_eq!(
            default_output(Path::new("/d/t.json.gz")),
            Path::new("/d/t.annotated.json")
        );
        assert_eq!(
            default_output(Path::new("t.json")),
            Path::new("t.annotated.json")
        );
        assert_eq!(
            default_output(Path::new("t")),
            Path::new("t.annotated.json")
        );
    }
}
