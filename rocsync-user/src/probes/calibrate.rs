//! What one trapped call costs on this machine, measured as the bench measures it: the
//! same loop timed bare and then with a call probe pair on the function it calls (the
//! daemon's own, which it does not track: the probes trap and return). The daemon's
//! budget multiplies it by each process's call rate.

use std::{hint::black_box, path::Path, time::Duration, time::Instant};

use anyhow::{Context as _, Result, bail};
use rocsync_common::Api;

use super::{Probes, maps};

/// Calls per timed round: about 0.1 s probed.
const CALLS: u64 = 50_000;
const ROUNDS: usize = 3;

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
);

unsafe extern "C" {
    safe fn rocsync_calibration_call(x: u64) -> u64;
}

fn round() -> Duration {
    let start = Instant::now();
    let mut x = 0;
    for i in 0..CALLS {
        x = rocsync_calibration_call(x ^ i);
    }
    black_box(x);
    start.elapsed()
}

fn median(mut rounds: Vec<Duration>) -> Duration {
    rounds.sort_unstable();
    rounds[rounds.len() / 2]
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
    /// The time one call pays for a probe pair (entry and return) on this machine; the
    /// probes come off in the background.
    pub fn calibrate(&mut self) -> Result<Duration> {
        let offset = own_offset(rocsync_calibration_call as *const () as u64)?;
        let path = Path::new("/proc/self/exe");
        let bare = median((0..ROUNDS).map(|_| round()).collect());
        let mark = self.links_mark();
        let api = Api::HipEventQuery;
        let names = ["rocsync_calibration_call"];
        for (prog, ret) in api.programs() {
            let pid = Some(std::process::id());
            if let Err(e) = self.attach_call(prog, (offset, ret), path, pid, &names, false) {
                let links = self.take_links(mark);
                drop(self.release(vec![links]));
                return Err(e.context("calibrating the cost of a probed call"));
            }
        }
        let probed = median((0..ROUNDS).map(|_| round()).collect());
        let links = self.take_links(mark);
        drop(self.release(vec![links]));
        if probed <= bare {
            bail!("calibrating: the probed calls were not slower ({probed:?} against {bare:?})");
        }
        Ok((probed - bare) / CALLS as u32)
    }
}
