//! `rocsync doctor`: what this machine allows rocsync, one row per check (as
//! `bpftrace --info`): the kernel's features ([`kernel`]), the capabilities rocsync has
//! and needs ([`caps`]), and the GPU runtimes installed, each tried with a real attach
//! ([`runtimes`]). Every miss comes with its fix.

mod caps;
mod check;
mod exe;
mod kernel;
mod runtimes;
mod search;

use std::fmt::Write as _;

use serde_json::json;

pub use check::{Check, Status};

pub struct Report {
    pub checks: Vec<Check>,
}

/// Runs every check (loading the probes for the trial attaches).
pub fn run() -> Report {
    let mut checks = kernel::checks();
    checks.extend(caps::checks());
    checks.extend(exe::checks());
    checks.extend(runtimes::checks());
    Report { checks }
}

impl Report {
    /// The needed things missing.
    pub fn missing(&self) -> Vec<&Check> {
        self.checks
            .iter()
            .filter(|c| c.status == Status::Missing)
            .collect()
    }

    /// The table, each miss's fix under its row, and the verdict.
    /// The checks for people, readable at [`WIDTH`] columns (as `bpftrace --info` is): what,
    /// its status and what was found on one line; what it is needed for and the fix
    /// under a row that is not ok (`--json` has every field of every row).
    pub fn table(&self) -> String {
        let what = self.checks.iter().map(|c| c.what.chars().count());
        let wa = what.chain(["CHECK".len()]).max().unwrap_or(0);
        let ws = self.checks.iter().map(|c| c.status.word().len());
        let ws = ws.chain(["STATUS".len()]).max().unwrap_or(0);
        let mut out = String::new();
        let _ = writeln!(out, "{:<wa$}  {:<ws$}  FOUND", "CHECK", "STATUS");
        let indent = wa + ws + 4;
        for c in &self.checks {
            let found = wrapped(&c.found, WIDTH.saturating_sub(indent).max(40), indent);
            let _ = writeln!(out, "{:<wa$}  {:<ws$}  {found}", c.what, c.status.word());
            if c.status != Status::Ok {
                let _ = writeln!(out, "    for: {}", c.needed_for);
                if let Some(fix) = &c.fix {
                    let _ = writeln!(out, "    fix: {fix}");
                }
            }
        }
        let missing = self.missing();
        if missing.is_empty() {
            out.push_str("\neverything rocsync needs is here\n");
        } else {
            let names: Vec<&str> = missing.iter().map(|c| &*c.what).collect();
            let _ = writeln!(out, "\nmissing: {}", names.join(", "));
        }
        out
    }

    /// The same, for programs.
    pub fn json(&self) -> serde_json::Value {
        let checks: Vec<_> = self
            .checks
            .iter()
            .map(|c| {
                json!({
                    "what": c.what,
                    "found": c.found,
                    "needed_for": c.needed_for,
                    "status": c.status.word(),
                    "fix": c.fix,
                })
            })
            .collect();
        let missing: Vec<&str> = self.missing().iter().map(|c| &*c.what).collect();
        json!({ "ok": missing.is_empty(), "missing": missing, "checks": checks })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_miss_shows_its_fix_and_is_named_at_the_end() {
        let report = Report {
            checks: vec![
                Check::ok("uprobes", "yes", "every probe"),
                Check::ok("CAP_BPF", "no", "loading").not(Status::Missing, "grant it"),
                Check::ok("CUDA runtime", "not installed", "CUDA")
                    .not(Status::Absent, "install it"),
            ],
        };
        let text = report.table();
        assert!(text.contains("    fix: grant it"), "{text}");
        assert!(text.contains("    fix: install it"), "{text}");
        assert!(text.ends_with("missing: CAP_BPF\n"), "{text}");
        let json = report.json();
        assert_eq!(json["missing"], json!(["CAP_BPF"]));
        assert_eq!(json["checks"][2]["status"], "absent");
    }
}

/// The width `doctor`'s table keeps to (a path longer than a line stays whole).
const WIDTH: usize = 100;

/// `text` broken at spaces into lines of at most `width`, the later ones indented by
/// `indent`.
fn wrapped(text: &str, width: usize, indent: usize) -> String {
    let mut lines: Vec<String> = vec![String::new()];
    for word in text.split(' ') {
        let line = lines.last_mut().expect("one line at least");
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(word.to_string());
        } else {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
    }
    lines.join(&format!("\n{}", " ".repeat(indent)))
}

#[cfg(test)]
mod width_tests {
    use super::wrapped;

    #[test]
    fn long_findings_wrap_at_spaces_under_the_found_column() {
        let w = wrapped(
            "/usr/lib/libamdhip64.so.5: attached to 14 functions (uprobe_multi)",
            40,
            4,
        );
        assert_eq!(
            w,
            "/usr/lib/libamdhip64.so.5: attached to\n    14 functions (uprobe_multi)"
        );
        assert_eq!(wrapped("short", 40, 4), "short");
    }
}
