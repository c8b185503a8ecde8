//! The job as text: the verdict first, then per communicator its furthest collective
//! (who is blocked in it, who is not and where), its ranks, the stacks, and what the
//! report used and passed over.

use std::fmt::Write as _;

use super::verdict::{Communicator, Verdict, Who};
use crate::read::report::job::{Job, rank::Rank};

/// Traces listed by name in the text: past it, counted (`--json` lists them all).
const LISTED: usize = 20;

fn rank_name(rank: Option<u64>) -> String {
    rank.map_or("rank ?".into(), |r| format!("rank {r}"))
}

/// `rank 1 (pid 4122 on node-b)`.
fn who(w: &Who) -> String {
    let on = w
        .host
        .as_deref()
        .map_or(String::new(), |h| format!(" on {h}"));
    format!("{} (pid {}{on})", rank_name(w.rank), w.pid)
}

fn place(w: &Who) -> String {
    w.place
        .as_deref()
        .map_or(String::new(), |p| format!(", in {p}"))
}

fn ranks_list(v: &[u64]) -> String {
    let s: Vec<String> = v.iter().map(u64::to_string).collect();
    format!("{} {}", plural(v.len(), "rank", "ranks"), s.join(", "))
}

pub(in crate::read::report) fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

/// The communicator's name: its id, or `unaligned-N (no id)`.
pub(in crate::read::report) fn comm_name(c: &Communicator) -> String {
    match (&c.hash, c.unaligned) {
        (Some(h), _) => h.clone(),
        (None, n) => format!("unaligned-{} (no id)", n.unwrap_or(0)),
    }
}

/// The verdict in a line.
pub(in crate::read::report) fn verdict_line(c: &Communicator) -> String {
    let op = |seq: u64| {
        let op = c.collective.as_ref().and_then(|f| f.op.clone());
        format!("{} #{seq}", op.unwrap_or_else(|| "collective".into()))
    };
    match &c.verdict {
        Verdict::MismatchedCollectives { seq, ranks } => {
            let r: Vec<String> = ranks
                .iter()
                .map(|r| format!("{} (pid {}) in {}", rank_name(r.rank), r.pid, r.op))
                .collect();
            format!("mismatched collectives at #{seq}: {}", r.join(", "))
        }
        Verdict::RankBehind { seq, behind } => {
            let r: Vec<String> = behind
                .iter()
                .map(|w| format!("{} at #{}{}", who(w), w.at, place(w)))
                .collect();
            let n = behind.len();
            format!(
                "{} behind: {}; the others are in {}",
                plural(n, "a rank", "ranks"),
                r.join("; "),
                op(*seq)
            )
        }
        Verdict::NotEnoughTraces {
            missing_ranks,
            traces_without_collectives,
        } => {
            let mut s = "not enough traces: ".to_string();
            s += &match (missing_ranks.is_empty(), c.size) {
                (false, _) => format!("{} absent (no trace holds them)", ranks_list(missing_ranks)),
                (true, None) => "the communicator's size is unknown (no rank said it)".into(),
                (true, Some(n)) => format!("{} of {n} ranks traced", c.ranks_count),
            };
            if !traces_without_collectives.is_empty() {
                let n = traces_without_collectives.len();
                s += &format!(
                    "; {n} {} no collective ({})",
                    plural(n, "trace holds", "traces hold"),
                    traces_without_collectives.join(", ")
                );
            }
            s
        }
        Verdict::NoneCompleted { seq } => format!(
            "all ranks launched {} and none completed: the collective, the network or a GPU is stuck",
            op(*seq)
        ),
        Verdict::InStep { seq } => format!("no rank behind: every rank is at #{seq}"),
    }
}

fn rank_row(o: &mut String, r: &Rank) {
    let opt = |v: Option<u64>| v.map_or("?".into(), |v| v.to_string());
    let _ = writeln!(
        o,
        "  {:<5} {:<12} {:<8} {:>11}  #{:<6} {:<9} {:<28} {}",
        opt(r.rank),
        r.host.as_deref().unwrap_or("-"),
        r.pid,
        r.collectives,
        r.at,
        r.how,
        r.place.as_deref().unwrap_or("-"),
        r.file
    );
}

fn communicator(o: &mut String, c: &Communicator) {
    let size = c
        .size
        .map_or("size unknown".into(), |n| format!("size {n}"));
    let _ = writeln!(
        o,
        "\ncommunicator {} ({size}, {} traced, {} missing)",
        comm_name(c),
        c.ranks_count,
        c.missing_ranks_count
    );
    let _ = writeln!(o, "  verdict: {}", verdict_line(c));
    if let Some(f) = &c.collective {
        let op = f.op.as_deref().unwrap_or("collective");
        let _ = writeln!(o, "  #{} {op}:", f.seq);
        if !f.blocked_ranks.is_empty() {
            let names: Vec<String> = f.blocked_ranks.iter().map(who).collect();
            let frame = (f.common_frame.as_deref()).map_or(String::new(), |p| format!(", in {p}"));
            let _ = writeln!(o, "    blocked in it: {}{frame}", names.join(", "));
        }
        if !f.at_ranks.is_empty() {
            let names: Vec<String> = f.at_ranks.iter().map(who).collect();
            let _ = writeln!(o, "    at it (its trace's last): {}", names.join(", "));
        }
        for w in &f.not_entered_ranks {
            let _ = writeln!(
                o,
                "    not in it: {} at #{} ({}){}",
                who(w),
                w.at,
                w.how,
                place(w)
            );
        }
        if !c.missing_ranks.is_empty() {
            let m: Vec<u64> = c.missing_ranks.iter().map(|m| m.rank).collect();
            let _ = writeln!(o, "    no trace: {}", ranks_list(&m));
        }
    }
    let _ = writeln!(
        o,
        "  {:<5} {:<12} {:<8} {:>11}  {:<7} {:<9} {:<28} file",
        "rank", "host", "pid", "collectives", "at", "how", "where"
    );
    for r in &c.ranks {
        rank_row(o, r);
    }
    for r in c.ranks.iter().filter(|r| r.stack.is_some()) {
        let s = r.stack.as_ref().expect("filtered");
        let thread = match (s.tid, &s.name) {
            (Some(t), Some(n)) => format!("thread {t} ({n})"),
            (Some(t), None) => format!("thread {t}"),
            _ => "its thread".into(),
        };
        let _ = writeln!(
            o,
            "  stack of {} (pid {}), {thread}:",
            rank_name(r.rank),
            r.pid
        );
        for f in &s.frames {
            let _ = writeln!(o, "      {f}");
        }
        for e in &s.errors {
            let _ = writeln!(o, "      ({e})");
        }
    }
}

/// The job as text.
pub(in crate::read::report) fn render(job: &Job) -> String {
    let mut o = String::new();
    let n = job.traces_count;
    let _ = writeln!(
        o,
        "job: {n} {} used, {} {}, {} skipped",
        plural(n, "trace", "traces"),
        job.communicators_count,
        plural(job.communicators_count, "communicator", "communicators"),
        job.skipped.len()
    );
    for c in job.communicators.iter().take(LISTED) {
        let _ = writeln!(o, "verdict: comm {}: {}", comm_name(c), verdict_line(c));
    }
    if job.communicators_count > LISTED {
        let more = job.communicators_count - LISTED;
        let _ = writeln!(o, "… and {more} more communicators, each below");
    }
    for c in &job.communicators {
        communicator(&mut o, c);
    }
    let _ = writeln!(o, "\ntraces used");
    for t in job.traces.iter().take(LISTED) {
        let pids: Vec<String> = t.pids.iter().map(u64::to_string).collect();
        let why = t.trigger.map_or(String::new(), |k| format!(", {k} trace"));
        let _ = writeln!(
            o,
            "  {} (pid {}, {} {}{why})",
            t.file,
            pids.join(", "),
            t.collectives,
            plural(t.collectives, "collective", "collectives")
        );
    }
    if n > LISTED {
        let _ = writeln!(o, "  … and {} more (--json lists them)", n - LISTED);
    }
    if !job.skipped.is_empty() {
        let _ = writeln!(o, "\nskipped");
        for s in job.skipped.iter().take(LISTED) {
            let _ = writeln!(o, "  {}: {}", s.file, s.why);
        }
        if job.skipped.len() > LISTED {
            let more = job.skipped.len() - LISTED;
            let _ = writeln!(o, "  … and {more} more (--json lists them)");
        }
    }
    for n in &job.notes {
        let _ = writeln!(o, "note: {n}");
    }
    o
}
