//! The documentation's links resolve (issue 64, "docs"): every relative link
//! `[x](path)` or `[x](path#anchor)` in README.md, docs/*.md and bench/*.md names a file
//! that exists, and every `#anchor` into a Markdown file one of its headings, as GitHub
//! makes anchors of them. Links in code (fenced blocks, `spans`) are text, not links.
//! And a section cited by name, `see "Hangs by default"`, is one: a heading or a bold
//! run-in (`**Hangs by default.**`) of the same file, or of the file linked right after
//! it (`see "Processes" in [how it works](how-it-works.md#…)`).

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// README.md, docs/*.md and bench/*.md.
fn documents() -> Vec<PathBuf> {
    let mut found = vec![root().join("README.md")];
    for dir in ["docs", "bench"] {
        let mut here: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "md"))
            .collect();
        here.sort();
        found.extend(here);
    }
    found
}

/// The lines of `text` outside fenced code blocks, numbered from 1.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        lines.push((i + 1, line));
    }
    lines
}

/// GitHub's anchor for a heading: lower case, what is not a letter, digit, space, `-`
/// or `_` dropped, each space a `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown text's headings (a repeated one is `-1`, `-2`… after the first).
fn anchors(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut seen = std::collections::HashMap::<String, usize>::new();
    for (_, line) in prose(text) {
        let hashes = line.len() - line.trim_start_matches('#').len();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(line[hashes..].trim_end_matches([' ', '#']));
        let times = seen.entry(base.clone()).or_default();
        *times += 1;
        found.push(match *times - 1 {
            0 => base,
            n => format!("{base}-{n}"),
        });
    }
    found
}

/// The targets of a line's inline links and images, `[text](target)`.
fn links(line: &str) -> Vec<&str> {
    line.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &line[at + 2..];
            let end = rest.find(')')?;
            let target = rest[..end].split_whitespace().next()?;
            Some(target)
        })
        .collect()
}

/// What is wrong with `target`, linked from `doc`, if anything.
fn broken(doc: &Path, target: &str) -> Option<String> {
    // Another site (https:, mailto:): not this repository's to check.
    if target.split_once(':').is_some_and(|(scheme, _)| {
        scheme.chars().all(|c| c.is_ascii_alphabetic()) && !scheme.is_empty()
    }) {
        return None;
    }
    let (path, anchor) = match target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (target, None),
    };
    let file = match path {
        "" => doc.to_path_buf(),
        p => doc.parent().unwrap().join(p),
    };
    if !file.exists() {
        return Some(format!("{target}: no such file"));
    }
    let anchor = anchor?;
    if file.extension().is_none_or(|e| e != "md") {
        return None;
    }
    let headings = anchors(&std::fs::read_to_string(&file).unwrap());
    (!headings.iter().any(|h| h == anchor)).then(|| format!("{target}: no heading #{anchor}"))
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut wrong = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        for (n, line) in prose(&text) {
            // Odd pieces between backticks are code, not links.
            let line: String = line.split('`').step_by(2).collect();
            for target in links(&line) {
                checked += 1;
                if let Some(why) = broken(&doc, target) {
                    let shown = doc.strip_prefix(root()).unwrap_or(&doc).display();
                    wrong.push(format!("{shown}:{n}: {why}"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "broken links:\n{}", wrong.join("\n"));
    // The README alone links the docs a dozen times: the links were found.
    assert!(checked > 20, "only {checked} links checked");
}

/// The sections a line cites by name, `see "NAME"`, each with the link target that
/// follows it (`see "NAME" in [x](target)`), if any.
fn citations(line: &str) -> Vec<(&str, Option<&str>)> {
    line.match_indices("see \"")
        .filter_map(|(at, said)| {
            let rest = &line[at + said.len()..];
            let (name, after) = rest.split_once('"')?;
            let linked = after
                .strip_prefix(" in [")
                .and_then(|a| a.split_once("]("))
                .and_then(|(_, t)| t.split([')', ' ']).next());
            Some((name, linked))
        })
        .collect()
}

/// Whether `text` has a section `name`: a heading of that title or a bold run-in.
fn has_section(text: &str, name: &str) -> bool {
    let headed = prose(text).iter().any(|(_, l)| {
        let title = l.trim_start_matches('#');
        title.len() < l.len() && title.replace('`', "").trim() == name
    });
    headed
        || [".**", "**:", "**"]
            .iter()
            .any(|end| text.contains(&format!("**{name}{end}")))
}

#[test]
fn every_section_cited_by_name_exists_where_it_is_said_to() {
    let mut wrong = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        for (n, line) in prose(&text) {
            for (name, linked) in citations(line) {
                checked += 1;
                let file = match linked {
                    Some(t) => doc.parent().unwrap().join(t.split('#').next().unwrap()),
                    None => doc.clone(),
                };
                let there = std::fs::read_to_string(&file).unwrap_or_default();
                if !has_section(&there, name) {
                    let shown = doc.strip_prefix(root()).unwrap_or(&doc).display();
                    let cited = file.strip_prefix(root()).unwrap_or(&file).display();
                    wrong.push(format!("{shown}:{n}: \"{name}\" is no section of {cited}"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(checked >= 3, "only {checked} citations checked");
}

#[test]
fn anchors_are_githubs() {
    let text = "# rocsync\n## Capture options (`run`, `attach`)\n```\n# not a heading\n```\n\
                ## --version\n## Open the trace\n## Open the trace\n#hashtag\n";
    assert_eq!(
        anchors(text),
        [
            "rocsync",
            "capture-options-run-attach",
            "--version",
            "open-the-trace",
            "open-the-trace-1"
        ]
    );
    assert_eq!(
        links("see [a](b.md#c) and ![d](e.svg \"t\")."),
        ["b.md#c", "e.svg"]
    );
    let doc = root().join("README.md");
    assert!(broken(&doc, "docs/commands.md#demo").is_none());
    assert!(broken(&doc, "https://example.com/x#y").is_none());
    assert!(broken(&doc, "docs/commands.md#no-such-section").is_some());
    assert!(broken(&doc, "docs/no-such-file.md").is_some());
    assert!(broken(&doc, "#trace-a-pytorch-job").is_none());
    assert_eq!(
        citations(r#"(see "A b" below; see "C" in [d](d.md#e)), "f""#),
        [("A b", None), ("C", Some("d.md#e"))]
    );
    let text = "## A `b`\n**C.** d\n- **E**: f\n";
    assert!(["A b", "C", "E"].iter().all(|s| has_section(text, s)));
    assert!(!has_section(text, "d"));
}
