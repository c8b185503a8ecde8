//! What one trapped call costs on this machine, measured as the bench measures it: the
//! same loop timed bare and then with a call probe pair on the function it calls (the
//! daemon's own, which it does not track: the probes trap and return). The daemon's
//! budget multiplies it by each process's call rate.

use std::{hint::black_box, path::Path, time::Duration, time::Instant};

use anyhow::{Context as _, Result, bail};
use rocsync_common::Api;

use super::{Probes, maps};

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
);

unsafe extern "C" {
    safe fn rocsync_calibration_call(x: u64) -> u64;
    safe fn rocsync_calibration_stepped(x: u64) -> u64;
}

/// What a probed call costs here, by what the kernel does with its probed instruction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CallPrices {
    /// Emulated (`push`, `nop`, relative branches): the simulated runtime's entries.
    pub emulated: Duration,
    /// Single-stepped out of line: a second trap (ROCm 6.4/7.2's stubs), several times
    /// dearer in a VM.
    pub stepped: Duration,
}

impl CallPrices {
    pub fn of(&self, stepped: bool) -> Duration {
        match stepped {
            true => self.stepped,
            false => self.emulated,
        }
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

impl Probes {
    /// The time one call pays for a probe pair (entry and return) on this machine, on an
    /// emulated and on a single-stepped first instruction; the probes come off in the
    /// background.
    pub fn calibrate(&mut self) -> Result<CallPrices> {
        Ok(CallPrices {
            emulated: self.price(rocsync_calibration_call, "rocsync_calibration_call", CALLS)?,
            stepped: self.price(
                rocsync_calibration_stepped,
                "rocsync_calibration_stepped",
                STEPPED_CALLS,
            )?,
        })
    }

    /// One kind's price. Each measure takes its fastest rounds (a busy host only adds
    /// time); one whose probed calls look no slower (its bare rounds descheduled: seen
    /// in CI) is measured again, up to [`TRIES`] times.
    fn price(
        &mut self,
        f: extern "C" fn(u64) -> u64,
        name: &'static str,
        calls: u64,
    ) -> Result<Duration> {
        let mut tried = Err(anyhow::anyhow!("not measured"));
        for _ in 0..TRIES {
            tried = self.price_once(f, name, calls);
            if tried.is_ok() {
                break;
            }
        }
        tried
    }

    fn price_once(
        &mut self,
        f: extern "C" fn(u64) -> u64,
        name: &'static str,
        calls: u64,
    ) -> Result<Duration> {
        let offset = own_offset(f as *const () as u64)?;
        let path = Path::new("/proc/self/exe");
        let bare = fastest((0..ROUNDS).map(|_| round(f, calls)).collect());
        let mark = self.links_mark();
        let api = Api::HipEventQuery;
        for (prog, ret) in api.programs() {
            let pid = Some(std::process::id());
            if let Err(e) = self.attach_call(prog, (offset, ret), path, pid, &[name], false) {
                let links = self.take_links(mark);
                drop(self.release(vec![links]));
                return Err(e.context("calibrating the cost of a probed call"));
            }
        }
        let probed = fastest((0..ROUNDS).map(|_| round(f, calls)).collect());
        let links = self.take_links(mark);
        drop(self.release(vec![links]));
        if probed <= bare {
            bail!("calibrating: the probed calls were not slower ({probed:?} against {bare:?})");
        }
        Ok((probed - bare) / calls as u32)
    }
}
