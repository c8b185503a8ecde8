//! The real ROCm runtimes (Debian's 6.4 and 7.2, `scripts/rocm-runtimes`), whose exports
//! are `endbr64` stubs that tail-jump through HIP's dispatch table: on their
//! `hipStreamSynchronize` (which returns `hipErrorNoDevice` at once without a GPU), the
//! empty pair's control, an empty entry probe alone, and rocsync's capture, each side by
//! side with the empty pair in one process (`bench_paired-SERIES`, built against the
//! series' own loader). Ratios to the empty pair: what the return trap costs on the real
//! stub (1 − entry-only), and what the capture adds over the trap.

use std::fmt::Write as _;

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use super::bin::{Probes, quartiles};
use crate::root;

/// Runs of `rocsync-bench side-by-side` per mode and runtime (each of 40 rounds).
const RUNS: usize = 3;
/// (label, bench mode, extra rocsync arguments, what it is)
const MODES: [(&str, &str, &[&str], &str); 6] = [
    (
        "empty pair",
        "empty",
        &[],
        "a second copy under an empty pair of its own: the method's control (1 where there is no difference)",
    ),
    (
        "empty entry probe",
        "empty-entry-only",
        &[],
        "an empty uprobe, no uretprobe: one trap",
    ),
    (
        "rocsync",
        "full",
        &[],
        "the capture (`rocsync run`), its default probes",
    ),
    (
        "empty entry alone",
        "empty-entry-alone",
        &[],
        "an empty uprobe on the stub's `call`, past its frame setup (emulated): where \
         the daemon places an entry no return probe shares",
    ),
    (
        "empty pair, split",
        "empty-split",
        &[],
        "the empty uprobe there, its uretprobe on `sub` (`[rsp]` the return address): a \
         record's probes while the daemon records",
    ),
    (
        "empty pair on the body",
        "empty-body",
        &[],
        "the empty pair on the function the stub jumps to (`push %rbp`, emulated), found \
         through the dispatch table's filling: measured only, never probed (see below)",
    ),
];

pub(super) fn real_runtime() -> Result<(String, Value)> {
    let reals = rocsync_tests::real_runtimes();
    if reals.is_empty() {
        bail!("no real ROCm runtime is unpacked: run scripts/setup (scripts/rocm-runtimes)");
    }
    let rocsync = root().join("target/release/rocsync").display().to_string();
    let mut md = String::from(
        "\n## The probes on the real ROCm runtimes' dispatch stubs\n\n\
         On each real runtime's `hipStreamSynchronize(NULL)` (it returns 100, \
         `hipErrorNoDevice`, without a GPU), three copies of the runtime in one process \
         called in alternating batches of 10 000: one untraced, one under the empty pair, \
         one measured (`rocsync-bench side-by-side`). A round's ratio is (measured − \
         untraced) / (empty pair − untraced); the table gives the median of every round \
         of 3 runs (lower–upper quartile), beside each copy's ns per call (the runs' \
         medians' median).\n\n\
         | runtime | mode | what it is | untraced ns | empty pair ns | measured ns | side by \
         side |\n| --- | --- | --- | ---: | ---: | ---: | ---: |\n",
    );
    let mut out = Vec::new();
    for r in reals {
        let major = r.series.split('.').next().unwrap_or_default();
        let lib = r.lib.join(format!("libamdhip64.so.{major}"));
        let lib = lib
            .canonicalize()
            .with_context(|| lib.display().to_string())?;
        let lib = lib.display().to_string();
        let paired = rocsync_tests::bench_paired_for(&r.series);
        let paired = paired.display().to_string();
        let probes = Probes {
            lib: &lib,
            symbol: "hipStreamSynchronize",
            calls: "0",
            driver: &paired,
            rocsync: &rocsync,
        };
        let mut modes = Vec::new();
        for (label, mode, extra, what) in MODES {
            let (mut ratios, mut ns) = (Vec::new(), Vec::new());
            for _ in 0..RUNS {
                match probes.side_by_side_ns(&paired, mode, extra) {
                    Ok((r, n)) => {
                        ratios.extend(r);
                        ns.push(n);
                    }
                    // The body is found by decoding the dispatch table's filling, which
                    // not every build's code allows: said, not measured.
                    Err(e) if mode == "empty-body" => {
                        let e = e.to_string();
                        let why = e.split("Error: ").nth(1).unwrap_or(&e).lines().next();
                        let why = why.unwrap_or_default().to_string();
                        writeln!(
                            md,
                            "| ROCm {} | {label} | {what} | | | | n/a: {why} |",
                            r.series
                        )?;
                        modes.push(json!({ "mode": label, "not_measured": why }));
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
            if ns.is_empty() {
                continue;
            }
            let [lo, mid, hi] = quartiles(&ratios);
            // The runs' medians' median, per copy.
            let of = |i: usize| quartiles(&ns.iter().map(|n| n[i]).collect::<Vec<_>>())[1];
            let (untraced, empty, measured) = (of(0), of(1), of(2));
            writeln!(
                md,
                "| ROCm {} | {label} | {what} | {untraced:.0} | {empty:.0} | {measured:.0} | \
                 **{mid:.3}** ({lo:.3}–{hi:.3}) |",
                r.series
            )?;
            modes.push(json!({
                "mode": label, "quartiles": [lo, mid, hi], "ratios": ratios,
                "ns_per_call": {"untraced": untraced, "empty_pair": empty, "measured": measured},
            }));
        }
        out.push(json!({ "series": r.series, "library": lib, "modes": modes }));
    }
    md.push_str(
        "\nThe entry probe alone over the pair is the part of the pair's cost the entry trap \
         makes; one minus it, the return's. A counted process pays the entry alone where \
         counting needs no return (records, stream waits: bench/one-trap.md).\n\n\
         Where the empty pair costs microseconds here, against under one on the simulated \
         runtime (bench/breakdown.md), the instruction probed is the likely reason: the real stubs begin \
         `endbr64; sub $0x18,%rsp`, and the kernel emulates neither (it emulates `push`, \
         `nop` and branches, as the simulated runtime's `push %rbp` entry), so every hit \
         is single-stepped out of line: a second trap, which in this virtual machine \
         (firecracker) costs several microseconds. The entry trap is then nearly all of \
         the pair (the return, through the kernel's uretprobe trampoline, the rest).\n",
    );
    md.push_str(RETURNS);
    let dir = std::env::temp_dir().join(format!("rocsync-bench-real-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let daemon = super::real_daemon::real_daemon(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    let (daemon_md, daemon) = daemon?;
    md.push_str(&daemon_md);
    md.push_str(&super::bin::losses_md());
    Ok((md, json!({ "real_runtimes": out, "daemon": daemon })))
}

/// Why a call that needs its return still pays the single-step on a stub (issue 63).
const RETURNS: &str = "\n### Calls that need their return\n\n\
    The kernel hijacks the return address at `[rsp]` when the probed instruction traps \
    (`arch_uretprobe_hijack_return_addr`), so a return probe must sit where `[rsp]` is \
    the return address: in a stub, only on `endbr64` and `sub` before the frame is set up, \
    or on the final `jmp *%rax` after it is torn down, all single-stepped (an indirect \
    `jmp` is not emulated either). Splitting the pair — the entry on the emulated `call`, \
    the return on `sub` — costs a third trap, not less (\"empty pair, split\"): the \
    uretprobe's breakpoint single-steps `sub` all the same. A call that needs its return \
    (synchronizes; everything in `run` and `attach`) therefore keeps one trap on \
    `sub`, entry and return together: the cheapest correct pair on the stub. The daemon \
    splits only while something records, for records, stream waits, destroys and polls, \
    whose entries stay alone on the `call` (a third trap then, against a stepped one saved \
    for every call counted).\n\n\
    The body the stub jumps to begins `endbr64; push %rbp`, which the kernel emulates, \
    with the arguments in their registers and the caller's return address at `[rsp]` \
    (the stub tail-jumps): a pair there costs what the simulated runtime's does \
    (\"empty pair on the body\"). rocsync does not probe there: the body is no export, \
    only the dispatch table's entry, filled at the runtime's first call (and wrapped by \
    profilers that take the table: rocprofiler-sdk); its address comes from decoding \
    that filling, not from the file's symbols, and the filling's code differs by build \
    — 7.2's is one `lea body(%rip)` and one store per slot (each of `hipEventRecord`'s \
    and `hipEventQuery`'s bodies named by that one instruction of all the file's code, by \
    objdump; its data's relocations not searched), 6.4's \
    copies the slots in pairs from relocated constants (not decoded here: n/a above); \
    and another function may share a body or call it directly. Placing a pair there \
    exactly means proving, per function and release, the stub's slot, the slot's one \
    filling, and no other reference to the body: not done.\n";
