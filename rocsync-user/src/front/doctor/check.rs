//! One row of the doctor's table and what it concluded: the type every check's module
//! builds, apart from the table that runs them (so none of them imports the table).

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
    /// There, and unsafe as it is (rocsync traces; the fix says what to change).
    Warning,
}

impl Status {
    pub fn word(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Missing => "MISSING",
            Status::Absent => "absent",
            Status::Unknown => "unknown",
            Status::Warning => "WARNING",
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
    pub(super) fn ok(
        what: impl Into<String>,
        found: impl Into<String>,
        needed_for: &'static str,
    ) -> Self {
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
    pub(super) fn not(mut self, status: Status, fix: impl Into<String>) -> Self {
        self.status = status;
        self.fix = Some(fix.into());
        self
    }

    pub(super) fn unknown(mut self) -> Self {
        self.status = Status::Unknown;
        self
    }
}
