//! The kernel's side: its version, the features the probes use, and the settings that
//! can forbid them (lockdown, the memlock limit; `perf_event_paranoid` for information).

use std::path::Path;

use aya::{maps::MapType, programs::ProgramType, util::KernelVersion};

use super::check::{Check, Status};

const UPROBE_PMU: &str = "/sys/bus/event_source/devices/uprobe";
const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";
const LOCKDOWN: &str = "/sys/kernel/security/lockdown";

pub(super) fn checks() -> Vec<Check> {
    let version = KernelVersion::current().ok();
    let at_least = |major, minor| version.is_some_and(|v| v >= KernelVersion::new(major, minor, 0));
    let release =
        crate::os::procfs::sysctl("kernel/osrelease").unwrap_or_else(|e| format!("? ({e})"));
    let mut checks = Vec::new();

    let kernel = Check::ok("kernel", &*release, "the probes (Linux ≥ 5.15)");
    checks.push(match version {
        None => kernel.unknown(),
        Some(_) if at_least(5, 15) => kernel,
        Some(_) => kernel.not(Status::Missing, "boot Linux 5.15 or later"),
    });

    let uprobes = Check::ok("uprobes", UPROBE_PMU, "every probe");
    checks.push(if Path::new(UPROBE_PMU).join("type").exists() {
        uprobes
    } else {
        Check {
            found: "absent".into(),
            ..uprobes
        }
        .not(
            Status::Missing,
            "a kernel built with CONFIG_UPROBE_EVENTS=y",
        )
    });

    // The trial attaches (the runtimes' rows) say whether such links really attach.
    let multi = Check::ok(
        "multi-uprobe links",
        format!("Linux {}", version.map_or("?".into(), |v| v.to_string())),
        "cheaper call probes (classic uprobes otherwise)",
    );
    checks.push(if at_least(6, 6) {
        multi
    } else {
        multi.not(Status::Absent, "Linux 6.6 or later (optional)")
    });

    let btf = Check::ok(
        "BTF",
        VMLINUX_BTF,
        "task offsets (following children); releasing stopped targets at exit",
    );
    checks.push(if Path::new(VMLINUX_BTF).exists() {
        btf
    } else {
        Check {
            found: "absent".into(),
            ..btf
        }
        .not(
            Status::Missing,
            "a kernel built with CONFIG_DEBUG_INFO_BTF=y",
        )
    });

    checks.push(probed(
        "BPF ring buffer",
        aya::sys::is_map_supported(MapType::RingBuf).map_err(|e| e.to_string()),
        "every record the probes send",
        "Linux 5.8 or later",
    ));
    checks.push(probed(
        "raw tracepoints",
        aya::sys::is_program_supported(ProgramType::RawTracePoint).map_err(|e| e.to_string()),
        "following forks and exits; the daemon's exec discovery",
        "a kernel built with CONFIG_BPF_EVENTS=y",
    ));

    let paranoid = crate::os::procfs::sysctl("kernel/perf_event_paranoid")
        .unwrap_or_else(|e| format!("? ({e})"));
    checks.push(Check::ok(
        "perf_event_paranoid",
        paranoid,
        "perf events without CAP_PERFMON (rocsync has it: any value does)",
    ));
    checks.push(lockdown());
    checks.push(memlock(at_least(5, 11)));
    checks
}

/// A feature asked of the kernel by creating one (which needs CAP_BPF).
fn probed(
    what: &str,
    supported: Result<bool, String>,
    needed_for: &'static str,
    fix: &str,
) -> Check {
    match supported {
        Ok(true) => Check::ok(what, "yes", needed_for),
        Ok(false) => Check::ok(what, "no", needed_for).not(Status::Missing, fix),
        Err(e) => Check::ok(what, format!("cannot ask the kernel: {e}"), needed_for).unknown(),
    }
}

/// Lockdown's confidentiality mode takes `bpf_probe_read_kernel` away (the probes read
/// task fields with it); integrity forbids only writes to user memory, which they never do.
fn lockdown() -> Check {
    let needed_for = "reading task fields in the probes (confidentiality forbids it)";
    let text = match std::fs::read_to_string(LOCKDOWN) {
        Ok(text) => text,
        // No securityfs mounted: lockdown cannot be read; none of its entries at all.
        Err(_)
            if std::fs::read_dir("/sys/kernel/security").is_ok_and(|mut d| d.next().is_none()) =>
        {
            return Check::ok(
                "lockdown",
                "cannot tell (securityfs not mounted)",
                needed_for,
            )
            .unknown();
        }
        Err(_) => return Check::ok("lockdown", "none (no lockdown LSM)", needed_for),
    };
    // "none [integrity] confidentiality": the mode in force is bracketed.
    let mode = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
        .unwrap_or("?")
        .to_string();
    let check = Check::ok("lockdown", &*mode, needed_for);
    if mode == "confidentiality" {
        check.not(
            Status::Missing,
            "boot with lockdown=integrity or none (Secure Boot may impose it)",
        )
    } else {
        check
    }
}

/// Before 5.11 BPF maps count against RLIMIT_MEMLOCK: two 8 MiB rings and the maps.
fn memlock(memcg_accounted: bool) -> Check {
    const ENOUGH: u64 = 64 << 20;
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct passed, nothing else.
    let read = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) } == 0;
    let found = match (read, limit.rlim_cur) {
        (false, _) => "?".to_string(),
        (true, libc::RLIM_INFINITY) => "unlimited".to_string(),
        (true, bytes) => format!("{} KiB", bytes >> 10),
    };
    if memcg_accounted {
        let found = format!("{found} (unused: Linux ≥ 5.11 charges BPF memory to the cgroup)");
        return Check::ok("memlock limit", found, "BPF maps before Linux 5.11");
    }
    let check = Check::ok("memlock limit", &*found, "BPF maps before Linux 5.11");
    if read && limit.rlim_cur < ENOUGH {
        check.not(
            Status::Missing,
            "ulimit -l unlimited (or LimitMEMLOCK=infinity)",
        )
    } else {
        check
    }
}
