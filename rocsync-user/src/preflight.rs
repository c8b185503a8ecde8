//! Checks, before anything is loaded, that this kernel and these privileges can trace.

use std::path::Path;

use anyhow::{Result, bail};

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Fails with an actionable message when tracing cannot work here.
pub fn check() -> Result<()> {
    let caps = effective_caps()?;
    let has = |cap: u32| caps & (1u64 << cap) != 0;
    // CAP_BPF and CAP_PERFMON load the programs and attach multi-uprobe links, but the
    // perf-event uprobes every capture uses (the loader hook, the HSA write path) need
    // CAP_SYS_ADMIN on this kernel (measured: `rocsync doctor` shows it).
    if !has(CAP_SYS_ADMIN) {
        let partial = if has(CAP_BPF) && has(CAP_PERFMON) {
            " (CAP_BPF and CAP_PERFMON load the programs, but perf-event uprobes need \
             CAP_SYS_ADMIN)"
        } else {
            ""
        };
        bail!(
            "rocsync needs root (CAP_SYS_ADMIN) to load eBPF programs and attach uprobes{partial}: \
             run it with sudo; `rocsync doctor` says what this machine allows"
        );
    }
    if !Path::new("/sys/bus/event_source/devices/uprobe/type").exists() {
        bail!(
            "this kernel has no uprobe support (/sys/bus/event_source/devices/uprobe is \
             missing): rocsync needs a kernel built with CONFIG_UPROBE_EVENTS"
        );
    }
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        bail!(
            "this kernel exposes no BTF (/sys/kernel/btf/vmlinux is missing): rocsync needs \
             a kernel built with CONFIG_DEBUG_INFO_BTF"
        );
    }
    Ok(())
}

fn effective_caps() -> Result<u64> {
    let hex = crate::procfs::status_field(None, "CapEff").unwrap_or_default();
    Ok(u64::from_str_radix(&hex, 16).unwrap_or(0))
}
