//! `rocsync doctor`: what this machine allows rocsync, one row per check (as
//! `bpftrace --info`): the kernel's features ([`kernel`]), the capabilities rocsync has
//! and needs ([`caps`]), and the GPU runtimes installed, each tried with a real attach
//! ([`runtimes`]). Every miss comes with its fix.

mod caps;
mod kernel;
mod runtimes;
mod search;

use std::fmt::Write as _;

use serde_json::json;

/// What a check concluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Ok,
    /// Needed, and not there: rocsync cannot trace (`doctor` exits 1).
    Missing,
    /// Not there, and not needed (a runtime not installed, a faster path absent).
    Absent,
    /// Could not be told (e.g. probing the kernel needs the capabilities missing).
    Unknown,
}

impl Status {
    pub fn word(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Missing => "MISSING",
            Status::Absent => "absent",
            Status::Unknown => "unknown",
        }
    }
}

/// One row of the table.
#[derive(Debug)]
pub struct Check {
    pub what: String,
    pub found: String,
    pub needed_for: &'static str,
    pub status: Status,
    /// How to fix a miss.
    pub fix: Option<String>,
}

impl Check {
    fn ok(what: impl Into<String>, found: impl Into<String>, needed_for: &'static str) -> Self {
        Self {
            what: what.into(),
            // Paths are their owners' to name: no escape sequence or line of theirs
            // reaches root's terminal.
            found: crate::daemon::untrusted::escaped(&found.into()),
            needed_for,
            status: Status::Ok,
            fix: None,
        }
    }

    /// `self`, but not there: `status` says whether that matters.
    fn not(mut self, status: Status, fix: impl Into<String>) -> Self {
        self.status = status;
        self.fix = Some(fix.into());
        self
    }

    fn unknown(mut self) -> Self {
        self.status = Status::Unknown;
        self
    }
}

pub struct Report {
    pub checks: Vec<Check>,
}

/// Runs every check (loading the probes for the trial attaches).
pub fn run() -> Report {
    let mut checks = kernel::checks();
    checks.extend(caps::checks());
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
    pub fn table(&self) -> String {
        let headers = ["CHECK", "FOUND", "NEEDED FOR", "STATUS"];
        let rows: Vec<[&str; 4]> = self
            .checks
            .iter()
            .map(|c| [&*c.what, &*c.found, c.needed_for, c.status.word()])
            .collect();
        let mut widths = headers.map(str::len);
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let line = |out: &mut String, [a, b, c, d]: [&str; 4]| {
            let (wa, wb, wc) = (widths[0], widths[1], widths[2]);
            let _ = writeln!(out, "{a:<wa$}  {b:<wb$}  {c:<wc$}  {d}");
        };
        line(&mut out, headers);
        for (row, check) in rows.into_iter().zip(&self.checks) {
            line(&mut out, row);
            if let Some(fix) = check.fix.as_ref().filter(|_| check.status != Status::Ok) {
                let _ = writeln!(out, "    fix: {fix}");
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
