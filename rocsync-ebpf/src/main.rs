//! rocsync's probes, one module per probe family: GPU runtime calls, the HSA queue write
//! path, and the dynamic loader's link-map hook. Shared here: the ring (every record but
//! calls', which go to the call ring), the target table, the per-kind drop counters and
//! the atomic counter step.
#![no_std]
#![no_main]
// The correlation counter needs BPF's atomic fetch-and-add (ISA v3, kernel 5.12). The
// code generator targets the generic ISA, which lacks it, so it is written in assembly.
#![cfg_attr(target_arch = "bpf", feature(asm_experimental_arch))]

#[cfg(feature = "bench")]
mod bench;
mod call_programs;
mod call_ring;
mod calls;
mod dependency;
mod device;
mod doorbell;
mod hsa;
mod in_flight;
mod link_map;
mod metrics;
mod nccl;
mod release;
mod target_cache;
mod tree;

use aya_ebpf::{
    macros::map,
    maps::{Array, HashMap, PerCpuArray, RingBuf},
};
use rocsync_common::{Config, Switch, drop_index};

/// `bpf_ringbuf_submit` flags. Frequent records (doorbells) wake no one: userspace
/// drains on a short timer.
const BPF_RB_NO_WAKEUP: u64 = 1;
const BPF_RB_FORCE_WAKEUP: u64 = 2;

#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(8 << 20, 0);

/// Processes to trace (tgid → settings). Everything else returns at the first lookup.
/// Children of followed targets enter it at their fork (see `tree`).
#[map]
static TARGETS: HashMap<u32, Config> = HashMap::with_max_entries(8192, 0);

/// The capture-wide switch of the call probes (slot 0).
#[map]
static SWITCH: Array<Switch> = Array::with_max_entries(1, 0);

/// Failed ring reservations per record kind ([`drop_index`]), per CPU.
#[map]
static DROPS: PerCpuArray<u64> = PerCpuArray::with_max_entries(drop_index::COUNT, 0);

#[inline(always)]
fn count_drops(index: u32, n: u64) {
    if let Some(c) = DROPS.get_ptr_mut(index) {
        // SAFETY: per-CPU slot, no concurrent writer on this CPU while the program runs.
        unsafe { *c += n };
    }
}

/// Atomically adds one to `*counter`; returns the previous value.
#[inline(always)]
fn fetch_add(counter: *mut u64) -> u64 {
    fetch_add_by(counter, 1)
}

/// Atomically adds `n` to `*counter`; returns the previous value. A full barrier (BPF's
/// fetching atomics are fully ordered), even for `n` = 0.
#[inline(always)]
fn fetch_add_by(counter: *mut u64, n: u64) -> u64 {
    let mut value: u64 = n;
    // SAFETY: `counter` is a valid, aligned u64 map slot; the instruction is one atomic
    // read-modify-write that returns the previous value in `value`.
    unsafe {
        core::arch::asm!(
            "{v} = atomic_fetch_add((u64 *)({p} + 0), {v})",
            p = in(reg) counter,
            v = inout(reg) value,
        );
    }
    value
}

/// The target's settings when a capture records it or the daemon counts it: the HSA
/// write path follows its queues either way (a trace may begin at any time).
#[inline(always)]
fn observed(tgid: u32) -> Option<Config> {
    // SAFETY: plain map lookup, copied out.
    match unsafe { TARGETS.get(tgid) } {
        Some(cfg) if cfg.capture != 0 || cfg.metrics != 0 => Some(*cfg),
        _ => None,
    }
}

/// Returns that `return_check` saw (slot 0).
#[map]
static RETURN_CHECKS: Array<u64> = Array::with_max_entries(1, 0);

/// Counts a return: attached to a function of rocsync's own in a child under a seccomp
/// filter, it tells whether this kernel lets a probed return through seccomp, and that
/// the return was probed at all (userspace `probes::seccomp`).
#[aya_ebpf::macros::uretprobe]
pub(crate) fn return_check(_ctx: aya_ebpf::programs::RetProbeContext) -> u32 {
    if let Some(n) = RETURN_CHECKS.get_ptr_mut(0) {
        fetch_add(n);
    }
    0
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
