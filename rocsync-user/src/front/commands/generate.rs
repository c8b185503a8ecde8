//! `rocsync generate man|completions DIR` (hidden): the man pages and shell completions,
//! made from the same clap definition that parses the command line, so what a package
//! installs cannot drift from the binary it ships beside.

use std::{fs, io, path::Path};

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;

use crate::front::cli::{Cli, GenerateArgs, Generated};

/// The shells whose completions are written, each under clap_complete's file name.
const SHELLS: [Shell; 3] = [Shell::Bash, Shell::Zsh, Shell::Fish];

pub fn generate(args: GenerateArgs) -> Result<i32> {
    let dir = &args.dir;
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    match args.what {
        Generated::Man => man_pages(dir),
        Generated::Completions => SHELLS.into_iter().try_for_each(|shell| {
            clap_complete::generate_to(shell, &mut Cli::command(), "rocsync", dir)
                .and_then(|path| offer_pids(shell, &path))
        }),
    }
    .with_context(|| format!("cannot write into {}", dir.display()))?;
    Ok(0)
}

/// What bash offers for a process id (`-p`, `--pid`): the running processes' ids.
const PIDS: &str = r#"COMPREPLY=($(compgen -W "$(command ls /proc 2>/dev/null | grep -E '^[0-9]+$')" -- "${cur}"))"#;

/// Bash's completion of the pid options offers processes, not files: clap_complete knows
/// no pid hint, so they are marked `ValueHint::Other` (the only options so marked), which
/// it completes as the word typed, and that is replaced here.
fn offer_pids(shell: Shell, path: &Path) -> io::Result<()> {
    if shell != Shell::Bash {
        return Ok(());
    }
    let text = fs::read_to_string(path)?;
    fs::write(path, text.replace(r#"COMPREPLY=("${cur}")"#, PIDS))
}

/// rocsync.1 and one page per command (rocsync-attach.1, ...), as git and cargo ship.
/// As `clap_mangen::generate_to`, but each page's footer names the package and its
/// version only ("rocsync 0.1.0", not "attach 0.1.0 (commit ...)"): the commit and the
/// probes' build id stay in `rocsync --version` and the pages' VERSION section.
fn man_pages(dir: &Path) -> io::Result<()> {
    let mut cli = Cli::command().disable_help_subcommand(true);
    cli.build();
    let source = format!("rocsync {}", env!("CARGO_PKG_VERSION"));
    std::iter::once(cli.clone())
        .chain(cli.get_subcommands().cloned())
        .try_for_each(|page| {
            let man = clap_mangen::Man::new(page.clone())
                .source(&source)
                .manual("rocsync manual");
            let mut roff = Vec::new();
            man.render(&mut roff)?;
            let roff = with_value_names(&String::from_utf8_lossy(&roff), &page);
            fs::write(dir.join(man.get_filename()), roff)
        })
}

/// The page with each option's value named in its SYNOPSIS, as `man` pages write them
/// (`[--duration D]`): clap_mangen names only the option (`[--duration]`), which reads
/// as a flag.
fn with_value_names(roff: &str, cmd: &clap::Command) -> String {
    let Some((head, rest)) = roff.split_once(".SH SYNOPSIS\n") else {
        return roff.to_string();
    };
    let (synopsis, tail) = rest.split_once('\n').unwrap_or((rest, ""));
    let mut synopsis = synopsis.to_string();
    for arg in cmd
        .get_arguments()
        .filter(|a| a.get_action().takes_values())
    {
        let (Some(long), Some(names)) = (arg.get_long(), arg.get_value_names()) else {
            continue;
        };
        let token = format!("\\fB\\-\\-{}\\fR", long.replace('-', "\\-"));
        let values: String = names.iter().map(|n| format!(" \\fI{n}\\fR")).collect();
        synopsis = synopsis.replacen(&token, &format!("{token}{values}"), 1);
    }
    format!("{head}.SH SYNOPSIS\n{synopsis}\n{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(what: Generated) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let dir_path = dir.path().join("out");
        generate(GenerateArgs {
            what,
            dir: dir_path,
        })
        .unwrap();
        dir
    }

    #[test]
    fn a_page_per_command_and_none_for_generate_or_help() {
        let dir = write(Generated::Man);
        let mut pages: Vec<String> = fs::read_dir(dir.path().join("out"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        pages.sort();
        let mut want: Vec<String> = Cli::command()
            .get_subcommands()
            .map(|c| format!("rocsync-{}.1", c.get_name()))
            .chain(["rocsync.1".to_string()])
            .collect();
        want.sort();
        assert_eq!(pages, want);
        let attach = fs::read_to_string(dir.path().join("out/rocsync-attach.1")).unwrap();
        assert!(
            attach.starts_with(".ie") && attach.contains(".SH SYNOPSIS"),
            "{attach}"
        );
        assert!(
            attach.contains(r#".TH rocsync-attach 1  "rocsync "#),
            "{attach}"
        );
    }

    #[test]
    fn the_synopsis_names_each_options_value() {
        let dir = write(Generated::Man);
        let trace = fs::read_to_string(dir.path().join("out/rocsync-trace.1")).unwrap();
        let synopsis = trace.split(".SH SYNOPSIS\n").nth(1).unwrap();
        let synopsis = synopsis.lines().next().unwrap();
        for shown in [
            r"[\fB\-d\fR|\fB\-\-duration\fR \fIDURATION\fR]",
            r"\fB\-\-pid\fR \fIPID\fR",
            r"[\fB\-\-socket\fR \fIPATH\fR]",
            // A flag takes no value.
            r"[\fB\-f\fR|\fB\-\-force\fR]",
        ] {
            assert!(synopsis.contains(shown), "{shown} in {synopsis}");
        }
    }

    #[test]
    fn completions_for_three_shells_that_never_offer_generate() {
        let dir = write(Generated::Completions);
        for file in ["rocsync.bash", "_rocsync", "rocsync.fish"] {
            let text = fs::read_to_string(dir.path().join("out").join(file)).unwrap();
            assert!(text.contains("attach"), "{file}: {text}");
            assert!(
                !text.contains("generate"),
                "{file} offers the hidden command"
            );
        }
    }
}
