//! The call log a scenario writes to `$SCENARIO_LOG`.

use std::path::Path;

/// One call as the scenario made it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LoggedCall {
    /// Global order of the calls in the scenario (taken just before each call).
    pub seq: u64,
    pub tid: u32,
    pub api: String,
    pub args: [u64; 3],
    pub ret: i64,
    /// CLOCK_MONOTONIC ns just before and just after the call (0 when not logged).
    pub before_ns: u64,
    pub after_ns: u64,
}

pub fn read_log(path: &Path) -> Vec<LoggedCall> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            assert!(f.len() == 7 || f.len() == 9, "bad log line {l:?}");
            let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
            LoggedCall {
                seq: f[0].parse().unwrap(),
                tid: f[1].parse().unwrap(),
                api: f[2].to_string(),
                args: [hex(f[3]), hex(f[4]), hex(f[5])],
                ret: f[6].parse().unwrap(),
                before_ns: f.get(7).map_or(0, |v| v.parse().unwrap()),
                after_ns: f.get(8).map_or(0, |v| v.parse().unwrap()),
            }
        })
        .collect()
}
