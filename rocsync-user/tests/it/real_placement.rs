//! Where the daemon's probes trap on Debian's real HIP runtimes while it counts: ROCm
//! 6.4's and 7.2's exports are `endbr64; sub $N,%rsp; mov <arguments>,k(%rsp); call …`
//! stubs. The entries of records, stream waits, destroys and polls (counting needs
//! nothing of their return, which is not probed) go to that `call`, which the kernel emulates; every
//! other function's pair stays on the `sub`, which it single-steps. Checked against
//! objdump's reading of the same bytes (not rocsync's decoder), and every call still
//! counted exactly against the program's own log. 5.2's entries (`push`) are emulated
//! already: nothing moves.

use std::{collections::BTreeMap, io::Write as _, path::Path, process::Command};

use crate::common::{daemon::*, *};
use crate::real_runtimes::{daemon_of, gated, hooked_exports, logged_calls, reals};

/// The functions whose count is their entry (README: the daemon probes their returns
/// only while something records).
const ENTRY_ALONE: [&str; 8] = [
    "hipEventRecord",
    "hipEventRecord_spt",
    "hipEventRecordWithFlags",
    "hipStreamWaitEvent",
    "hipStreamWaitEvent_spt",
    "hipEventDestroy",
    "hipStreamDestroy",
    "hipEventQuery",
];
const ALONE: &str = "`call` past the frame's setup (emulated, entry alone)";
const STUB: &str = "`sub` after endbr64 (single-stepped)";

/// objdump's mnemonics and operands of the first instructions at `addr` in `lib`.
fn disassembled(lib: &Path, addr: u64) -> Vec<(String, String)> {
    let out = run_ok(
        Command::new("objdump")
            .args([
                "-d",
                "--no-show-raw-insn",
                &format!("--start-address={addr:#x}"),
                &format!("--stop-address={:#x}", addr + 40),
            ])
            .arg(lib),
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (at, insn) = l.split_once(":\t")?;
            u64::from_str_radix(at.trim(), 16).ok()?;
            let mut f = insn.split_whitespace();
            Some((f.next()?.to_string(), f.collect::<Vec<_>>().join(" ")))
        })
        .collect()
}

/// Whether objdump reads a stub whose arguments stay in their registers up to an
/// emulated `call`: `endbr64`, `sub $N,%rsp`, stores of registers into that frame only.
fn stub_to_call(insns: &[(String, String)]) -> bool {
    let Some(frame) = insns.get(1).and_then(|(m, o)| {
        let n = o.strip_prefix("$0x")?.strip_suffix(",%rsp")?;
        (m == "sub").then(|| u64::from_str_radix(n, 16).ok())?
    }) else {
        return false;
    };
    let stores = |(m, o): &(String, String)| {
        let Some((_, at)) = o.split_once(',') else {
            return false;
        };
        let off = at
            .strip_suffix("(%rsp)")
            .map(|d| match d.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16).unwrap_or(u64::MAX),
                None if d.is_empty() => 0,
                None => u64::MAX,
            });
        m == "mov" && o.starts_with('%') && off.is_some_and(|k| k + 8 <= frame)
    };
    let n = insns[2..].iter().take_while(|i| stores(i)).count();
    insns[0].0 == "endbr64" && insns.get(2 + n).is_some_and(|(m, _)| m == "call")
}

/// The daemon's lines of where `lib`'s probes trap (one per placement, "(i of n)"), as
/// function → placement.
fn said_placements(lines: &mut Lines, lib: &Path) -> BTreeMap<String, String> {
    let name = lib.file_name().unwrap().to_str().unwrap();
    let said = format!("{name}: probes on ");
    lines.wait_for_all(&[&said]);
    let first = (lines.1.iter())
        .find(|l| l.contains(&said))
        .unwrap()
        .clone();
    let n = first
        .rsplit_once(" of ")
        .unwrap()
        .1
        .trim_end_matches(')')
        .to_string();
    lines.wait_for_all(&[&format!("({n} of {n})")]);
    let mut placed = BTreeMap::new();
    for line in (lines.1.iter()).filter(|l| l.contains(&said)) {
        let group = line.split_once(": probes on ").unwrap().1;
        let group = group.rsplit_once(" (").unwrap().0;
        let (names, how) = group.split_once(": ").unwrap();
        for f in names.split(", ") {
            placed.insert(f.to_string(), how.to_string());
        }
    }
    placed
}

#[test]
fn the_daemon_counts_real_records_waits_destroys_and_polls_from_an_emulated_call() {
    let name = "the_daemon_counts_real_records_waits_destroys_and_polls_from_an_emulated_call";
    let Some(reals) = reals(name) else {
        return;
    };
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    let (daemon, mut lines) = daemon_of(&dir, &reals);
    let addr = metrics_addr(&lines);
    for r in &reals {
        let log = dir.path(&format!("real-{}.log", r.series));
        let hooked = hooked_exports(&r.hip);
        let before: BTreeMap<&String, u64> = hooked
            .keys()
            .map(|n| (n, calls_counted(&addr, n)))
            .collect();
        let mut target = gated(r, &log);
        lines.wait_for(&format!("tracking pid {}", target.id()));
        let placed = said_placements(&mut lines, &r.hip);
        for (f, &export) in &hooked {
            let how = placed
                .get(f)
                .unwrap_or_else(|| panic!("ROCm {}: {f}: {placed:?}", r.series));
            let code = disassembled(&r.hip, export);
            let want = match r.ret {
                // 5.2: a frame-pointer entry, emulated where it is.
                101 => "`push` (emulated)",
                _ if ENTRY_ALONE.contains(&f.as_str()) => {
                    assert!(stub_to_call(&code), "ROCm {}: {f}: {code:?}", r.series);
                    ALONE
                }
                _ => STUB,
            };
            assert_eq!(how, want, "ROCm {}: {f}: {code:?}", r.series);
        }
        target.stdin.take().unwrap().write_all(b"go\n").unwrap();
        assert!(target.wait().unwrap().success());
        // Counted exactly as the program made them (hipGetDevice is not counted).
        let logged = logged_calls(r, &log);
        for (n, was) in before {
            let made = logged.iter().filter(|l| &l.api == n).count() as u64;
            let counted = calls_counted(&addr, n) - was;
            assert_eq!(counted, made, "ROCm {}: {n}", r.series);
        }
    }
    stop(daemon);
}
