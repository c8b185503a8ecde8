//! What a peer sends, as the daemon logs and bounds it. Any local user can reach the
//! dynolog port (it has no authentication), and any can name an executable: what they
//! control is escaped and shortened before it reaches root's log, so it can neither
//! forge lines (`\r`, `\n`), colour the terminal (`\e[31m`) nor fill the disk.

use anyhow::{Result, bail};

/// The longest text of a peer's a log line carries.
const SHOWN_CHARS: usize = 200;
/// Pids a log line names; the rest are counted.
const SHOWN_PIDS: usize = 8;

/// Whether `c` must be escaped where a peer's text is shown: control characters, and the
/// invisible ones that reorder or hide what surrounds them (bidirectional overrides and
/// isolates, zero-width characters, line and paragraph separators): "Trojan source".
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{2069}'
                | '\u{FEFF}'
                | '\u{061C}'
                | '\u{180E}')
}

/// `text` for a log line: control and invisible characters escaped (`\u{1b}`, `\r`,
/// `\u{202e}`), at most [`SHOWN_CHARS`] characters, the rest counted.
pub(crate) fn shown(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    for c in chars.by_ref().take(SHOWN_CHARS) {
        if hidden(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    let rest = chars.count();
    if rest > 0 {
        out.push_str(&format!("… ({rest} more characters)"));
    }
    out
}

/// `text` with its control and invisible characters escaped, whole: what a client prints
/// of the daemon's answer (an executable's name is its owner's to choose).
pub(crate) fn escaped(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let esc = hidden(c).then(|| c.escape_default());
            let plain = (!hidden(c)).then_some(c);
            esc.into_iter().flatten().chain(plain)
        })
        .collect()
}

/// A pid list for a log line or a session's name: `[1, 2]`, or its first
/// [`SHOWN_PIDS`] and a count.
pub(crate) fn pids_shown(pids: &[u32]) -> String {
    if pids.len() <= SHOWN_PIDS {
        return format!("{pids:?}");
    }
    let first: Vec<String> = pids[..SHOWN_PIDS].iter().map(u32::to_string).collect();
    format!("[{}, … ({} pids)]", first.join(", "), pids.len())
}

/// Pods for an error message: at most [`SHOWN_PODS`], the rest counted.
pub(crate) fn pods_shown(known: &[String]) -> String {
    const SHOWN_PODS: usize = 20;
    if known.is_empty() {
        return "none".into();
    }
    let mut shown = known[..known.len().min(SHOWN_PODS)].join(", ");
    if known.len() > SHOWN_PODS {
        shown.push_str(&format!(" and {} more", known.len() - SHOWN_PODS));
    }
    shown
}

/// A file name stem from a client: letters, digits, `-` and `_` only.
pub(crate) fn stem(name: Option<&str>) -> Result<String> {
    let name = name.unwrap_or("trace");
    if name.is_empty()
        || name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        bail!("trace name {name:?}: use 1 to 64 letters, digits, '-' or '_'");
    }
    Ok(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_long_text_cut() {
        assert_eq!(shown("a\u{1b}[31mb\rc\n"), "a\\u{1b}[31mb\\rc\\n");
        let long = "x".repeat(SHOWN_CHARS + 50);
        let s = shown(&long);
        assert!(s.ends_with("… (50 more characters)"), "{s}");
        assert!(s.len() < SHOWN_CHARS + 30);
    }

    #[test]
    fn invisible_reordering_characters_are_escaped_and_letters_kept() {
        // "trainer" shown as "reniart" by a right-to-left override, and a zero-width space.
        assert_eq!(shown("x\u{202e}reniart"), "x\\u{202e}reniart");
        assert_eq!(escaped("a\u{200b}b\u{2066}"), "a\\u{200b}b\\u{2066}");
        assert_eq!(escaped("rté 训练"), "rté 训练");
    }

    #[test]
    fn long_pid_lists_are_counted() {
        assert_eq!(pids_shown(&[1, 2]), "[1, 2]");
        let many: Vec<u32> = (1..=9000).collect();
        assert_eq!(pids_shown(&many), "[1, 2, 3, 4, 5, 6, 7, 8, … (9000 pids)]");
    }
}
