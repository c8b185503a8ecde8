//! Every flag of every command is documented (issue 64, "docs"): the rule is that each
//! option `rocsync COMMAND --help` lists — every spelling of it, `-d` as `--duration`
//! — and each value it lists as possible appears in the `## COMMAND` section of
//! docs/commands.md (for `run` and `attach`, or in "Capture options", which they
//! share). The commands are those `rocsync --help` lists, and the hidden ones a user
//! runs (`generate`, `read-stacks`: docs/commands.md documents both). A flag added
//! without a word there fails here.

use std::process::Command;

use crate::common::*;

/// The commands hidden from `rocsync --help` that users still run.
const HIDDEN: &[&str] = &["generate", "read-stacks"];

/// What every command has, documented once for all (`--version` has its own section).
const EVERYWHERE: &[&str] = &["-h", "--help", "-V", "--version"];

fn help(args: &[&str]) -> String {
    let out = run_ok(Command::new(env!("CARGO_BIN_EXE_rocsync")).args(args));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The commands of `rocsync --help`'s "Commands:" list (`help` left out).
fn listed_commands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        // A command's line starts two spaces in; its description's continuation, more.
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// The spellings of each option (`-o`, `--output`) and the possible values a help lists.
fn options_and_values(help: &str) -> (Vec<String>, Vec<String>) {
    let (mut options, mut values) = (Vec::new(), Vec::new());
    let mut in_values = false;
    for line in help.lines() {
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim();
        // An option's own line is 2 (with a short form) or 6 spaces in; its help, on
        // that line or the next ones, further.
        if indent <= 6 && trimmed.starts_with('-') {
            in_values = false;
            let spellings = trimmed
                .split_whitespace()
                .map(|w| w.trim_end_matches(','))
                .take_while(|w| w.starts_with('-'));
            options.extend(spellings.map(str::to_string));
        }
        if let Some((_, rest)) = trimmed.split_once("[possible values: ") {
            let list = rest.split(']').next().unwrap_or_default();
            values.extend(list.split(", ").map(str::to_string));
        }
        // A long help's "Possible values:" list, one `- value: what` a line.
        if trimmed == "Possible values:" {
            in_values = true;
        } else if in_values {
            match trimmed.strip_prefix("- ").and_then(|v| v.split_once(':')) {
                Some((value, _)) => values.push(value.to_string()),
                None => in_values = false,
            }
        }
    }
    options.sort();
    options.dedup();
    (options, values)
}

/// `word` in `text` standing alone: not inside a longer flag or word (`--upload` is not
/// found in `--upload-region`, `-d` not in `-dirty`).
fn mentions(text: &str, word: &str) -> bool {
    let part = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(part) && !after.is_some_and(part)
    })
}

/// docs/commands.md's `## heading` section (the heading's line on).
fn section<'a>(doc: &'a str, heading: &str) -> Option<&'a str> {
    doc.split("\n## ")
        .find(|s| s.lines().next() == Some(heading))
}

#[test]
fn every_option_of_every_command_is_in_its_commands_section() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/commands.md"),
    )
    .unwrap();
    let capture = section(&doc, "Capture options (`run`, `attach`)")
        .expect("docs/commands.md has the capture options");
    let mut commands = listed_commands(&help(&["--help"]));
    assert!(commands.len() >= 10, "{commands:?}");
    commands.extend(HIDDEN.iter().map(|c| c.to_string()));
    let mut missing = Vec::new();
    let mut checked = 0;
    for command in &commands {
        let Some(own) = section(&doc, command) else {
            missing.push(format!("{command}: no `## {command}` section"));
            continue;
        };
        let text = match command.as_str() {
            "run" | "attach" => format!("{own}\n{capture}"),
            _ => own.to_string(),
        };
        let (options, values) = options_and_values(&help(&[command, "--help"]));
        for option in options.iter().filter(|o| !EVERYWHERE.contains(&o.as_str())) {
            checked += 1;
            if !mentions(&text, option) {
                missing.push(format!("{command}: {option}"));
            }
        }
        for value in &values {
            checked += 1;
            if !mentions(&text, value) {
                missing.push(format!("{command}: the value {value}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/commands.md does not document: {missing:#?}"
    );
    // run, attach and the daemon alone have more than 60 spellings and values.
    assert!(checked > 60, "only {checked} checked");
}

#[test]
fn options_values_and_commands_are_read_from_a_help() {
    let help = "Usage: x\n\nCommands:\n  run   Launch\n        more\n  help  Print\n\n\
                Options:\n  -o, --output <FILE>\n          Where -x goes\n\n      \
                --backend <NAME>\n          Which [possible values: hip, cuda]\n\n  \
                <WHAT>\n          Possible values:\n          - man:  pages\n          \
                - completions: files\n\n";
    assert_eq!(listed_commands(help), ["run"]);
    let (options, values) = options_and_values(help);
    assert_eq!(options, ["--backend", "--output", "-o"]);
    assert_eq!(values, ["hip", "cuda", "man", "completions"]);
    assert!(mentions("`-d`, `--duration D`", "-d"));
    assert!(!mentions("`--upload-region`", "--upload"));
    assert!(!mentions("-dirty", "-d"));
}
