//! The GPU runtimes installed, and whether the probes attach to each: the probes are
//! loaded as a capture loads them, their call probes attached to the file scoped to the
//! doctor's own pid (it never calls them), and detached at once.
//!
//! Where runtimes are looked for: `search.rs`.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::check::{Check, Status};
use crate::calls::{
    backend::{RUNTIMES, Runtime, is_version_of},
    probes::{ApiChoice, ProbeOptions, Probes, elf::library::OpenedLibrary, seccomp::Returns},
};

/// The HSA runtime under HIP: its queues and doorbells (the HSA write path).
const HSA: &str = "libhsa-runtime64.so";

/// A library file to try, by what it is.
enum Kind {
    Runtime(&'static Runtime),
    Hsa,
}

impl Kind {
    fn soname(&self) -> &'static str {
        match self {
            Kind::Runtime(r) => r.soname,
            Kind::Hsa => HSA,
        }
    }

    /// Whether `name` is its library (a runtime's twin too: RCCL for NCCL).
    fn matches(&self, name: &str) -> bool {
        match self {
            Kind::Runtime(r) => r.matches_library(name),
            Kind::Hsa => is_version_of(name, HSA),
        }
    }

    fn what(&self) -> &'static str {
        match self {
            Kind::Runtime(r) if r.name == "hip" => "HIP runtime",
            Kind::Runtime(r) if r.name == "nccl" => "NCCL/RCCL",
            Kind::Runtime(_) => "CUDA runtime",
            Kind::Hsa => "HSA runtime",
        }
    }

    fn needed_for(&self) -> &'static str {
        match self {
            Kind::Runtime(r) if r.name == "hip" => "tracing HIP processes",
            Kind::Runtime(r) if r.name == "nccl" => "collectives: which rank, which collective",
            Kind::Runtime(_) => "tracing CUDA processes",
            Kind::Hsa => "HIP's queues and doorbells (the HSA write path)",
        }
    }
}

pub(super) fn checks() -> Vec<Check> {
    let mut checks = Vec::new();
    // Loaded as they are, without the captures' preflight: each thing it checks has a row
    // of its own, and what loads without CAP_SYS_ADMIN is worth showing.
    let mut probes = match Probes::load(ProbeOptions::default()) {
        Ok(p) => {
            checks.push(Check::ok("eBPF programs", "loaded", "every capture"));
            let release = Check::ok(
                "release at exit",
                if p.releases_at_exit() { "yes" } else { "no" },
                "the kernel continuing stopped targets if rocsync dies (else a watchdog does)",
            );
            checks.push(if p.releases_at_exit() {
                release
            } else {
                release.not(
                    Status::Absent,
                    "a kernel with BTF and the task kfuncs (optional)",
                )
            });
            let mut p = p;
            checks.push(returns_under_seccomp(&mut p));
            Some(p)
        }
        Err(e) => {
            checks.push(
                Check::ok(
                    "eBPF programs",
                    format!("not loaded: {e:#}"),
                    "every capture",
                )
                .not(Status::Missing, "see the rows above"),
            );
            None
        }
    };
    let (installed, skipped) = super::search::installed(|name| {
        RUNTIMES
            .iter()
            .filter(|r| r.probed_by_default())
            .flat_map(|r| [Some(r.soname), r.twin])
            .flatten()
            .chain([HSA])
            .any(|s| is_version_of(name, s))
    });
    for (path, why) in skipped {
        let row = Check::ok(
            "runtime-named file",
            format!("{}: skipped ({why})", path.display()),
            "nothing: it is no runtime",
        );
        checks.push(row.unknown());
    }
    // The driver is probed only when asked: not a runtime doctor looks for.
    let runtimes = RUNTIMES.iter().filter(|r| r.probed_by_default());
    let kinds = runtimes.map(Kind::Runtime).chain([Kind::Hsa]);
    for kind in kinds {
        let files: Vec<&PathBuf> = installed
            .iter()
            .filter(|p| file_name(p).is_some_and(|n| kind.matches(n)))
            .collect();
        if files.is_empty() {
            checks.push(
                Check::ok(kind.what(), "not installed", kind.needed_for()).not(
                    Status::Absent,
                    format!("install it if you trace such processes ({})", kind.soname()),
                ),
            );
        }
        for path in files {
            let shown = path.display().to_string();
            let Some(probes) = probes.as_mut() else {
                let row = Check::ok(
                    kind.what(),
                    format!("{shown} (not tried: no programs)"),
                    kind.needed_for(),
                );
                checks.push(row.unknown());
                continue;
            };
            checks.push(match trial(probes, &kind, path) {
                Ok(found) => Check::ok(kind.what(), format!("{shown}: {found}"), kind.needed_for()),
                // A user's own file of that name says nothing of this machine's runtimes
                // (any user can plant one in their environment): shown, not counted.
                Err(e) if !owned_by_root(path) => Check::ok(
                    kind.what(),
                    format!("{shown}: attach failed: {e:#} (a user's file: not counted)"),
                    kind.needed_for(),
                )
                .unknown(),
                Err(e) => Check::ok(
                    kind.what(),
                    format!("{shown}: attach failed: {e:#}"),
                    kind.needed_for(),
                )
                .not(
                    Status::Missing,
                    "see the error; --classic-uprobes if multi-uprobe links failed",
                ),
            });
        }
    }
    checks
}

/// Whether a probed return kills a process under a seccomp filter (containers' default
/// profiles): tried on a child of doctor's own.
fn returns_under_seccomp(probes: &mut Probes) -> Check {
    const FOR: &str = "probing the returns of seccomp-filtered processes (containers)";
    match probes.returns_under_seccomp() {
        Ok(Returns::Pass) => Check::ok("returns under seccomp", "safe", FOR),
        Ok(Returns::Kill) => Check::ok(
            "returns under seccomp",
            "a probed return kills a filtered process",
            FOR,
        )
        .not(
            Status::Missing,
            "a kernel with \"seccomp: passthrough uretprobe systemcall\" (6.14, or a \
             stable backport); meanwhile rocsync refuses filtered targets and the daemon \
             does not start",
        ),
        Err(e) => Check::ok("returns under seccomp", format!("not tried: {e:#}"), FOR).unknown(),
    }
}

/// Attaches the probes of `kind` to `path` for this process, and detaches them.
fn trial(probes: &mut Probes, kind: &Kind, path: &Path) -> Result<String> {
    let lib = OpenedLibrary::at(path)?;
    let pid = std::process::id();
    let mark = probes.links_mark();
    let report = match kind {
        Kind::Runtime(runtime) => probes.attach_runtime(
            runtime,
            &ApiChoice::default(),
            &lib.path(),
            Some(pid),
            false,
        )?,
        Kind::Hsa => probes.attach_hsa(&lib.path(), pid)?,
    };
    let links = probes.take_links(mark);
    let _ = probes.release(vec![links]).join();
    let via = match kind {
        Kind::Runtime(_) => probes.link_kind().name(),
        Kind::Hsa => "perf_event",
    };
    // The release a HIP file belongs to, from its symbol versions (its file name may be
    // the bare `libamdhip64.so` a wheel carries).
    let release = match kind {
        Kind::Runtime(r) if r.library == "libamdhip64" => {
            crate::calls::probes::elf::newest_version_node(path, "hip_")
                .map(|(x, y)| format!("ROCm {x}.{y}, "))
        }
        _ => None,
    };
    // Where each function traps and whether the kernel emulates it, as the daemon
    // counts (records', waits', destroys' and polls' entries alone; `run` pairs them all).
    let placed = match kind {
        Kind::Runtime(r) => crate::calls::probes::placement::points::counting(r, path)
            .map(|p| {
                format!(
                    "; probes on {}",
                    crate::calls::probes::placement::points::said(&p)
                )
            })
            .unwrap_or_default(),
        Kind::Hsa => String::new(),
    };
    Ok(format!(
        "{}attached to {} functions ({via}){placed}",
        release.unwrap_or_default(),
        report.probed.len()
    ))
}

/// Whether root owns `path` and its folder, and no one else may write that folder: a
/// file only root could have put there.
fn owned_by_root(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let root_only =
        |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.uid() == 0 && m.mode() & 0o022 == 0);
    root_only(path) && path.parent().is_some_and(root_only)
}

fn file_name(path: &Path) -> Option<&str> {
    path.file_name()?.to_str()
}
