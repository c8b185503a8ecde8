//! What one trapped call costs on this machine, measured as the bench measures it: the
//! same loop timed bare and then with call probes on the function it calls (the daemon's
//! own, which it does not track: the probes trap and return). Priced per placement, as
//! the runtimes' calls are probed: a pair on an emulated first instruction (5.2, the
//! simulated runtime), a pair on a single-stepped one (6.4/7.2's `sub`), and an entry
//! alone on the emulated `call` past a stub's frame setup — placed there by the probes'
//! own placement, not by hand. The daemon's budget multiplies each by the calls a
//! process made of that kind.

use std::{hint::black_box, os::unix::fs::FileExt as _, path::Path, time::Duration, time::Instant};

use anyhow::{Context as _, Result, bail};
use aya::Ebpf;
use rocsync_common::Api;

use super::{CallCounts, attach::links::Links, maps, placement};

/// Calls per timed round: about 0.1 s probed on an emulated instruction; a tenth of
/// them on a single-stepped one (each ~10 times dearer in a VM: the daemon's start is
/// not held up for seconds).
const CALLS: u64 = 50_000;
const STEPPED_CALLS: u64 = CALLS / 10;
const ROUNDS: usize = 3;
/// Measurements of a price before calibrating is given up.
const TRIES: usize = 3;

// The function probed while calibrating: nothing but a call. Written out so that it
// begins as runtime functions do, with a `push` the kernel emulates: a compiler's first
// instruction here (a store) would be single-stepped, several times dearer in a VM
// (measured: 13.9 us against 1.7 us per call), which is not what the probes cost.
std::arch::global_asm!(
    ".globl rocsync_calibration_call",
    ".type rocsync_calibration_call, @function",
    "rocsync_calibration_call:",
    "push rbp",
    "lea rax, [rdi + 1]",
    "pop rbp",
    "ret",
    ".size rocsync_calibration_call, . - rocsync_calibration_call",
    // The same, beginning as ROCm 6.4/7.2's dispatch stubs do past their `endbr64`:
    // with a `sub` of the stack pointer, which the kernel single-steps.
    ".globl rocsync_calibration_stepped",
    ".type rocsync_calibration_stepped, @function",
    "rocsync_calibration_stepped:",
    "sub rsp, 8",
    "lea rax, [rdi + 1]",
    "add rsp, 8",
    "ret",
    ".size rocsync_calibration_stepped, . - rocsync_calibration_stepped",
    // Shaped as those stubs are: `sub`, the argument stored in the frame, then a `call`
    // the kernel emulates, where an entry alone goes (`alone.rs`).
    ".globl rocsync_calibration_stub",
    ".type rocsync_calibration_stub, @function",
    "rocsync_calibration_stub:",
    "sub rsp, 24",
    "mov [rsp + 8], rdi",
    "call 2f",
    "add rsp, 24",
    "ret",
    "2:",
    "lea rax, [rdi + 1]",
    "ret",
    ".globl rocsync_calibration_stub_end",
    "rocsync_calibration_stub_end:",
    ".size rocsync_calibration_stub, . - rocsync_calibration_stub",
);

unsafe extern "C" {
    safe fn rocsync_calibration_call(x: u64) -> u64;
    safe fn rocsync_calibration_stepped(x: u64) -> u64;
    safe fn rocsync_calibration_stub(x: u64) -> u64;
    static rocsync_calibration_stub_end: u8;
}

/// What a probed call costs here, by where its probes sit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CallPrices {
    /// A pair on an emulated instruction (`push`, `nop`, relative branches): the
    /// simulated runtime's entries, 5.2's.
    pub emulated: Duration,
    /// A pair on an instruction single-stepped out of line: a second trap (ROCm 6.4/7.2's
    /// stubs' `sub`), several times dearer in a VM.
    pub stepped: Duration,
    /// An entry alone (no return probe) on an emulated instruction: what a record, a
    /// stream wait, a destroy or a poll costs the daemon counting, 6.4/7.2 included.
    pub alone: Duration,
}

/// Which of a process's probes sit on instructions the kernel single-steps: its pairs',
/// and its entries alone (records, stream waits, destroys, polls while nothing records).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stepped {
    pub pairs: bool,
    pub alone: bool,
}

impl CallPrices {
    /// A pair's price.
    pub fn of(&self, stepped: bool) -> Duration {
        match stepped {
            true => self.stepped,
            false => self.emulated,
        }
    }

    /// What `counts` cost a process whose probes sit as `stepped` says, in ns: all its
    /// calls, and its polls. A single-stepped entry alone is priced as a pair on a
    /// single-stepped instruction (its one trap is most of that: bench/real-runtime.md).
    /// Polls are entries alone while nothing records, pairs while something does (their
    /// returns attached): the kernel counts which calls were alone, not which polls, so
    /// polls are taken for alone as far as the entries alone go.
    pub fn cost(&self, counts: CallCounts, stepped: Stepped) -> (f64, f64) {
        let pair = self.of(stepped.pairs).as_nanos() as f64;
        let alone = match stepped.alone {
            true => self.stepped,
            false => self.alone,
        }
        .as_nanos() as f64;
        let alone_calls = counts.alone.min(counts.calls);
        let paired = (counts.calls - alone_calls) as f64 * pair;
        let polls_alone = counts.polls.min(alone_calls);
        let polls = polls_alone as f64 * alone + (counts.polls - polls_alone) as f64 * pair;
        (paired + alone_calls as f64 * alone, polls)
    }
}

fn round(f: extern "C" fn(u64) -> u64, calls: u64) -> Duration {
    let start = Instant::now();
    let mut x = 0;
    for i in 0..calls {
        x = f(x ^ i);
    }
    black_box(x);
    start.elapsed()
}

/// How a calibration function is probed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Attach {
    Pair,
    EntryAlone,
}

type Calibrated = (extern "C" fn(u64) -> u64, Attach);

/// Where the probes' placement puts an entry alone in the stub-shaped calibration
/// function (its `call`), as a file offset.
fn alone_offset() -> Result<u64> {
    let start = rocsync_calibration_stub as *const () as usize;
    // The end label's address only, never read through.
    let end = &raw const rocsync_calibration_stub_end as usize;
    let offset = own_offset(start as u64)?;
    // Read from the file, not the mapped text: a probe of an earlier try, still coming
    // off in the background, leaves its int3 in memory (seen under load in CI: the retry
    // found "no emulated point").
    let mut code = vec![0; end - start];
    std::fs::File::open("/proc/self/exe")
        .and_then(|f| f.read_exact_at(&mut code, offset))
        .context("reading the calibration stub from this executable")?;
    let (_, alone) = placement::place(&code, offset, true);
    alone
        .filter(|a| a.emulated)
        .map(|a| a.offset)
        .context("the calibration stub has no emulated entry-alone point")
}

fn fastest(rounds: Vec<Duration>) -> Duration {
    rounds.into_iter().min().unwrap_or_default()
}

/// Where `addr` (in this executable's text) lies in its file.
fn own_offset(addr: u64) -> Result<u64> {
    let text = std::fs::read_to_string("/proc/self/maps").context("reading /proc/self/maps")?;
    let m = maps::parse(&text)
        .into_iter()
        .find(|m| (m.start..m.end).contains(&addr))
        .context("the calibration function is in no file mapping")?;
    Ok(addr - m.start + m.offset)
}

/// The time one call pays for its probes on this machine: a pair on an emulated and on
/// a single-stepped first instruction, an entry alone past a stub's frame setup; the
/// probes, attached through `links`, come off in the background.
pub(super) fn calibrate(links: &mut Links, ebpf: &mut Ebpf) -> Result<CallPrices> {
    let pair = |f: extern "C" fn(u64) -> u64| (f, Attach::Pair);
    let mut measure = |f, name, calls| price(links, ebpf, f, name, calls);
    Ok(CallPrices {
        emulated: measure(
            pair(rocsync_calibration_call),
            "rocsync_calibration_call",
            CALLS,
        )?,
        stepped: measure(
            pair(rocsync_calibration_stepped),
            "rocsync_calibration_stepped",
            STEPPED_CALLS,
        )?,
        alone: measure(
            (
                rocsync_calibration_stub as extern "C" fn(u64) -> u64,
                Attach::EntryAlone,
            ),
            "rocsync_calibration_stub",
            CALLS,
        )?,
    })
}

/// One kind's price. Each measure takes its fastest rounds (a busy host only adds
/// time); one whose probed calls look no slower (its bare rounds descheduled: seen
/// in CI) is measured again, up to [`TRIES`] times.
fn price(
    links: &mut Links,
    ebpf: &mut Ebpf,
    f: Calibrated,
    name: &'static str,
    calls: u64,
) -> Result<Duration> {
    let mut tried = Err(anyhow::anyhow!("not measured"));
    for _ in 0..TRIES {
        tried = price_once(links, ebpf, f, name, calls);
        if tried.is_ok() {
            break;
        }
    }
    tried
}

fn price_once(
    links: &mut Links,
    ebpf: &mut Ebpf,
    (f, attach): Calibrated,
    name: &'static str,
    calls: u64,
) -> Result<Duration> {
    let offset = match attach {
        Attach::Pair => own_offset(f as *const () as u64)?,
        Attach::EntryAlone => alone_offset()?,
    };
    let path = Path::new("/proc/self/exe");
    let bare = fastest((0..ROUNDS).map(|_| round(f, calls)).collect());
    let mark = links.mark();
    // A synchronize's pair (its return always probed); a record's entry alone.
    let api = match attach {
        Attach::Pair => Api::HipEventSynchronize,
        Attach::EntryAlone => Api::HipEventRecord,
    };
    for (prog, ret) in api
        .programs()
        .filter(|&(_, ret)| attach == Attach::Pair || !ret)
    {
        let pid = Some(std::process::id());
        let at = (offset, ret);
        if let Err(e) = links.attach_call(ebpf, prog, at, (path, pid), &[name], false) {
            let taken = links.take(mark);
            drop(Links::release(ebpf, vec![taken]));
            return Err(e.context("calibrating the cost of a probed call"));
        }
    }
    let probed = fastest((0..ROUNDS).map(|_| round(f, calls)).collect());
    let taken = links.take(mark);
    drop(Links::release(ebpf, vec![taken]));
    if probed <= bare {
        bail!("calibrating: the probed calls were not slower ({probed:?} against {bare:?})");
    }
    Ok((probed - bare) / calls as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ROCm 6.4/7.2 while the daemon counts: synchronizes are pairs on `sub`
    /// (single-stepped), records, waits, destroys and polls entries alone on the emulated
    /// `call`. Priced all as stepped pairs (as before), a record- or poll-heavy process
    /// was taken for several times what it pays.
    #[test]
    fn entries_alone_are_priced_apart_from_pairs() {
        let prices = CallPrices {
            emulated: Duration::from_micros(2),
            stepped: Duration::from_micros(10),
            alone: Duration::from_micros(1),
        };
        // 500 synchronizes, 4 000 records, 500 polls.
        let counts = CallCounts {
            calls: 5_000,
            polls: 500,
            alone: 4_500,
        };
        let stubs = Stepped {
            pairs: true,
            alone: false,
        };
        // 500 pairs (10 µs), 4 500 entries alone (1 µs): 9.5 ms; the polls' 0.5 ms.
        assert_eq!(prices.cost(counts, stubs), (9.5e6, 0.5e6));
        // Where no entry alone could move past a frame setup, each pays a stepped trap.
        let all = Stepped {
            pairs: true,
            alone: true,
        };
        assert_eq!(prices.cost(counts, all), (50e6, 5e6));
        // An emulated runtime (5.2, the simulated one): 500 × 2 + 4 500 × 1 µs.
        assert_eq!(prices.cost(counts, Stepped::default()), (5.5e6, 0.5e6));
        // Something records: every return probed, nothing alone, the polls pairs.
        let recorded = CallCounts { alone: 0, ..counts };
        assert_eq!(prices.cost(recorded, stubs), (50e6, 5e6));
    }
}
