//! The budget's duty cycle. Records, stream waits and destroys are never shed (a wait
//! resolves to its record), so a process that makes them flat out can cost more than the
//! budget with nothing left to shed. Their probes in the files such a process maps are
//! then on for one budget period in every N (N from their share measured while on) and
//! off between, and their counts over the periods off are estimated from the period on
//! before (`estimate.rs`). Synchronizes keep their probes: stalls and hangs are seen
//! whatever the cycle. A trace (or `--return-probes all`) puts the probes back on first,
//! and holds the cycle until it ends: no trace has a gap. The flight recorder does not
//! hold it: it records the periods on, the returns cycled with the entries, and says
//! the periods off with the calls estimated in them (`shed_log.rs`).

use std::collections::{BTreeSet, VecDeque};

use crate::{
    calls::probes::Probes,
    daemon::tracking::apart::{cycled::Cycled, returns::FileReturns},
};

/// A cycled file's probes, with its returns where the cycle takes them too.
pub(crate) type CycledFile<'a> = (&'a mut Cycled, Option<&'a mut FileReturns>);

/// The longest cycle: probed one period in this many.
pub(crate) const MAX_EVERY: u32 = 30;
/// Spans without the probes kept for the hang chains (`blind_between`).
const SPANS_KEPT: usize = 64;

/// The node's cycle: every cycled file on and off together, so that one estimate covers
/// them (counts are kept by API and device, not by file).
#[derive(Default)]
pub(crate) struct DutyCycle {
    /// On one period in this many; `None`: not cycling.
    every: Option<u32>,
    /// Periods since the last one on (0: on now).
    tick: u32,
    /// A recording put the probes on mid-period: the period on now is not whole.
    partial: bool,
    /// What stays probed (synchronizes, polls) costs while the rest is off: the highest
    /// share of a cycled process over the last period off.
    off_share: f64,
    /// The processes cycled, and the label groups they are counted in (every tracked
    /// process of those groups is one of them: `cycling.rs`).
    pub pids: BTreeSet<u32>,
    pub groups: BTreeSet<u32>,
    /// Processes cycled at some moment (their hang chains check the spans), while alive.
    were: BTreeSet<u32>,
    /// Spans (the probes' clock, ns) the cycled files' probes were off; the last open.
    blind: VecDeque<(u64, Option<u64>)>,
}

/// What a period's turn of the cycle did.
#[derive(Debug, PartialEq)]
pub(crate) enum Turn {
    /// The probes went on (the period after is measured whole).
    On,
    /// They went off: the period before was on.
    Off,
    /// They stay off.
    StillOff,
    /// Not cycling.
    Idle,
}

impl DutyCycle {
    /// The share of the time the cycled files are probed (1: not cycling).
    pub(crate) fn duty(&self) -> f64 {
        self.every.map_or(1.0, |n| 1.0 / f64::from(n))
    }

    pub(crate) fn cycling(&self) -> bool {
        self.every.is_some()
    }

    /// Cycling, and the cycled files' probes on for this period.
    pub(crate) fn on_now(&self) -> bool {
        self.every.is_some() && self.tick == 0
    }

    /// Whether the period on now began on (not turned on midway by a recording): read
    /// once, a partial period is followed by a whole one.
    pub(crate) fn take_partial(&mut self) -> bool {
        std::mem::take(&mut self.partial)
    }

    pub(crate) fn every(&self) -> Option<u32> {
        self.every
    }

    /// The share what stays probed cost over the last period off.
    pub(crate) fn note_off(&mut self, share: f64) {
        self.off_share = share;
    }

    pub(crate) fn off_share(&self) -> f64 {
        self.off_share
    }

    /// Starts the cycle over `pids` (counted in `groups`); its first period is on and
    /// measures what the estimate starts from.
    pub(crate) fn start(&mut self, pids: BTreeSet<u32>, groups: BTreeSet<u32>) {
        self.were.extend(&pids);
        (self.pids, self.groups) = (pids, groups);
        (self.tick, self.off_share) = (0, 0.0);
        self.every = Some(2);
    }

    /// Sizes the cycle for a share `on` of the CPU while probed whole (`off` of it while
    /// the cycled probes are off) under a budget of `limit`: on one period in N, N the
    /// least with `off + (on − off) / N ≤ limit` (2 to [`MAX_EVERY`]); `None` when even
    /// [`MAX_EVERY`] cannot hold it (`off` is over the budget on its own).
    pub(crate) fn size(&mut self, on: f64, off: f64, limit: f64) -> Option<u32> {
        let room = limit - off;
        let n = match room > 0.0 {
            true => ((on - off) / room).ceil(),
            false => f64::INFINITY,
        };
        self.every = Some(n.clamp(2.0, f64::from(MAX_EVERY)) as u32);
        (n <= f64::from(MAX_EVERY)).then_some(n.max(2.0) as u32)
    }

    /// Ends the cycle: every cycled file's probes on again.
    pub(crate) fn end<'a>(
        &mut self,
        probes: &mut Probes,
        files: impl Iterator<Item = CycledFile<'a>>,
    ) {
        self.every = None;
        self.hold(probes, files);
        (self.tick, self.partial) = (0, false);
        self.pids.clear();
        self.groups.clear();
    }

    /// Something records: every cycled file's probes on now, the cycle held at a period
    /// on (it goes on from there once nothing records).
    pub(crate) fn hold<'a>(
        &mut self,
        probes: &mut Probes,
        files: impl Iterator<Item = CycledFile<'a>>,
    ) {
        let mut any = false;
        for (f, returns) in files.filter(|(f, _)| !f.is_on()) {
            if let Err(e) = f.on(probes, None, returns) {
                crate::say!(
                    "rocsync daemon: warning: {}: records and waits not probed: {e:#}",
                    f.library()
                );
            }
            any = true;
        }
        if any {
            self.close_blind();
            self.partial = true;
        }
        self.tick = 0;
    }

    /// The next period: the cycled files' probes go on or off as their turn says.
    pub(crate) fn turn<'a>(
        &mut self,
        probes: &mut Probes,
        files: impl Iterator<Item = CycledFile<'a>>,
    ) -> Turn {
        let Some(every) = self.every else {
            return Turn::Idle;
        };
        let files: Vec<CycledFile<'a>> = files.filter(|(f, _)| f.cycling).collect();
        self.tick = (self.tick + 1) % every;
        match self.tick {
            0 => {
                self.hold(probes, files.into_iter());
                self.partial = false;
                Turn::On
            }
            1 => {
                for (f, returns) in files {
                    f.off(probes, returns);
                }
                self.blind
                    .push_back((crate::os::clock::monotonic_ns() as u64, None));
                while self.blind.len() > SPANS_KEPT {
                    self.blind.pop_front();
                }
                Turn::Off
            }
            _ => Turn::StillOff,
        }
    }

    fn close_blind(&mut self) {
        if let Some((_, until)) = self.blind.back_mut()
            && until.is_none()
        {
            *until = Some(crate::os::clock::monotonic_ns() as u64);
        }
    }

    /// Whether `pid` was cycled at some moment (its chains check the spans).
    pub(crate) fn was_cycled(&self, pid: u32) -> bool {
        self.were.contains(&pid)
    }

    /// Forgets the processes gone.
    pub(crate) fn retain(&mut self, alive: impl Fn(u32) -> bool) {
        self.were.retain(|&p| alive(p));
    }

    /// Whether the cycled files' records and waits were unprobed at some moment in
    /// `(from_ns, to_ns]` (the probes' clock): one made then may be missing.
    pub(crate) fn blind_between(&self, from_ns: u64, to_ns: u64) -> bool {
        let kept_from = self.blind.front().map_or(u64::MAX, |(f, _)| *f);
        // Spans forgotten: older than the oldest kept, assume the worst.
        (self.blind.len() >= SPANS_KEPT && from_ns < kept_from)
            || (self.blind.iter())
                .any(|&(off, on)| off <= to_ns && on.is_none_or(|on| on > from_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blind_span_covers_the_moments_between_its_off_and_its_on() {
        let mut c = DutyCycle::default();
        c.blind.push_back((100, Some(200)));
        c.blind.push_back((500, None));
        assert!(!c.blind_between(0, 99));
        assert!(c.blind_between(0, 100));
        assert!(c.blind_between(150, 160));
        assert!(!c.blind_between(200, 499), "on again at 200");
        assert!(c.blind_between(200, 501));
        assert!(c.blind_between(10_000, 20_000), "still off");
    }

    #[test]
    fn a_cycle_is_sized_so_that_what_stays_probed_and_its_share_on_fit_the_budget() {
        let mut c = DutyCycle::default();
        // 5.4 % probed whole, nothing left while off: on 1 in 6 (0.9 %).
        assert_eq!(c.size(0.054, 0.0, 0.01), Some(6));
        assert!((c.duty() - 1.0 / 6.0).abs() < 1e-12);
        assert_eq!(c.size(0.011, 0.0, 0.01), Some(2));
        // 0.5 % stays probed: the other 4.9 % gets the 0.5 % left, on 1 in 10.
        assert_eq!(c.size(0.054, 0.005, 0.01), Some(10));
        // What stays probed is over the budget on its own: cycled as far as it goes,
        // and said not held.
        assert_eq!(c.size(0.054, 0.019, 0.01), None);
        assert_eq!(c.every(), Some(MAX_EVERY));
        assert_eq!(c.size(1.0, 0.001, 0.01), None);
    }
}
