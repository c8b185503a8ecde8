//! Checks, before anything is loaded, that this kernel and these privileges can trace.

use std::path::Path;

use anyhow::{Result, bail};

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Fails with an actionable message when tracing cannot work here.
pub(crate) fn check() -> Result<()> {
    let caps = effective_caps()?;
    let has = |cap: u32| caps & (1u64 << cap) != 0;
    // Measured on Linux 6.18 (issue 36), as uid 65534 with exact ambient capabilities
    // (`setpriv --inh-caps=+bpf,+perfmon --ambient-caps=+bpf,+perfmon`): CAP_BPF and
    // CAP_PERFMON load the programs and attach multi-uprobe links, but the perf-event
    // uprobes every capture attaches (the loader hook, the HSA write path) fail in
    // `perf_event_open` with EACCES. CAP_SYS_ADMIN alone (it implies both) traces a
    // `run` end to end, given write access to /run/rocsync for the claims
    // (CAP_DAC_OVERRIDE, or root); another user's process also needs CAP_SYS_PTRACE and
    // CAP_KILL (`rocsync doctor`). So CAP_SYS_ADMIN is checked here, before any probe.
    if !has(CAP_SYS_ADMIN) {
        let partial = if has(CAP_BPF) && has(CAP_PERFMON) {
            ": this process has CAP_BPF and CAP_PERFMON, which load the programs, but \
             perf-event uprobes need CAP_SYS_ADMIN (without it perf_event_open fails with \
             EACCES)"
        } else {
            " to load eBPF programs and attach uprobes"
        };
        bail!(
            "rocsync needs root (CAP_SYS_ADMIN, missing){partial}; run it with sudo; \
             `rocsync doctor` says what this machine allows"
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
    let hex = crate::os::procfs::status_field(None, "CapEff").unwrap_or_default();
    Ok(u64::from_str_radix(&hex, 16).unwrap_or(0))
}
