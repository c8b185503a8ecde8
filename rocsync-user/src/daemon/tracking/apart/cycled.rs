//! A runtime file's probes of records, stream waits and destroys (their entries),
//! attached apart so that the budget's duty cycle (`budget/cycle.rs`) can take them off
//! and put them back.

use std::thread::JoinHandle;

use anyhow::Result;

use crate::{
    calls::{
        backend::Runtime,
        probes::{
            ApiChoice, LinkGroup, Probes, ReturnProbes,
            elf::{SymbolError, library::OpenedLibrary},
        },
    },
    daemon::{tracking::apart::returns::FileReturns, untrusted},
};

/// A runtime file's probes of records, stream waits and destroys (their entries; their
/// returns are apart, `returns.rs`), attached apart so that the cycle can take them off.
/// While the returns are attached (something records: the flight recorder), the cycle
/// takes them off and puts them back with the entries: a return probe traps at the
/// function's entry too, so a cycle of the entries alone would save nothing.
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
        match c.on(probes, Some(pid), None) {
            Ok(()) => Ok(Some(c)),
            Err(e) if matches!(e.downcast_ref(), Some(SymbolError::NoneHooked(_))) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Its probes on, if off; `returns`: its file's returns, attached first (a call
    /// entered once the entries are back then has its return).
    pub(crate) fn on(
        &mut self,
        probes: &mut Probes,
        pid: Option<u32>,
        returns: Option<&mut FileReturns>,
    ) -> Result<()> {
        if self.links.is_some() {
            return Ok(());
        }
        if let Some(detach) = self.detaching.take() {
            let _ = detach.join();
        }
        if let Some(r) = returns {
            r.cycle_on(probes)?;
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

    /// Its probes off (detached in the background); `returns`: its file's returns, off
    /// too once the entries are detached and the calls entered before have returned.
    pub(crate) fn off(&mut self, probes: &mut Probes, returns: Option<&mut FileReturns>) {
        let Some(links) = self.links.take() else {
            return;
        };
        let entries = probes.release(vec![links]);
        self.detaching = Some(match returns.and_then(FileReturns::cycle_off) {
            Some(r) => probes.release_after(r, entries, super::returns::CYCLE_GRACE),
            None => entries,
        });
    }

    /// The APIs it probes (or would).
    pub(crate) fn apis(&self) -> impl Iterator<Item = &'static str> + '_ {
        (self.runtime.apis())
            .filter(|a| a.return_optional() && !a.is_polling())
            .map(|a| a.symbol())
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
