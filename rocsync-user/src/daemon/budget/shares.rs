//! What each tracked process's probes cost it, as a share of its CPU time.
//!
//! The kernel counts each tracked process's probed calls (`Config::calls`); one call's
//! price is calibrated at start (`Probes::calibrate`). Each second, calls × price over
//! the CPU time the process used is its probes' share (the trap runs on its CPU, so its
//! CPU time includes it).

use std::{collections::HashMap, time::Duration};

use crate::{
    calls::probes::{CallCounts, CallPrices, Stepped},
    units::Share,
};

/// How often shares are measured.
pub(crate) const EVERY: Duration = Duration::from_secs(1);
/// Probes costing a process less CPU than this per second are within any budget: an
/// idle process's few calls are most of its CPU time, and there is nothing to save.
pub(crate) const FLOOR_PER_SECOND: Duration = Duration::from_millis(5);
#[derive(Clone, Copy)]
struct Sample {
    counts: CallCounts,
    cpu_ns: u64,
    at: std::time::Instant,
}

/// The shares of a process's CPU time its probes cost over a period: all of them, and
/// the polling ones. Each is 0 under [`FLOOR_PER_SECOND`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Shares {
    pub all: f64,
    pub polling: f64,
}

impl Shares {
    /// What records, waits and the rest cost: never shed.
    pub(crate) fn kept(&self) -> f64 {
        (self.all - self.polling).max(0.0)
    }
}

/// Each tracked process's last counts, and its probes' share of its CPU time.
#[derive(Default)]
pub(crate) struct Measures {
    /// What one probed call costs here, by where its probes sit; `None` when calibrating
    /// failed (no budget held).
    pub prices: Option<CallPrices>,
    last: HashMap<u32, Sample>,
    /// Each tracked process's probes' share of its CPU time over the last period.
    pub shares: HashMap<u32, f64>,
    /// The share each process's probes cost when its polls were last shed: what the log
    /// said, shown beside the lower share measured while they are off.
    pub shed_at: HashMap<u32, f64>,
}

impl Measures {
    pub(crate) fn new(prices: Option<CallPrices>) -> Self {
        Self {
            prices,
            ..Self::default()
        }
    }

    /// One process's counts now (its calls, of them polls and entries alone; its CPU
    /// time); its shares since the last, when there was one. `stepped`: which of its
    /// probes the kernel single-steps in the runtimes it maps, each kind of call priced
    /// so (a process's calls are counted together, whatever file they hit: the dearer
    /// price is taken).
    ///
    /// `off`: its records and waits were duty-cycled off over the period. Its share, as
    /// `status` and `/metrics` show it, stays what its probes cost while on: the figure
    /// the log said when the cycle began, and what they cost each period they are on (a
    /// period off showed 0 % beside a log that said 100 %).
    pub(crate) fn measure(
        &mut self,
        pid: u32,
        counts: CallCounts,
        cpu_ns: u64,
        (stepped, off): (Stepped, bool),
    ) -> Option<Shares> {
        self.measure_at(
            pid,
            counts,
            cpu_ns,
            (stepped, off),
            std::time::Instant::now(),
        )
    }

    fn measure_at(
        &mut self,
        pid: u32,
        counts: CallCounts,
        cpu_ns: u64,
        (stepped, off): (Stepped, bool),
        at: std::time::Instant,
    ) -> Option<Shares> {
        let now = Sample { counts, cpu_ns, at };
        let before = self.last.insert(pid, now)?;
        let (all, polls) = self.prices?.cost(counts.since(before.counts), stepped);
        let used = now.cpu_ns.saturating_sub(before.cpu_ns) as f64;
        let floor = FLOOR_PER_SECOND.as_nanos() as f64 * (at - before.at).as_secs_f64();
        let share = |probes: f64| {
            if used == 0.0 || probes < floor {
                0.0
            } else {
                (probes / used).min(1.0)
            }
        };
        let shares = Shares {
            all: share(all),
            polling: share(polls),
        };
        match (off, self.shares.get(&pid)) {
            (true, Some(_)) => {}
            _ => _ = self.shares.insert(pid, shares.all),
        }
        Some(shares)
    }

    /// A process's first counts (one just tracked), unless it has some: its share is
    /// then measured from here at the next period.
    pub(crate) fn first_sample(&mut self, pid: u32, counts: CallCounts, cpu_ns: u64) {
        self.last.entry(pid).or_insert(Sample {
            counts,
            cpu_ns,
            at: std::time::Instant::now(),
        });
    }

    /// Forgets processes that are gone.
    pub(crate) fn retain(&mut self, alive: impl Fn(u32) -> bool) {
        self.last.retain(|&p, _| alive(p));
        self.shares.retain(|&p, _| alive(p));
        self.shed_at.retain(|&p, _| alive(p));
    }

    /// The highest share measured in the last period.
    pub(crate) fn highest(&self) -> f64 {
        self.shares.values().copied().fold(0.0, f64::max)
    }
}

/// What a probed call costs here, said in the log; `None` (no budget is held, said)
/// when it cannot be measured.
pub(crate) fn calibrated(probes: &mut crate::calls::probes::Probes) -> Option<CallPrices> {
    match probes.calibrate() {
        Ok(p) => {
            crate::say!(
                "rocsync daemon: a probed call costs {:?} here ({:?} where its probed \
                 instruction is single-stepped, as on ROCm 6.4/7.2's stubs; {:?} for an \
                 entry alone on an emulated one, as their records' are)",
                p.emulated,
                p.stepped,
                p.alone
            );
            Some(p)
        }
        Err(e) => {
            crate::say!("rocsync daemon: warning: no budget is held: {e:#}");
            None
        }
    }
}

/// `pid`'s CPU time (user and system), in ns.
pub(crate) fn cpu_ns(pid: u32) -> Option<u64> {
    let s = crate::os::procfs::Stat::of(pid)?;
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some((s.utime + s.stime) * 1_000_000_000 / ticks)
}

/// What the log says of a process over its budget.
pub(crate) fn shown(share: f64, limit: Share) -> String {
    format!("{:.1}% of its CPU (budget {limit})", share * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Calls, of them polls; none alone (`CallPrices::cost` prices those).
    fn counts(calls: u32, polls: u32) -> CallCounts {
        CallCounts {
            calls,
            polls,
            alone: 0,
        }
    }

    const EMULATED: Stepped = Stepped {
        pairs: false,
        alone: false,
    };
    /// Measures at [`PRICES`].
    fn priced() -> Measures {
        Measures {
            prices: Some(PRICES),
            ..Measures::default()
        }
    }

    const PRICES: CallPrices = CallPrices {
        emulated: Duration::from_micros(2),
        stepped: Duration::from_micros(10),
        alone: Duration::from_micros(1),
    };

    #[test]
    fn a_share_is_calls_times_their_price_over_the_cpu_used() {
        let mut b = priced();
        let t = std::time::Instant::now();
        let s = Duration::from_secs(1);
        let first = b.measure_at(7, counts(u32::MAX - 9, 0), 0, (EMULATED, false), t);
        assert_eq!(first, None, "a first sample has no share");
        // 5 000 calls (across the counter's wrap) × 2 µs in 1 s of CPU: 1 %; of them
        // 4 000 polls: 0.8 %.
        let shares = b
            .measure_at(
                7,
                counts(4_990, 4_000),
                1_000_000_000,
                (EMULATED, false),
                t + s,
            )
            .unwrap();
        assert!((shares.all - 0.01).abs() < 1e-9, "{shares:?}");
        assert!((shares.polling - 0.008).abs() < 1e-9, "{shares:?}");
        assert!((shares.kept() - 0.002).abs() < 1e-9, "{shares:?}");
        // No CPU used: nothing to share.
        let idle = b.measure_at(
            7,
            counts(4_990, 4_000),
            1_000_000_000,
            (EMULATED, false),
            t + 2 * s,
        );
        assert_eq!(idle, Some(Shares::default()));
        // Under the floor (1 000 calls × 2 µs = 2 ms in a second): within any budget.
        let few = b.measure_at(
            7,
            counts(5_990, 4_000),
            1_010_000_000,
            (EMULATED, false),
            t + 3 * s,
        );
        assert_eq!(few, Some(Shares::default()));
        // The same 5 000 calls on single-stepped probes, at 10 µs: 5 %.
        let stepped = b
            .measure_at(
                7,
                counts(10_990, 4_000),
                2_010_000_000,
                (STEPPED, false),
                t + 4 * s,
            )
            .unwrap();
        assert!((stepped.all - 0.05).abs() < 1e-9, "{stepped:?}");
        b.retain(|p| p != 7);
        assert!(b.shares.is_empty());
    }

    const STEPPED: Stepped = Stepped {
        pairs: true,
        alone: false,
    };

    #[test]
    fn a_first_sample_makes_the_next_measure_a_share_and_never_replaces_one() {
        let mut b = priced();
        b.first_sample(7, counts(0, 0), 0);
        let shares = b
            .measure(7, counts(5_000, 4_000), 1_000_000_000, (EMULATED, false))
            .unwrap();
        assert!((shares.all - 0.01).abs() < 1e-9, "{shares:?}");
        // Sampled already: the period goes on from the last measure.
        b.first_sample(7, counts(0, 0), 0);
        let shares = b
            .measure(7, counts(10_000, 8_000), 2_000_000_000, (EMULATED, false))
            .unwrap();
        assert!((shares.all - 0.01).abs() < 1e-9, "{shares:?}");
    }

    /// A duty-cycled process: 100 % while its records and waits are on, next to nothing
    /// while off. `status` and `/metrics` show 100 %, as the log said, not the period off.
    #[test]
    fn a_cycled_process_keeps_its_share_while_on_through_its_periods_off() {
        let mut b = priced();
        let t = std::time::Instant::now();
        let s = Duration::from_secs(1);
        b.measure_at(7, counts(0, 0), 0, (EMULATED, false), t);
        // 1 s of calls at 2 µs in 1 s of CPU: all of it.
        let on = (b.measure_at(
            7,
            counts(500_000, 0),
            1_000_000_000,
            (EMULATED, false),
            t + s,
        ))
        .unwrap();
        assert_eq!(on.all, 1.0);
        // Off: 10 000 synchronizes (20 ms) in 1 s: 2 %, measured so for the cycle.
        let off = b.measure_at(
            7,
            counts(510_000, 0),
            2_000_000_000,
            (EMULATED, true),
            t + 2 * s,
        );
        assert!((off.unwrap().all - 0.02).abs() < 1e-9, "{off:?}");
        assert_eq!((b.shares[&7], b.highest()), (1.0, 1.0));
        // On again: measured as it is.
        b.measure_at(
            7,
            counts(520_000, 0),
            3_000_000_000,
            (EMULATED, false),
            t + 3 * s,
        );
        assert!((b.shares[&7] - 0.02).abs() < 1e-9);
    }
}
