//! A runtime file's probes of records, stream waits and destroys (their entries),
//! attached apart so that the budget's duty cycle (`budget/cycle.rs`) can take them off
//! and put them back.

use std::thread::JoinHandle;

use anyhow::Result;

use crate::{
    backend::Runtime,
    daemon::untrusted,
    probes::{
        ApiChoice, LinkGroup, Probes, ReturnProbes, elf::SymbolError, library::OpenedLibrary,
    },
};

/// A runtime file's probes of records, stream waits and destroys (their entries; their
/// returns are apart, `returns.rs`), attached apart so that the cycle can take them off.
pub(crate) struct Cycled {
    lib: OpenedLibrary,
    runtime: &'static Runtime,
    carried: bool,
    links: Option<LinkGroup>,
    /// Its last links' detach, while it may still run (attached again meanwhile, each
    /// call would be counted twice).
    detaching: Option<JoinHandle<()>>,
    /// In the cycle: a process it serves was over the budget with them alone.
    pub cycling: bool,
}

impl Cycled {
    /// `lib`'s probes of records, waits and destroys, attached for `pid`; `None` when it
    /// has none.
    pub(crate) fn attach(
        probes: &mut Probes,
        lib: OpenedLibrary,
        (runtime, carried): (&'static Runtime, bool),
        pid: u32,
    ) -> Result<Option<Cycled>> {
        let mut c = Cycled {
            lib,
            runtime,
            carried,
            links: None,
            detaching: None,
            cycling: false,
        };
        match c.on(probes, Some(pid)) {
            Ok(()) => Ok(Some(c)),
            Err(e) if matches!(e.downcast_ref(), Some(SymbolError::NoneHooked(_))) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Its probes on, if off.
    pub(crate) fn on(&mut self, probes: &mut Probes, pid: Option<u32>) -> Result<()> {
        if self.links.is_some() {
            return Ok(());
        }
        if let Some(detach) = self.detaching.take() {
            let _ = detach.join();
        }
        let choice = ApiChoice {
            skip: (self.runtime.apis())
                .filter(|a| !a.return_optional() || a.is_polling())
                .collect(),
            // Their returns are optional: entries alone.
            returns: ReturnProbes::Needed,
            ..ApiChoice::default()
        };
        let path = self.lib.path();
        self.links = Some(probes.attach_group(self.runtime, &choice, &path, pid, self.carried)?);
        Ok(())
    }

    /// Its probes off (detached in the background).
    pub(crate) fn off(&mut self, probes: &mut Probes) {
        if let Some(links) = self.links.take() {
            self.detaching = Some(probes.release(vec![links]));
        }
    }

    pub(crate) fn is_on(&self) -> bool {
        self.links.is_some()
    }

    /// Its links, as its file is released, and its last links' detach if it may still
    /// run (the file is not probed again before it is done).
    pub(crate) fn release(self) -> (Option<LinkGroup>, Option<JoinHandle<()>>) {
        (self.links, self.detaching)
    }

    pub(crate) fn library(&self) -> String {
        untrusted::shown(&self.lib.shown.to_string_lossy())
    }
}
