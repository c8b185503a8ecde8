//! The overhead budget: what each tracked process's probes cost it, as a share of its
//! CPU time, held under a limit by shedding the probes resolution does not need.
//!
//! The kernel counts each tracked process's probed calls (`Config::calls`); one call's
//! price is calibrated at start (`Probes::calibrate`). Each second, calls × price over
//! the CPU time the process used is its probes' share (the trap runs on its CPU, so its
//! CPU time includes it). Above the limit, the polling probes (`*EventQuery`) of the
//! files it maps come off: a poll resolves nothing, unlike records and waits, which are
//! never shed. A shed probe cannot count what it no longer sees, so it is put back after
//! a while (2 s, doubling to 64 s while the process keeps polling) and measured again.
//! What was shed, and from when, is said in the log, in `/metrics` and in every trace
//! that overlaps it.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex},
    time::Duration,
};

use serde_json::{Value, json};

use crate::{probes::CallPrices, units::Share};

/// How often shares are measured.
pub const EVERY: Duration = Duration::from_secs(1);
/// The first wait before shed probes are tried again, and the longest.
pub const FIRST_RETRY: Duration = Duration::from_secs(2);
pub const LAST_RETRY: Duration = Duration::from_secs(64);
/// Probes costing a process less CPU than this per second are within any budget: an
/// idle process's few calls are most of its CPU time, and there is nothing to save.
pub const FLOOR_PER_SECOND: Duration = Duration::from_millis(5);
/// Spans remembered for the traces that overlap them.
const SPANS_KEPT: usize = 256;

/// One API not probed in one library for a while (µs since the epoch: a trace's rows are
/// at `baseTimeNanoseconds` / 1000 + `ts`).
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    pub api: &'static str,
    pub library: String,
    /// The file's (device, inode): two files may show the same path.
    file: (u64, u64),
    /// When the budget shed it.
    pub shed_us: u64,
    /// When its probes were off; `None`: they are being detached, and still record.
    pub from_us: Option<u64>,
    /// `None`: not probed still.
    pub until_us: Option<u64>,
}

/// What was shed, shared with the traces being written (they read it when they finish).
#[derive(Clone, Debug, Default)]
pub struct ShedLog(Arc<Mutex<Vec<Span>>>);

impl ShedLog {
    /// `api` in `library` (the file `file`) is being shed: not probed once its probes
    /// are detached ([`Self::detached`]).
    pub fn begin(&self, api: &'static str, library: String, file: (u64, u64)) {
        let mut spans = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if spans.len() >= SPANS_KEPT {
            // The oldest ended one goes; a log of only open spans grows no further.
            if let Some(i) = spans.iter().position(|s| s.until_us.is_some()) {
                spans.remove(i);
            }
        }
        spans.push(Span {
            api,
            library,
            file,
            shed_us: now_us(),
            from_us: None,
            until_us: None,
        });
    }

    /// The probes shed in `file` no longer fire: not probed from now.
    pub fn detached(&self, file: (u64, u64)) {
        let mut spans = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = now_us();
        for s in spans
            .iter_mut()
            .filter(|s| s.file == file && s.until_us.is_none())
        {
            s.from_us.get_or_insert(now);
        }
    }

    /// Whether `file`'s shed probes are still being detached (not to be put back yet:
    /// both would fire).
    pub fn detaching(&self, file: (u64, u64)) -> bool {
        let spans = self.0.lock().unwrap_or_else(|e| e.into_inner());
        spans
            .iter()
            .any(|s| s.file == file && s.from_us.is_none() && s.until_us.is_none())
    }

    /// `api` in `file` is probed again from now (a span whose probes were never off is
    /// forgotten).
    pub fn end(&self, api: &'static str, file: (u64, u64)) {
        let mut spans = self.0.lock().unwrap_or_else(|e| e.into_inner());
        spans.retain(|s| !(s.api == api && s.file == file && s.from_us.is_none()));
        for s in spans.iter_mut().filter(|s| s.api == api && s.file == file) {
            s.until_us.get_or_insert_with(now_us);
        }
    }

    /// The spans that overlap `[from_us, now]`, for a trace's `rocsync` object.
    pub fn overlapping(&self, from_us: u64) -> Value {
        let spans = self.0.lock().unwrap_or_else(|e| e.into_inner());
        spans
            .iter()
            .filter(|s| s.from_us.is_some() && s.until_us.is_none_or(|u| u >= from_us))
            .map(|s| {
                json!({
                    "api": s.api, "library": s.library, "reason": "budget",
                    "shed_unix_us": s.shed_us, "from_unix_us": s.from_us,
                    "until_unix_us": s.until_us,
                })
            })
            .collect()
    }
}

/// Now on the traces' clock.
pub fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

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

#[derive(Default)]
pub struct Budget {
    /// What one probed call costs here, by its probed instruction's kind; `None` when
    /// calibrating failed (no budget held).
    pub prices: Option<CallPrices>,
    last: HashMap<u32, Sample>,
    /// Each tracked process's probes' share of its CPU time over the last period.
    pub shares: HashMap<u32, f64>,
    /// Processes over the budget with nothing left to shed, and why (said once each).
    pub over: BTreeMap<u32, super::over::Over>,
    pub log: ShedLog,
}

impl Budget {
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
        self.over.retain(|&p, _| alive(p));
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
        let mut b = Budget {
            prices: Some(CallPrices {
                emulated: Duration::from_micros(2),
                stepped: Duration::from_micros(10),
            }),
            ..Budget::default()
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
        let mut b = Budget {
            prices: Some(CallPrices {
                emulated: Duration::from_micros(2),
                stepped: Duration::from_micros(10),
            }),
            ..Budget::default()
        };
        b.first_sample(7, (0, 0), 0);
        let shares = b.measure(7, (5_000, 4_000), 1_000_000_000, false).unwrap();
        assert!((shares.all - 0.01).abs() < 1e-9, "{shares:?}");
        // Sampled already: the period goes on from the last measure.
        b.first_sample(7, (0, 0), 0);
        let shares = b.measure(7, (10_000, 8_000), 2_000_000_000, false).unwrap();
        assert!((shares.all - 0.01).abs() < 1e-9, "{shares:?}");
    }

    #[test]
    fn spans_overlapping_a_trace_are_the_open_ones_and_those_that_ended_inside_it() {
        let log = ShedLog::default();
        log.begin("hipEventQuery", "/a".into(), (1, 2));
        log.detached((1, 2));
        log.end("hipEventQuery", (1, 3));
        log.end("hipEventQuery", (1, 2));
        let after = now_us() + 1;
        log.begin("cudaEventQuery", "/a".into(), (1, 3));
        log.detached((1, 3));
        let spans = log.overlapping(after);
        let spans = spans.as_array().unwrap();
        assert_eq!(spans.len(), 1);
        assert_eq!(spans[0]["api"], "cudaEventQuery");
        assert!(spans[0]["until_unix_us"].is_null());
    }

    #[test]
    fn a_span_begins_once_its_probes_are_detached() {
        let log = ShedLog::default();
        let asked = now_us();
        log.begin("hipEventQuery", "/a".into(), (1, 2));
        // Still detaching: still recorded, so no trace is told otherwise.
        assert!(log.detaching((1, 2)));
        assert_eq!(log.overlapping(0), json!([]));
        log.detached((1, 2));
        assert!(!log.detaching((1, 2)));
        let spans = log.overlapping(0);
        let shed = spans[0]["shed_unix_us"].as_u64().unwrap();
        assert!(shed >= asked, "{spans}");
        assert!(
            spans[0]["from_unix_us"].as_u64().unwrap() >= shed,
            "{spans}"
        );
        // Put back before its probes were ever off: no span at all.
        log.begin("hipEventQuery", "/b".into(), (3, 4));
        log.end("hipEventQuery", (3, 4));
        log.detached((3, 4));
        assert!(!log.detaching((3, 4)));
        assert_eq!(log.overlapping(0).as_array().unwrap().len(), 1);
    }
}
