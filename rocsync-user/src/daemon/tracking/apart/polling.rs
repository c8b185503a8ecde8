//! A runtime file's polling probes (`*EventQuery`), attached apart from its others so
//! that the budget (`budget/period.rs`) can take them off and put them back: a poll
//! resolves nothing, unlike records and waits, which are never shed. Probes are
//! file-wide: shedding them stops recording the polls of every process mapping the file.
//! A shed probe cannot count what it no longer sees, so it is put back after a while
//! (2 s, doubling to 64 s while the process keeps polling) and measured again.

use std::{collections::BTreeSet, time::Duration};

use anyhow::Result;
use rocsync_common::Api;
use tokio::time::Instant;

use crate::calls::{
    backend::Runtime,
    probes::{
        ApiChoice, LinkGroup, Probes, ReturnProbes,
        elf::{SymbolError, library::OpenedLibrary},
    },
};
use crate::daemon::{tracking::apart::shed_log::ShedLog, untrusted};

/// The first wait before shed probes are tried again, and the longest.
const FIRST_RETRY: Duration = Duration::from_secs(2);
const LAST_RETRY: Duration = Duration::from_secs(64);

pub(crate) enum PollingState {
    Probed(LinkGroup),
    Shed {
        retry_at: Instant,
    },
    /// Its file is done with (its links handed over to be detached).
    Released,
}

/// What the polling probes are attached to.
struct Target {
    lib: OpenedLibrary,
    runtime: &'static Runtime,
    carried: bool,
}

impl Target {
    /// Attaches its polling probes, for `pid` (where probes are per process): their
    /// entries only, alone where the code allows (`probes/alone.rs`). A poll's count is
    /// its entry; its return (its duration, its error) is attached apart, with records',
    /// only while something records (`returns.rs`).
    fn attach(&self, probes: &mut Probes, pid: Option<u32>) -> Result<LinkGroup> {
        let choice = ApiChoice {
            skip: self.runtime.apis().filter(|a| !a.is_polling()).collect(),
            returns: ReturnProbes::Needed,
            ..ApiChoice::default()
        };
        let path = self.lib.path();
        probes.attach_group(self.runtime, &choice, &path, pid, self.carried)
    }

    fn library(&self) -> String {
        untrusted::shown(&self.lib.shown.to_string_lossy())
    }

    fn file(&self) -> (u64, u64) {
        (self.lib.dev, self.lib.ino)
    }

    fn apis(&self) -> impl Iterator<Item = Api> + '_ {
        self.runtime.apis().filter(|a| a.is_polling())
    }

    fn names(&self) -> String {
        self.apis()
            .map(|a| a.symbol())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

pub(crate) struct Polling {
    target: Target,
    pub state: PollingState,
    /// The wait before the next try once shed.
    backoff: Duration,
    /// When last put back: shed again soon after, the wait doubles.
    restored: Option<Instant>,
    log: ShedLog,
}

impl Polling {
    /// The polling APIs it probes (or would).
    pub(crate) fn apis(&self) -> impl Iterator<Item = Api> + '_ {
        self.target.apis()
    }

    /// Its links, if attached, as its file is released.
    pub(crate) fn release(mut self) -> Option<LinkGroup> {
        match std::mem::replace(&mut self.state, PollingState::Released) {
            PollingState::Probed(links) => Some(links),
            PollingState::Shed { .. } => {
                self.end_spans();
                None
            }
            PollingState::Released => None,
        }
    }

    fn end_spans(&self) {
        for api in self.target.apis() {
            self.log.end(api.symbol(), self.target.file());
        }
    }

    pub(crate) fn is_shed(&self) -> bool {
        matches!(self.state, PollingState::Shed { .. })
    }

    fn shed(&mut self, now: Instant) -> Option<LinkGroup> {
        // Shed again soon after a retry: the process still polls; the wait doubles.
        self.backoff = match self.restored {
            Some(at) if now.duration_since(at) <= self.backoff + FIRST_RETRY => {
                (self.backoff * 2).min(LAST_RETRY)
            }
            _ => FIRST_RETRY,
        };
        let retry_at = now + self.backoff;
        let PollingState::Probed(links) =
            std::mem::replace(&mut self.state, PollingState::Shed { retry_at })
        else {
            return None;
        };
        for api in self.target.apis() {
            self.log
                .begin(api.symbol(), self.target.library(), self.target.file());
        }
        Some(links)
    }
}

impl Polling {
    /// `lib`'s polling probes, attached for `pid`; `None` when it has none (or they
    /// could not be attached: said).
    pub(crate) fn attach(
        probes: &mut Probes,
        lib: OpenedLibrary,
        (runtime, carried): (&'static Runtime, bool),
        pid: u32,
        log: &ShedLog,
    ) -> Option<Polling> {
        let target = Target {
            lib,
            runtime,
            carried,
        };
        match target.attach(probes, Some(pid)) {
            Ok(links) => Some(Polling {
                target,
                state: PollingState::Probed(links),
                backoff: FIRST_RETRY,
                restored: None,
                log: log.clone(),
            }),
            Err(e) => {
                // A file without them has nothing to shed; any other failure is said.
                if !is_unusable(&e) {
                    crate::say!(
                        "rocsync daemon: warning: {} (pid {pid}): polling calls not probed: {e:#}",
                        target.library()
                    );
                }
                None
            }
        }
    }
}

/// Sheds the polling probes of the `probed` files (with the processes that map each)
/// the processes `over` map (said once detached); puts back those whose wait is over
/// (measured again at the next period), and returns what it says of those.
pub(crate) fn enforce<'a>(
    probes: &mut Probes,
    probed: impl Iterator<Item = (&'a BTreeSet<u32>, &'a mut Polling)>,
    over: &BTreeSet<u32>,
    now: Instant,
) -> Vec<String> {
    let mut said = Vec::new();
    for (pids, p) in probed {
        if !matches!(p.state, PollingState::Probed(_)) || pids.is_disjoint(over) {
            said.extend(p.restore(probes, pids, |retry_at| retry_at <= now, now));
            continue;
        }
        let Some(links) = p.shed(now) else {
            continue;
        };
        // Detached in the background (each unregistration waits for the kernel); not
        // probed, and said so, only once none of them fires.
        let line = format!(
            "{} not probed in {} (tried again in {:?})",
            p.target.names(),
            p.target.library(),
            p.backoff
        );
        let (log, file) = (p.log.clone(), p.target.file());
        drop(probes.release_then(links, move || {
            log.detached(file);
            crate::say!("rocsync daemon: budget: {line}");
        }));
    }
    said
}

/// Puts back the shed polling probes of the `probed` files that `due` says are due (by
/// their retry time); returns what it says of those.
pub(crate) fn restore<'a>(
    probes: &mut Probes,
    probed: impl Iterator<Item = (&'a BTreeSet<u32>, &'a mut Polling)>,
    due: impl Fn(Instant) -> bool,
    now: Instant,
) -> Vec<String> {
    (probed.filter_map(|(pids, p)| p.restore(probes, pids, &due, now))).collect()
}

/// Polling APIs shed now, of the `probed` files: how many files each.
pub(crate) fn shed_apis<'a>(
    probed: impl Iterator<Item = (&'a BTreeSet<u32>, &'a mut Polling)>,
) -> Vec<(&'static str, usize)> {
    let mut shed = std::collections::BTreeMap::new();
    for (_, p) in probed {
        for api in p.apis() {
            *shed.entry(api.symbol()).or_default() += usize::from(p.is_shed());
        }
    }
    shed.into_iter().collect()
}

impl Polling {
    /// Puts its probes back if shed and `due` (by its retry time); what it says of it.
    fn restore(
        &mut self,
        probes: &mut Probes,
        pids: &BTreeSet<u32>,
        due: impl Fn(Instant) -> bool,
        now: Instant,
    ) -> Option<String> {
        let PollingState::Shed { retry_at } = self.state else {
            return None;
        };
        // Not while its probes are still being detached: both would fire.
        if !due(retry_at) || self.log.detaching(self.target.file()) {
            return None;
        }
        match self.target.attach(probes, pids.first().copied()) {
            Ok(links) => {
                self.end_spans();
                self.state = PollingState::Probed(links);
                self.restored = Some(now);
                Some(format!(
                    "{} probed again in {}",
                    self.target.names(),
                    self.target.library()
                ))
            }
            Err(e) => {
                self.state = PollingState::Shed {
                    retry_at: now + self.backoff,
                };
                Some(format!(
                    "warning: {} not probed again in {}: {e:#}",
                    self.target.names(),
                    self.target.library()
                ))
            }
        }
    }
}

/// Whether attaching failed for the file's content, not for a passing reason (a read
/// error, descriptors short, a kernel refusal), which the next look tries again.
pub(crate) fn is_unusable(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<SymbolError>(),
        Some(SymbolError::NotElf { .. } | SymbolError::NoneHooked(_))
    )
}
