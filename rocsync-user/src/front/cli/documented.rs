//! The documentation cannot drift from the command line: every `rocsync …` line in a
//! shell block of the README and of `docs/` must parse as the CLI parses it.

use clap::Parser as _;

use super::Cli;

/// The files whose shell blocks are checked, as compiled in (a renamed file fails here).
const DOCUMENTS: &[(&str, &str)] = &[
    ("README.md", include_str!("../../../../README.md")),
    (
        "docs/commands.md",
        include_str!("../../../../docs/commands.md"),
    ),
    ("docs/daemon.md", include_str!("../../../../docs/daemon.md")),
    (
        "docs/trace-format.md",
        include_str!("../../../../docs/trace-format.md"),
    ),
    (
        "docs/how-it-works.md",
        include_str!("../../../../docs/how-it-works.md"),
    ),
    (
        "docs/running-as-root.md",
        include_str!("../../../../docs/running-as-root.md"),
    ),
    (
        "docs/analysis.md",
        include_str!("../../../../docs/analysis.md"),
    ),
    (
        "docs/annotate.md",
        include_str!("../../../../docs/annotate.md"),
    ),
    (
        "docs/rocm-versions.md",
        include_str!("../../../../docs/rocm-versions.md"),
    ),
    ("docs/stacks.md", include_str!("../../../../docs/stacks.md")),
];

/// The `rocsync` command lines of a document's shell blocks (```sh, ```console or a
/// bare ```), continuations joined, `sudo` and a `$ ` prompt taken off, with their
/// line numbers.
fn command_lines(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let (mut fenced, mut shell) = (false, false);
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(lang) = trimmed.strip_prefix("```") {
            // A fence closes the block it is in (a ```json block's end opens nothing).
            fenced = !fenced;
            shell = fenced && matches!(lang.trim(), "" | "sh" | "bash" | "console" | "shell");
            continue;
        }
        if !shell {
            continue;
        }
        let (start, mut joined) = pending.take().unwrap_or((i + 1, String::new()));
        joined.push_str(trimmed);
        if let Some(head) = joined.strip_suffix('\\') {
            pending = Some((start, head.to_string()));
            continue;
        }
        let command = joined.strip_prefix("$ ").unwrap_or(&joined);
        let command = command.strip_prefix("sudo ").unwrap_or(command);
        if command.starts_with("rocsync ") {
            found.push((start, command.to_string()));
        }
    }
    found
}

/// A command line's words as a shell splits them, a trailing `# comment` dropped.
fn words(line: &str) -> Vec<String> {
    let words = shlex::split(line).unwrap_or_else(|| panic!("unbalanced quotes: {line}"));
    words
        .into_iter()
        .take_while(|w| !w.starts_with('#'))
        .collect()
}

#[test]
fn every_documented_command_line_parses() {
    let mut checked = 0;
    let mut wrong = Vec::new();
    for (name, text) in DOCUMENTS {
        for (line, command) in command_lines(text) {
            checked += 1;
            if let Err(e) = Cli::try_parse_from(words(&command)) {
                wrong.push(format!("{name}:{line}: {command}\n{e}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The README alone shows run, attach (twice), so the check has lines to check.
    assert!(checked >= 3, "only {checked} command lines found");
}

#[test]
fn command_lines_are_found_joined_and_unprompted() {
    let text = "x\n```sh\n$ sudo rocsync attach -p 1 \\\n  -o a.json # one\ncargo x\n```\nrocsync no\n```python\nrocsync no\n```\nrocsync no\n";
    let found = command_lines(text);
    assert_eq!(
        found,
        vec![(3, "rocsync attach -p 1 -o a.json # one".to_string())]
    );
    assert_eq!(
        words(&found[0].1),
        ["rocsync", "attach", "-p", "1", "-o", "a.json"]
    );
}

#[test]
fn every_document_is_checked() {
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
    for entry in std::fs::read_dir(docs).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".md") {
            let listed = format!("docs/{name}");
            assert!(
                DOCUMENTS.iter().any(|(n, _)| *n == listed),
                "{listed} is not in DOCUMENTS: its command lines go unchecked"
            );
        }
    }
}

/// The daemon's long flags (hidden ones left out), as clap has them.
fn daemon_flags() -> Vec<String> {
    let cli = <Cli as clap::CommandFactory>::command();
    let daemon = cli.find_subcommand("daemon").expect("a daemon command");
    daemon
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| Some(format!("--{}", a.get_long()?)))
        .collect()
}

#[test]
fn every_daemon_flag_is_in_the_commands_daemon_section() {
    let (_, text) = DOCUMENTS[1];
    let section = text
        .split("\n## ")
        .find(|s| s.starts_with("daemon\n"))
        .expect("docs/commands.md has a daemon section");
    let flags = daemon_flags();
    assert!(flags.len() > 20, "{flags:?}");
    // A flag's name followed by what ends a word there, so `--upload` is not found
    // inside `--upload-region`.
    let missing: Vec<&String> = flags
        .iter()
        .filter(|f| {
            ![" ", "]", "`"]
                .iter()
                .any(|end| section.contains(&format!("{f}{end}")))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "docs/commands.md's daemon section lacks {missing:?}"
    );
}
