//! The report's sections of what is not a runtime call: collectives per communicator,
//! and HSA packets per queue.

use std::fmt::Write as _;

use crate::read::report::{figures::Figures, text::dur};

pub(super) fn collectives(o: &mut String, f: &Figures) {
    let c = &f.collectives;
    if c.communicators.is_empty() && c.other_calls.is_empty() {
        return;
    }
    let _ = writeln!(o, "\nCollectives per communicator");
    if !c.communicators.is_empty() {
        let _ = writeln!(
            o,
            "  {:<8} {:<20} {:<5} {:<5} {:>11} {:<13} {:>8} {:>10} {:>10}  by operation",
            "pid", "hash", "rank", "size", "collectives", "numbers", "waits", "blocked", "max"
        );
    }
    let opt = |v: Option<u64>| v.map_or("?".into(), |v| v.to_string());
    for m in &c.communicators {
        let seqs = match (m.first_seq, m.last_seq) {
            (Some(a), Some(b)) => format!("#{a}-#{b}"),
            _ => "-".into(),
        };
        let ops: Vec<String> = (m.collective_counts.iter())
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(
            o,
            "  {:<8} {:<20} {:<5} {:<5} {:>11} {:<13} {:>8} {:>10} {:>10}  {}",
            m.pid,
            m.hash.as_deref().unwrap_or("(set up before)"),
            opt(m.rank),
            opt(m.size),
            m.collectives,
            seqs,
            m.waits_after,
            dur(m.blocked_after_total_us),
            dur(m.blocked_after_max_us),
            ops.join(", ")
        );
    }
    if !c.communicators.is_empty() {
        let _ = writeln!(
            o,
            "  (waits, blocked, max: synchronisations that waited for its collectives)"
        );
    }
    if !c.other_calls.is_empty() {
        let other: Vec<String> = (c.other_calls.iter())
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(o, "  other calls: {}", other.join(", "));
    }
}

pub(super) fn packets(o: &mut String, f: &Figures) {
    let p = &f.packets;
    if p.packets == 0 {
        return;
    }
    let _ = writeln!(o, "\nHSA packets per queue");
    let _ = writeln!(
        o,
        "  {:<7} {:<18} {:>8}  by type",
        "agent", "queue", "packets"
    );
    for q in &p.queues {
        let types: Vec<String> = q.by_type.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let agent = q.agent.map_or("?".into(), |a| a.to_string());
        let _ = writeln!(
            o,
            "  {agent:<7} {:<18} {:>8}  {}",
            q.queue,
            q.packets,
            types.join(", ")
        );
    }
    let _ = writeln!(
        o,
        "  barrier dependencies on a packet: {}; waits linked to their barrier packet: {}",
        p.barrier_dependencies, p.call_barriers
    );
}
