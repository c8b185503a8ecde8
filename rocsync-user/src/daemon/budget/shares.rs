//! What each tracked process's probes cost it, as a share of its CPU time.
//!
//! The kernel counts each tracked process's probed calls (`Config::calls`); one call's
//! price is calibrated at start (`Probes::calibrate`). Each second, calls × price over
//! the CPU time the process used is its probes' share (the trap runs on its CPU, so its
//! CPU time includes it).

use std::{collections::HashMap, time::Duration};

use crate::{probes::CallPrices, units::Share};

/// How often shares are measured.
pub const EVERY: Duration = Duration::from_secs(1);
/// Probes costing a process less CPU than this per second are within any budget: an
/// idle process's few calls are most of its CPU time, and there is nothing to save.
pub const FLOOR_PER_SECOND: Duration = Duration::from_millis(5);
#[derive(Clone, Copy)]
struct Sample {
    calls: u32,
    polls: u32,
    cpu_ns: u64,
    at: std::time::Instant,
}

/// The shares of a process's CPU time its probes cost over a period: all of them, and
/// the polling ones. Each is 0 under [`FLOOR_PER_SECOND`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Shares {
    pub all: f64,
    pub polling: f64,
}

impl Shares {
    /// What records, waits and the rest cost: never shed.
    pub fn kept(&self) -> f64 {
        (self.all - self.polling).max(0.0)
    }
}

/// Each tracked process's last counts, and its probes' share of its CPU time.
#[derive(Default)]
pub struct Measures {
    /// What one probed call costs here, by its probed instruction's kind; `None` when
    /// calibrating failed (no budget held).
    pub prices: Option<CallPrices>,
    last: HashMap<u32, Sample>,
    /// Each tracked process's probes' share of its CPU time over the last period.
    pub shares: HashMap<u32, f64>,
}

impl Measures {
    pub fn new(prices: Option<CallPrices>) -> Self {
        Self {
            prices,
            ..Self::default()
        }
    }

    /// One process's counts now (calls, of them polls; its CPU time); its shares since
    /// the last, when there was one. `stepped`: a runtime it maps has probes on
    /// instructions the kernel single-steps, and its calls are priced so (a process's
    /// calls are counted together, whatever file they hit: the dearer price is taken).
    pub fn measure(
        &mut self,
        pid: u32,
        (calls, polls): (u32, u32),
        cpu_ns: u64,
        stepped: bool,
    ) -> Option<Shares> {
        self.measure_at(
            pid,
            (calls, polls),
            cpu_ns,
            stepped,
            std::time::Instant::now(),
        )
    }

    fn measure_at(
        &mut self,
        pid: u32,
        (calls, polls): (u32, u32),
        cpu_ns: u64,
        stepped: bool,
        at: std::time::Instant,
    ) -> Option<Shares> {
        let now = Sample {
            calls,
            polls,
            cpu_ns,
            at,
        };
        let before = self.last.insert(pid, now)?;
        let cost = self.prices?.of(stepped).as_nanos() as f64;
        let used = now.cpu_ns.saturating_sub(before.cpu_ns) as f64;
        let floor = FLOOR_PER_SECOND.as_nanos() as f64 * (at - before.at).as_secs_f64();
        let share = |n: u32| {
            let probes = n as f64 * cost;
            if used == 0.0 || probes < floor {
                0.0
            } else {
                (probes / used).min(1.0)
            }
        };
        let shares = Shares {
            all: share(now.calls.wrapping_sub(before.calls)),
            polling: share(now.polls.wrapping_sub(before.polls)),
        };
        self.shares.insert(pid, shares.all);
        Some(shares)
    }

    /// A process's first counts (one just tracked), unless it has some: its share is
    /// then measured from here at the next period.
    pub fn first_sample(&mut self, pid: u32, (calls, polls): (u32, u32), cpu_ns: u64) {
        self.last.entry(pid).or_insert(Sample {
            calls,
            polls,
            cpu_ns,
            at: std::time::Instant::now(),
        });
    }

    /// Forgets processes that are gone.
    pub fn retain(&mut self, alive: impl Fn(u32) -> bool) {
        self.last.retain(|&p, _| alive(p));
        self.shares.retain(|&p, _| alive(p));
    }

    /// The highest share measured in the last period.
    pub fn highest(&self) -> f64 {
        self.shares.values().copied().fold(0.0, f64::max)
    }
}

/// What a probed call costs here, said in the log; `None` (no budget is held, said)
/// when it cannot be measured.
pub fn calibrated(probes: &mut crate::probes::Probes) -> Option<CallPrices> {
    match probes.calibrate() {
        Ok(p) => {
            crate::say!(
                "rocsync daemon: a probed call costs {:?} here ({:?} where its probed \
                 instruction is single-stepped, as on ROCm 6.4/7.2's stubs)",
                p.emulated,
                p.stepped
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
pub fn cpu_ns(pid: u32) -> Option<u64> {
    let s = crate::procfs::Stat::of(pid)?;
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some((s.utime + s.stime) * 1_000_000_000 / ticks)
}

/// What the log says of a process over its budget.
pub fn shown(share: f64, limit: Share) -> String {
    format!("{:.1}% of its CPU (budget {limit})", share * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_is_calls_times_their_price_over_the_cpu_used() {
        let mut b = Measures {
            prices: Some(CallPrices {
                emulated: Duration::from_micros(2),
                stepped: Duration::from_micros(10),
            }),
            ..Measures::default()
        };
        let t = std::time::Instant::now();
        let s = Duration::from_secs(1);
        let first = b.measure_at(7, (u32::MAX - 9, 0), 0, false, t);
        assert_eq!(first, None, "a first sample has no share");
        // 5 000 calls (across the counter's wrap) × 2 µs in 1 s of CPU: 1 %; of them
        // 4 000 polls: 0.8 %.
        let shares = b
            .measure_at(7, (4_990, 4_000), 1_000_000_000, false, t + s)
            .unwrap();
        assert!((shares.all - 0.01).abs() < 1e-9, "{shares:?}");
        assert!((shares.polling - 0.008).abs() < 1e-9, "{shares:?}");
        assert!((shares.kept() - 0.002).abs() < 1e-9, "{shares:?}");
        // No CPU used: nothing to share.
        let idle = b.measure_at(7, (4_990, 4_000), 1_000_000_000, false, t + 2 * s);
        assert_eq!(idle, Some(Shares::default()));
        // Under the floor (1 000 calls × 2 µs = 2 ms in a second): within any budget.
        let few = b.measure_at(7, (5_990, 4_000), 1_010_000_000, false, t + 3 * s);
        assert_eq!(few, Some(Shares::default()));
        // The same 5 000 calls on single-stepped probes, at 10 µs: 5 %.
        let stepped = b
            .measure_at(7, (10_990, 4_000), 2_010_000_000, true, t + 4 * s)
            .unwrap();
        assert!((stepped.all - 0.05).abs() < 1e-9, "{stepped:?}");
        b.retain(|p| p != 7);
        assert!(b.shares.is_empty());
    }

    #[test]
    fn a_first_sample_makes_the_next_measure_a_share_and_never_replaces_one() {
        let mut b = Measures {
            prices: Some(CallPrices {
                emulated: Duration::from_micros(2),
                stepped: Duration::from_micros(10),
            }),
            ..Measures::default()
        };
        b.first_sample(7, (0, 0), 0);
        let shares = b.measure(7, (5_000, 4_000), 1_000_000_000, false).unwrap();
        assert!((shares.all - 0.01).abs() < 1e-9, "{shares:?}");
        // Sampled already: the period goes on from the last measure.
        b.first_sample(7, (0, 0), 0);
        let shares = b.measure(7, (10_000, 8_000), 2_000_000_000, false).unwrap();
        assert!((shares.all - 0.01).abs() < 1e-9, "{shares:?}");
    }
}
