//! The signals that end a capture: SIGINT, SIGTERM, SIGHUP and SIGQUIT, caught from the
//! start of a command so that none of them kills rocsync with a target stopped (SIGKILL
//! is the watchdog's).
//!
//! A signal rocsync was started with ignored stays ignored for `run` and `attach`: `nohup`
//! ignores SIGHUP so that a capture outlives the terminal, and a shell without job control
//! ignores SIGINT and SIGQUIT for background commands so that Ctrl-C does not reach them.
//! Catching such a signal would undo that for rocsync and, since `exec` resets caught
//! signals to their default, for the command `run` launches.
//!
//! `run` and `attach` also catch Ctrl-Z's SIGTSTP: a stopped rocsync cannot continue a
//! target held at a library load, so it lets the targets go before it stops itself.

use anyhow::{Context as _, Result};
use tokio::signal::unix::{Signal, SignalKind, signal};

const ENDING: [(SignalKind, i32, &str); 4] = [
    (SignalKind::interrupt(), libc::SIGINT, "SIGINT"),
    (SignalKind::terminate(), libc::SIGTERM, "SIGTERM"),
    (SignalKind::hangup(), libc::SIGHUP, "SIGHUP"),
    (SignalKind::quit(), libc::SIGQUIT, "SIGQUIT"),
];

/// Each ending signal's name and its stream (`None`: left ignored, as inherited), and
/// Ctrl-Z's SIGTSTP where a capture handles it.
pub struct Signals {
    ending: [(Option<Signal>, &'static str); 4],
    suspend: Option<Signal>,
}

impl Signals {
    /// For `run` and `attach`: catches each ending signal, and SIGTSTP, not inherited as
    /// ignored. SIGTSTP is caught so that rocsync continues the targets before it stops
    /// itself (`Session::suspend`): stopped, it could not continue one held at a load.
    pub fn catch() -> Result<Self> {
        let mut signals = Self::install(true)?;
        if !inherited_ignored(libc::SIGTSTP) {
            signals.suspend = Some(catching(SignalKind::from_raw(libc::SIGTSTP))?);
        }
        Ok(signals)
    }

    /// For the daemon: catches all four (its SIGHUP reloads; a service manager's SIGTERM
    /// stops it), whatever it was started with. It holds no target at a load, so Ctrl-Z
    /// may stop it as it stops any program.
    pub fn catch_all() -> Result<Self> {
        Self::install(false)
    }

    fn install(keep_ignored: bool) -> Result<Self> {
        let mut ending = ENDING.map(|(_, _, name)| (None, name));
        for (slot, (kind, number, _)) in ending.iter_mut().zip(ENDING) {
            if !(keep_ignored && inherited_ignored(number)) {
                slot.0 = Some(catching(kind)?);
            }
        }
        Ok(Self {
            ending,
            suspend: None,
        })
    }

    /// For a capture's loop: the next ending signal, or `None` for Ctrl-Z (SIGTSTP).
    pub async fn next_or_suspend(&mut self) -> Option<&'static str> {
        tokio::select! {
            s = next_of(&mut self.ending) => Some(s),
            _ = recv(&mut self.suspend) => None,
        }
    }

    /// The ending signals left ignored, by name.
    pub fn ignored(&self) -> Vec<&'static str> {
        self.ending
            .iter()
            .filter(|(s, _)| s.is_none())
            .map(|(_, name)| *name)
            .collect()
    }

    /// Says which signals stay ignored, if any, and what still stops the capture.
    pub fn say_ignored(&self) {
        let ignored = self.ignored();
        if ignored.is_empty() {
            return;
        }
        let stops: Vec<_> = self.ending.iter().filter(|(s, _)| s.is_some()).collect();
        let stops = match stops.as_slice() {
            [] => "only --duration, the command's exit or SIGKILL".to_string(),
            s => s.iter().map(|(_, n)| *n).collect::<Vec<_>>().join(" or "),
        };
        let (was, stays) = match ignored.len() {
            1 => ("was", "stays"),
            _ => ("were", "stay"),
        };
        crate::say!(
            "rocsync: {} {was} ignored when rocsync started (nohup, a background job) and \
             {stays} ignored; {stops} stops the capture",
            ignored.join(", "),
        );
    }

    /// The next ending signal received (including one received before this was called).
    pub async fn next(&mut self) -> &'static str {
        next_of(&mut self.ending).await
    }
}

async fn next_of(ending: &mut [(Option<Signal>, &'static str); 4]) -> &'static str {
    let [a, b, c, d] = ending;
    tokio::select! {
        _ = recv(&mut a.0) => a.1,
        _ = recv(&mut b.0) => b.1,
        _ = recv(&mut c.0) => c.1,
        _ = recv(&mut d.0) => d.1,
    }
}

fn catching(kind: SignalKind) -> Result<Signal> {
    signal(kind).context("installing signal handlers")
}

async fn recv(signal: &mut Option<Signal>) {
    match signal {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending().await,
    }
}

/// Whether `number`'s disposition is SIG_IGN (as inherited across `exec`).
fn inherited_ignored(number: i32) -> bool {
    // SAFETY: sigaction with a null new action only reads the current one into `old`.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(number, std::ptr::null(), &mut old) == 0
            && old.sa_sigaction == libc::SIG_IGN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One test owns the process's SIGQUIT disposition (no other unit test touches it);
    /// the others are left as the harness was started (`nohup` ignores SIGHUP).
    #[tokio::test]
    async fn an_inherited_ignored_signal_stays_ignored_unless_all_are_caught() {
        let mut expected: Vec<_> = ENDING
            .iter()
            .filter(|(_, n, _)| *n != libc::SIGQUIT && inherited_ignored(*n))
            .map(|(_, _, name)| *name)
            .collect();
        expected.push("SIGQUIT");
        // SAFETY: sets SIGQUIT's disposition in this test process only.
        unsafe { libc::signal(libc::SIGQUIT, libc::SIG_IGN) };
        let kept = Signals::catch().unwrap();
        assert_eq!(kept.ignored(), expected);
        assert!(inherited_ignored(libc::SIGQUIT), "catch() left it ignored");
        let all = Signals::catch_all().unwrap();
        assert!(all.ignored().is_empty());
        assert!(!inherited_ignored(libc::SIGQUIT), "catch_all() caught it");
    }
}
