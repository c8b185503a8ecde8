//! The capabilities rocsync has (its effective set, `/proc/self/status` `CapEff`) against
//! those it uses: the set `dist/rocsync.service` grants, with what each is for.

use super::{Check, Status};

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
}

/// (capability, bit, needed for, how much).
const USED: [(&str, u32, &str, Need); 6] = [
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
];

pub fn checks() -> Vec<Check> {
    let effective = crate::procfs::status_field(None, "CapEff")
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
        let kill = rows.iter().find(|c| c.what == "CAP_KILL").unwrap();
        assert_eq!(kill.status, Status::Absent);
    }
}
