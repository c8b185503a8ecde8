//! Debian's real RCCL (experimental's librccl1, the 7.2 series, over its real HIP
//! runtime; unpacked by `scripts/rocm-runtimes`, nothing installed) probed by `run`:
//! every set-up, collective, point-to-point and group function rocsync probes sits on
//! RCCL's own export (checked against `nm -D`), and the calls a program makes through
//! it are rows, each once, against the program's log. Without a GPU the set-up fails
//! (and RCCL's collectives read through the communicator it would have made, so the
//! program makes none); the set-up's row still names the communicator it was joining,
//! hashed from the 128-byte unique id passed by value on the stack. Needs root.

use std::{collections::BTreeMap, path::Path};

use serde_json::Value;

use crate::{
    collectives::comm_id_of,
    common::*,
    real_runtimes::{exports, placements},
};

/// The NCCL functions rocsync must probe, named here rather than read from the product's
/// own table (a function it forgot would then never be missed): set-up and tear-down,
/// collectives, point-to-point and group calls.
const PROBED: [&str; 17] = [
    "ncclCommInitRank",
    "ncclCommInitRankConfig",
    "ncclCommInitAll",
    "ncclCommSplit",
    "ncclCommDestroy",
    "ncclCommAbort",
    "ncclAllReduce",
    "ncclBroadcast",
    "ncclReduce",
    "ncclAllGather",
    "ncclReduceScatter",
    "ncclAllToAll",
    "ncclAlltoAll",
    "ncclSend",
    "ncclRecv",
    "ncclGroupStart",
    "ncclGroupEnd",
];

/// Those of RCCL's exports (`nm -D`), and their addresses.
fn hooked_exports(lib: &Path) -> BTreeMap<String, u64> {
    let all = exports(lib);
    (PROBED.iter())
        .filter_map(|n| Some((n.to_string(), *all.get(*n)?)))
        .collect()
}

#[test]
fn a_real_rccl_is_probed_on_its_exports_and_its_set_up_names_its_communicator() {
    let name = "a_real_rccl_is_probed_on_its_exports_and_its_set_up_names_its_communicator";
    if !can_trace(name) {
        return;
    }
    let rccls = rocsync_tests::real_rccls();
    if rccls.is_empty() {
        rocsync_tests::skip(
            name,
            "no real RCCL is unpacked (scripts/setup runs scripts/rocm-runtimes)",
        );
        return;
    }
    for r in rccls {
        let lib = r.lib.join("librccl.so.1").canonicalize().unwrap();
        let hooked = hooked_exports(&lib);
        // Every set-up, collective, point-to-point and group call of NCCL 2.2x is there.
        for f in [
            "ncclCommInitRank",
            "ncclAllReduce",
            "ncclSend",
            "ncclGroupEnd",
        ] {
            assert!(
                hooked.contains_key(f),
                "RCCL {}: {f} not exported",
                r.series
            );
        }
        let dir = TempDir::new();
        let (out, log) = (dir.path("t.json"), dir.path("calls.log"));
        let ran = run_ok(
            rocsync()
                .args(["run", "-v", "-o"])
                .arg(&out)
                .arg("--")
                .arg(&r.program)
                .env("SCENARIO_LOG", &log),
        );
        // "rocsync:   0x… ncclAllReduce: probe on …": each within its function's first
        // instructions.
        let stderr = stderr_of(&ran);
        let placed = placements(&stderr, &hooked);
        for (l, offset, addr) in &placed {
            assert!(
                (*addr..addr + 16).contains(offset),
                "RCCL {}: {l}",
                r.series
            );
        }
        assert_eq!(placed.len(), hooked.len(), "RCCL {}: {stderr}", r.series);
        // The program's log: "uid HEX", then "NAME RET" a call.
        let text = std::fs::read_to_string(&log).unwrap();
        let uid = text.lines().find_map(|l| l.strip_prefix("uid ")).unwrap();
        let logged: Vec<(&str, i64)> = text
            .lines()
            .filter(|l| !l.starts_with("uid "))
            .filter_map(|l| l.split_once(' '))
            .map(|(n, ret)| (n, ret.parse().unwrap()))
            .filter(|(n, _)| hooked.contains_key(*n))
            .collect();
        let t = read_json(&out);
        let mut rows: Vec<&Value> = t["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["cat"] == "cpu_op")
            .collect();
        rows.sort_by_key(|e| e["args"]["correlation"].as_u64());
        let names: Vec<&str> = rows.iter().map(|e| e["name"].as_str().unwrap()).collect();
        let want: Vec<&str> = logged.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, want, "RCCL {}", r.series);
        let init = rows[0];
        let (_, ret) = logged[0];
        assert_ne!(ret, 0, "RCCL {}: set-up without a GPU", r.series);
        let a = &init["args"];
        assert_eq!(a["ret"], ret, "{a}");
        assert_eq!(a["Comms Id"], comm_id_of(uid).as_str(), "{a}");
        assert_eq!(
            (&a["Rank"], &a["Group size"]),
            (&0.into(), &1.into()),
            "{a}"
        );
        // A failed set-up made no communicator: none is named; a group call has none.
        assert!(a.get("comm").is_none(), "{a}");
        for e in &rows[1..3] {
            assert!(e["args"].get("comm").is_none(), "{e}");
        }
    }
}
