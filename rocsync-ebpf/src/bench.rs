//! Benchmark baselines (feature `bench`): the cheapest possible probes, to measure the
//! trap alone. Not part of a capture.

use aya_ebpf::{
    macros::{uprobe, uretprobe},
    programs::{ProbeContext, RetProbeContext},
};

#[uprobe]
pub fn empty_enter(_ctx: ProbeContext) -> u32 {
    0
}

#[uretprobe]
pub fn empty_exit(_ctx: RetProbeContext) -> u32 {
    0
}
