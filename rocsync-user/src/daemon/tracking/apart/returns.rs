//! The return probes counting does not need ([`Api::return_optional`]: records, stream
//! waits, destroys, polls), attached only while something records. A counted process then pays
//! one trap per such call, not two (the return trap is about half a probed call's cost:
//! bench/overhead-breakdown.md); synchronizes keep theirs, for stalls and hangs.
//!
//! The order makes every recorded call whole. On: the returns are attached, then the
//! probes told (`RETURNLESS` cleared), and only then does a trace switch its processes'
//! recording on. Off: the probes are told first (from then on an entry leaves nothing in
//! flight), and the links detached a grace later, once the calls entered before have
//! returned (none of these calls blocks).
//!
//! [`Api::return_optional`]: rocsync_common::Api::return_optional

use std::{thread::JoinHandle, time::Duration};

use anyhow::Result;
use tokio::time::Instant;

use crate::calls::{
    backend::Runtime,
    probes::{
        ApiChoice, LinkGroup, Probes, ReturnProbes,
        elf::{SymbolError, library::OpenedLibrary},
    },
};

/// How long detached returns wait: the calls entered before the switch have returned.
const GRACE: Duration = Duration::from_millis(300);
/// How long a file's returns wait, once the duty cycle's entries are detached, before
/// they are detached too (`cycled.rs`): the calls entered before have returned.
pub(crate) const CYCLE_GRACE: Duration = Duration::from_millis(50);

/// A runtime file's optional returns: what to attach them to, and their links while on.
pub(crate) struct FileReturns {
    lib: OpenedLibrary,
    runtime: &'static Runtime,
    carried: bool,
    links: Option<LinkGroup>,
    /// Switched off: detached at this moment (switched on before, kept).
    retiring: Option<Instant>,
    /// Its last links' detach, while it may still run.
    detaching: Option<JoinHandle<()>>,
}

impl FileReturns {
    pub(crate) fn new(lib: OpenedLibrary, runtime: &'static Runtime, carried: bool) -> Self {
        Self {
            lib,
            runtime,
            carried,
            links: None,
            retiring: None,
            detaching: None,
        }
    }

    fn attach(&mut self, probes: &mut Probes) -> Result<()> {
        // Still attached, in its grace: kept (attached twice, each return would fire twice).
        self.retiring = None;
        if self.links.is_some() {
            return Ok(());
        }
        // Their last links still being detached would fire too: each return twice.
        if let Some(detach) = self.detaching.take() {
            let _ = detach.join();
        }
        // NCCL's calls have none; a library may lack them all.
        if !self.runtime.apis().any(|a| a.return_optional()) {
            return Ok(());
        }
        let choice = ApiChoice {
            skip: self
                .runtime
                .apis()
                .filter(|a| !a.return_optional())
                .collect(),
            returns: ReturnProbes::Optional,
            ..ApiChoice::default()
        };
        let path = self.lib.path();
        match probes.attach_group(self.runtime, &choice, &path, None, self.carried) {
            Ok(links) => {
                self.links = Some(links);
                Ok(())
            }
            Err(e) if matches!(e.downcast_ref(), Some(SymbolError::NoneHooked(_))) => Ok(()),
            Err(e) => Err(e.context(format!(
                "{}: the returns of records and waits",
                self.lib.shown.display()
            ))),
        }
    }

    /// Its links, as its file is released, and its last links' detach if it may still
    /// run (the file is not probed again before it is done).
    pub(crate) fn release(self) -> (Option<LinkGroup>, Option<JoinHandle<()>>) {
        (self.links, self.detaching)
    }

    /// Its links, taken off by the duty cycle with its entries (`cycled.rs`): `None`
    /// when none are attached, or when they are being retired already.
    pub(crate) fn cycle_off(&mut self) -> Option<LinkGroup> {
        match self.retiring {
            Some(_) => None,
            None => self.links.take(),
        }
    }

    /// Attached again as the duty cycle puts its entries back, before them (`on`: the
    /// returns are wanted now); the caller has waited for their last detach.
    pub(crate) fn cycle_on(&mut self, probes: &mut Probes) -> Result<()> {
        self.attach(probes)
    }
}

/// Whether the optional returns are attached.
#[derive(Default)]
pub(crate) struct ReturnsApart {
    on: bool,
}

impl ReturnsApart {
    pub(crate) fn on(&self) -> bool {
        self.on
    }

    /// Attaches every file's optional returns, then tells the probes: called before a
    /// recording is switched on.
    pub(crate) fn switch_on<'a>(
        &mut self,
        probes: &mut Probes,
        files: impl Iterator<Item = &'a mut FileReturns>,
    ) -> Result<()> {
        if self.on {
            return Ok(());
        }
        // A file whose returns cannot be attached (gone meanwhile) keeps its processes'
        // records and waits without a return in a trace: said, the trace goes on.
        for f in files {
            if let Err(e) = f.attach(probes) {
                crate::say!("rocsync daemon: warning: {e:#}");
            }
        }
        probes.set_returnless(false)?;
        self.on = true;
        Ok(())
    }

    /// A file probed while they are on gets its optional returns at once.
    pub(crate) fn file_added(&self, probes: &mut Probes, f: &mut FileReturns) -> Result<()> {
        match self.on {
            true => f.attach(probes),
            false => Ok(()),
        }
    }

    /// Tells the probes, then gives every file's optional returns their grace: called
    /// once nothing records.
    pub(crate) fn switch_off<'a>(
        &mut self,
        probes: &mut Probes,
        files: impl Iterator<Item = &'a mut FileReturns>,
    ) -> Result<()> {
        if !self.on {
            return Ok(());
        }
        probes.set_returnless(true)?;
        let until = Instant::now() + GRACE;
        for f in files.filter(|f| f.links.is_some()) {
            f.retiring = Some(until);
        }
        self.on = false;
        Ok(())
    }

    /// Detaches the links whose grace is over.
    pub(crate) fn retire<'a>(
        &mut self,
        now: Instant,
        probes: &mut Probes,
        files: impl Iterator<Item = &'a mut FileReturns>,
    ) {
        for f in files.filter(|f| f.retiring.is_some_and(|t| t <= now)) {
            f.retiring = None;
            if let Some(links) = f.links.take() {
                f.detaching = Some(probes.release(vec![links]));
            }
        }
    }
}
