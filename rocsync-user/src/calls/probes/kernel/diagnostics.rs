//! The probes' own diagnostics (aya-log), written on failure paths only: an unreadable
//! target address, a full map, a ring slot not yet written when its doorbell rang.
//! Shown under `-v`; otherwise the probes' log level is off and they write nothing.

use aya::{Ebpf, EbpfLoader};
use aya_log::EbpfLogger;

/// `AYA_LOG_LEVEL` (aya-log-common's `Level`): 0 is off, 2 is warnings and errors.
const LEVEL_OFF: u8 = 0;
const LEVEL_WARN: u8 = 2;

/// Sets the probes' log level before they are loaded: off unless shown.
pub(crate) fn set_level(loader: &mut EbpfLoader<'_>, shown: bool) {
    static OFF: u8 = LEVEL_OFF;
    static WARN: u8 = LEVEL_WARN;
    loader.override_global("AYA_LOG_LEVEL", if shown { &WARN } else { &OFF }, true);
}

/// Forwards the probes' diagnostics to stderr.
pub struct Diagnostics(Option<EbpfLogger<Stderr>>);

/// Prints each diagnostic on its own line, marked as the probes'.
pub(crate) struct Stderr;

impl log::Log for Stderr {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, record: &log::Record<'_>) {
        let level = record.level().as_str().to_ascii_lowercase();
        crate::say!("rocsync: probe {level}: {}", record.args());
    }
    fn flush(&self) {}
}

impl Diagnostics {
    /// Takes the probes' log ring when diagnostics are shown.
    pub fn init(ebpf: &mut Ebpf, shown: bool) -> Self {
        if !shown {
            return Diagnostics(None);
        }
        match EbpfLogger::init_with_logger(ebpf, Stderr) {
            Ok(logger) => Diagnostics(Some(logger)),
            Err(e) => {
                crate::say!("rocsync: the probes' diagnostics are unavailable: {e}");
                Diagnostics(None)
            }
        }
    }

    /// Prints what the probes wrote since the last call (rare: failure paths only, so
    /// read on the capture's periodic tick rather than woken for).
    pub fn flush(&mut self) {
        if let Some(logger) = &mut self.0 {
            logger.flush();
        }
    }
}
