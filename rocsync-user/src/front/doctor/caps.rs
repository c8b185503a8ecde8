//! The capabilities rocsync has (its effective set, `/proc/self/status` `CapEff`) against
//! those it uses: the set `dist/rocsync.service` grants (and `CAP_KILL`, which attach
//! uses and the daemon does not), with what each is for.

use super::check::{Check, Status};

const CAP_CHOWN: u32 = 0;
const CAP_DAC_READ_SEARCH: u32 = 2;
const CAP_KILL: u32 = 5;
const CAP_SYS_PTRACE: u32 = 19;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;
const CAP_CHECKPOINT_RESTORE: u32 = 40;

/// How much a capability matters.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Need {
    /// Nothing traces without it.
    Always,
    /// Nothing traces without it, but CAP_SYS_ADMIN grants the same (the kernel's
    /// `bpf_capable`, `perfmon_capable`, `checkpoint_restore_ns_capable`).
    OrSysAdmin,
    /// Only for processes of other users.
    OtherUsers,
    /// Only for one option (said in the row).
    Option,
}

/// (capability, bit, needed for, how much).
const USED: [(&str, u32, &str, Need); 8] = [
    (
        "CAP_SYS_ADMIN",
        CAP_SYS_ADMIN,
        "perf-event uprobes (the HSA and loader probes): their perf_event_open fails with EACCES without it, CAP_PERFMON or not (measured on 6.18; multi-uprobe links attach)",
        Need::Always,
    ),
    (
        "CAP_BPF",
        CAP_BPF,
        "loading the programs and maps",
        Need::OrSysAdmin,
    ),
    (
        "CAP_PERFMON",
        CAP_PERFMON,
        "tracing programs, perf events",
        Need::OrSysAdmin,
    ),
    (
        "CAP_CHECKPOINT_RESTORE",
        CAP_CHECKPOINT_RESTORE,
        "opening mapped libraries through /proc/PID/map_files",
        Need::OrSysAdmin,
    ),
    (
        "CAP_SYS_PTRACE",
        CAP_SYS_PTRACE,
        "reading other users' /proc/PID/{maps,environ,root} (attach, daemon)",
        Need::OtherUsers,
    ),
    (
        "CAP_KILL",
        CAP_KILL,
        "continuing stopped targets of other users (attach)",
        Need::OtherUsers,
    ),
    (
        "CAP_DAC_READ_SEARCH",
        CAP_DAC_READ_SEARCH,
        "reading other users' runtime libraries whatever their mode (daemon)",
        Need::OtherUsers,
    ),
    (
        "CAP_CHOWN",
        CAP_CHOWN,
        "giving the daemon's socket to its --group, and outputs to the sudo user",
        Need::Option,
    ),
];

pub(super) fn checks() -> Vec<Check> {
    let effective = crate::os::procfs::status_field(None, "CapEff")
        .and_then(|hex| u64::from_str_radix(&hex, 16).ok());
    let Some(effective) = effective else {
        return vec![
            Check::ok(
                "capabilities",
                "cannot read CapEff of /proc/self/status",
                "everything",
            )
            .unknown(),
        ];
    };
    judge(effective)
}

/// One row per capability used, judged against the effective set `effective`.
fn judge(effective: u64) -> Vec<Check> {
    let has = |bit: u32| effective & (1 << bit) != 0;
    USED.iter()
        .map(|&(name, bit, needed_for, need)| {
            let check = Check::ok(name, "yes", needed_for);
            let fix = format!("run as root (sudo), or grant {name}");
            match need {
                _ if has(bit) => check,
                Need::OrSysAdmin if has(CAP_SYS_ADMIN) => Check {
                    found: "no (CAP_SYS_ADMIN grants the same)".into(),
                    ..check
                },
                Need::Always | Need::OrSysAdmin => Check {
                    found: "no".into(),
                    ..check
                }
                .not(Status::Missing, fix),
                Need::OtherUsers => Check {
                    found: "no".into(),
                    ..check
                }
                .not(
                    Status::Absent,
                    format!("{fix} to trace other users' processes"),
                ),
                Need::Option => Check {
                    found: "no".into(),
                    ..check
                }
                .not(Status::Absent, format!("{fix} where that is used")),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn missing(effective: u64) -> Vec<String> {
        judge(effective)
            .into_iter()
            .filter(|c| c.status == Status::Missing)
            .map(|c| c.what)
            .collect()
    }

    #[test]
    fn cap_sys_admin_stands_in_for_bpf_and_perfmon_but_not_the_reverse() {
        let all = (1u64 << 41) - 1;
        assert!(missing(all).is_empty());
        assert!(missing(1 << CAP_SYS_ADMIN).is_empty());
        assert_eq!(
            missing(all & !(1 << CAP_SYS_ADMIN)),
            ["CAP_SYS_ADMIN"],
            "CAP_BPF and CAP_PERFMON do not attach perf-event uprobes"
        );
        assert_eq!(
            missing(0),
            [
                "CAP_SYS_ADMIN",
                "CAP_BPF",
                "CAP_PERFMON",
                "CAP_CHECKPOINT_RESTORE"
            ]
        );
        // Other users' processes only: reported, not missing.
        let rows = judge(1 << CAP_SYS_ADMIN);
        for only_sometimes in ["CAP_KILL", "CAP_DAC_READ_SEARCH", "CAP_CHOWN"] {
            let row = rows.iter().find(|c| c.what == only_sometimes).unwrap();
            assert_eq!(row.status, Status::Absent, "{only_sometimes}");
        }
    }

    #[test]
    fn every_capability_the_unit_grants_has_a_row() {
        let unit = include_str!("../../../../dist/rocsync.service");
        let granted = unit
            .lines()
            .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
            .expect("the unit names its capabilities");
        let rows: Vec<&str> = USED.iter().map(|u| u.0).collect();
        for cap in granted.split_whitespace() {
            assert!(rows.contains(&cap), "{cap} is granted but has no row");
        }
    }
}
