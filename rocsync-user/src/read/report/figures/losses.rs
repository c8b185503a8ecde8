//! What a trace lost, and which of the report's figures each loss touches: a report of a
//! trace with losses says so at its top (a 2.7 s wait made of an entry and another
//! call's return once led "Longest waits" with no warning).

use std::collections::BTreeMap;

use serde::Serialize;

/// One loss: what, how many, and the figures it touches (the `--json` field names).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Lost {
    pub what: String,
    pub count: u64,
    pub touches: Vec<&'static str>,
}

/// The figures built from calls: a lost call record is a call missing from each.
const CALLS: &[&str] = &[
    "calls",
    "per_api",
    "longest_waits",
    "dependencies",
    "unresolved",
    "collectives",
];

/// The figures a drop counter touches, by its name in `rocsync.drops`.
pub(in crate::read::report) fn touches(counter: &str) -> Vec<&'static str> {
    match counter {
        "comm_state" => vec!["collectives"],
        // A thread gone before its calls were read is named by its tid.
        "thread_names" => vec!["threads"],
        "out_params" => vec!["dependencies", "unresolved", "collectives"],
        "queue_records"
        | "packet_records"
        | "packets_truncated"
        | "packets_unread"
        | "packets_unknown_queue" => vec!["packets"],
        "undecodable" => [CALLS, &["packets"]].concat(),
        // Entries, exits, ids, late or unpaired records, library loads, and any counter
        // this report does not know: the calls.
        _ => CALLS.to_vec(),
    }
}

/// The losses of a trace: every drop counter above zero, then what its parameters say
/// (a trace ended early touches every figure; calls not recorded, the calls' figures).
pub(in crate::read::report) fn lost(
    counters: &BTreeMap<String, u64>,
    besides: &BTreeMap<String, u64>,
) -> Vec<Lost> {
    let mut out: Vec<Lost> = counters
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| Lost {
            what: k.clone(),
            count: *n,
            touches: touches(k),
        })
        .collect();
    for (k, n) in besides {
        let touches = match k.starts_with("trace ended early") {
            true => [CALLS, &["packets"]].concat(),
            false => CALLS.to_vec(),
        };
        out.push(Lost {
            what: k.clone(),
            count: *n,
            touches,
        });
    }
    out
}

/// The figures' names as the text's sections call them.
pub(in crate::read::report) fn section(field: &str) -> &'static str {
    match field {
        "calls" => "calls",
        "per_api" => "time blocked per API",
        "longest_waits" => "longest waits",
        "dependencies" => "who waits on whom",
        "unresolved" => "unresolved waits",
        "collectives" => "collectives",
        "packets" => "HSA packets",
        "threads" => "thread names",
        _ => "figures",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_was_lost_is_listed_with_the_figures_it_touches() {
        let counters: BTreeMap<String, u64> = [
            ("entry_records".into(), 5),
            ("packets_unread".into(), 2),
            ("lost_ids".into(), 0),
        ]
        .into();
        let besides = [("trace ended early (size)".to_string(), 1)].into();
        let l = lost(&counters, &besides);
        let what: Vec<&str> = l.iter().map(|l| l.what.as_str()).collect();
        assert_eq!(
            what,
            [
                "entry_records",
                "packets_unread",
                "trace ended early (size)"
            ]
        );
        assert!(l[0].touches.contains(&"longest_waits"));
        assert_eq!(l[1].touches, ["packets"]);
        assert!(l[2].touches.contains(&"packets") && l[2].touches.contains(&"calls"));
    }
}
