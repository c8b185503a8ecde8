//! The report as text: what the trace lost and why the daemon took it first
//! ([`crate::read::report::text::top`]), then one section per figure; durations in the unit that reads
//! (`8.0 s`, not `8000117.421 µs`), streams as Perfetto numbers them (`stream 2`) with
//! their handle beside.

mod more;
pub(super) mod top;
mod written;

use std::{collections::BTreeMap, fmt::Write as _};

use super::figures::{Figures, Stream, Waiter};
use crate::read::report::{job::text::plural, text::top as text_top};

pub(super) use written::{dur, stream, thread};

pub(super) fn render(f: &Figures) -> String {
    let mut o = String::new();
    text_top::render(&mut o, f);
    summary(&mut o, f);
    let _ = writeln!(o, "\nTime blocked per API and device");
    let _ = writeln!(
        o,
        "  {:<28} {:>6} {:>8} {:>10} {:>10} {:>10} {:>10}",
        "api", "device", "calls", "p50", "p99", "max", "total"
    );
    if f.per_api.is_empty() {
        let _ = writeln!(o, "  (no runtime call)");
    }
    for a in &f.per_api {
        let dev = a.device.map_or("-".to_string(), |d| d.to_string());
        let _ = writeln!(
            o,
            "  {:<28} {:>6} {:>8} {:>10} {:>10} {:>10} {:>10}",
            a.api,
            dev,
            a.calls,
            dur(a.blocked_p50_us),
            dur(a.blocked_p99_us),
            dur(a.blocked_max_us),
            dur(a.blocked_total_us)
        );
    }
    crate::read::report::text::more::collectives(&mut o, f);
    crate::read::report::text::more::packets(&mut o, f);
    longest(&mut o, f);
    dependencies(&mut o, f);
    counts(&mut o, "Unresolved waits", &f.unresolved, "none");
    let lost: BTreeMap<String, u64> = (f.losses.iter())
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| (k.clone(), *n))
        .collect();
    let none = format!(
        "nothing lost: {} {}, all 0",
        f.losses.len(),
        plural(f.losses.len(), "counter", "counters")
    );
    counts(&mut o, "Losses", &lost, &none);
    let mut unused = f.unusable.clone();
    unused.extend(f.not_used.clone());
    counts(&mut o, "Not used by this report", &unused, "nothing");
    counts(&mut o, "Cut to the report's bounds", &f.cut, "nothing");
    o
}

/// The first line: how many of each kind the trace holds.
fn summary(o: &mut String, f: &Figures) {
    let apis = f
        .per_api
        .iter()
        .map(|a| &a.api)
        .collect::<std::collections::BTreeSet<_>>();
    let mut parts = vec![format!(
        "{} {} ({} {})",
        f.calls,
        plural(f.calls as usize, "runtime call", "runtime calls"),
        apis.len(),
        plural(apis.len(), "API", "APIs")
    )];
    let c = &f.collectives;
    let n: u64 = c.communicators.iter().map(|m| m.collectives).sum();
    let other: u64 = c.other_calls.values().sum();
    if n + other > 0 {
        parts.push(format!(
            "{n} {} in {} {}, {other} other NCCL/RCCL {}",
            plural(n as usize, "collective", "collectives"),
            c.communicators.len(),
            plural(c.communicators.len(), "communicator", "communicators"),
            plural(other as usize, "call", "calls")
        ));
    }
    let p = &f.packets;
    if p.packets > 0 {
        parts.push(format!(
            "{} HSA {} on {} {}",
            p.packets,
            plural(p.packets as usize, "packet", "packets"),
            p.queues.len(),
            plural(p.queues.len(), "queue", "queues")
        ));
    }
    let _ = writeln!(o, "{}", parts.join(", "));
}

fn longest(o: &mut String, f: &Figures) {
    let _ = writeln!(o, "\nLongest waits");
    if f.longest_waits.is_empty() {
        let _ = writeln!(o, "  (no synchronisation)");
    }
    for w in &f.longest_waits {
        let on = w.stream.as_ref().map_or("-".into(), stream);
        let _ = write!(
            o,
            "  {:>10}  {} ({}) corr {} {} {on} at {}",
            dur(w.blocked_us),
            w.api,
            w.kind,
            w.correlation,
            thread(w.tid, w.thread_name.as_deref()),
            dur(w.at_us)
        );
        match (&w.producer, &w.unresolved) {
            (Some(p), _) => {
                let _ = writeln!(
                    o,
                    "\n      ← recorded on {} by thread {} (corr {}), {} before",
                    stream(&p.stream),
                    p.tid,
                    p.correlation,
                    dur(p.since_record_us)
                );
            }
            (None, Some(why)) => {
                let _ = writeln!(o, "\n      ← unresolved: {why}");
            }
            (None, None) => o.push('\n'),
        }
    }
}

fn dependencies(o: &mut String, f: &Figures) {
    let _ = writeln!(o, "\nWho waits on whom");
    if f.dependencies.is_empty() {
        let _ = writeln!(o, "  (no resolved wait on an event)");
    } else {
        let _ = writeln!(
            o,
            "  {:<8} {:<32} {:<32} {:>7} {:>10} {:>10}",
            "pid", "waiter", "waits on", "waits", "total", "max"
        );
    }
    for d in &f.dependencies {
        let waiter = match &d.waiter {
            Waiter::Stream { handle, index } => stream(&Stream {
                handle: handle.clone(),
                index: *index,
            }),
            Waiter::Thread { tid, name } => thread(*tid, name.as_deref()),
        };
        let _ = writeln!(
            o,
            "  {:<8} {:<32} {:<32} {:>7} {:>10} {:>10}",
            d.pid,
            waiter,
            stream(&d.producer),
            d.waits,
            dur(d.blocked_total_us),
            dur(d.blocked_max_us)
        );
    }
}

pub(super) fn counts(o: &mut String, title: &str, m: &BTreeMap<String, u64>, none: &str) {
    let _ = writeln!(o, "\n{title}");
    if m.is_empty() {
        let _ = writeln!(o, "  ({none})");
    }
    // As wide as the longest reason, so that every count lines up.
    let width = m
        .keys()
        .map(|k| k.chars().count())
        .max()
        .unwrap_or(0)
        .max(40);
    for (k, v) in m {
        let _ = writeln!(o, "  {k:<width$} {v:>10}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::report::Capture;

    #[test]
    fn what_was_cut_is_said() {
        let mut c = Capture::default();
        c.cut("strings over 1 KiB, read as their first 1 KiB".into(), 3);
        c.cut("never said".into(), 0);
        let text = render(&Figures::of(&c));
        let section = text.split("Cut to the report's bounds\n").nth(1).unwrap();
        assert_eq!(
            section.trim_end(),
            "  strings over 1 KiB, read as their first 1 KiB          3"
        );
        assert!(render(&Figures::of(&Capture::default())).ends_with("bounds\n  (nothing)\n"));
    }

    #[test]
    fn durations_read_in_their_unit_and_losses_have_no_rows_of_zeros() {
        assert_eq!(dur(8_000_117.421), "8.0 s");
        assert_eq!(dur(12_500.0), "12.5 ms");
        assert_eq!(dur(97.632), "97.6 µs");
        assert_eq!(dur(0.8), "800 ns");
        let mut c = Capture {
            losses: [("entry_records".into(), 0), ("lost_ids".into(), 0)].into(),
            ..Capture::default()
        };
        let text = render(&Figures::of(&c));
        assert!(
            text.contains("Losses\n  (nothing lost: 2 counters, all 0)\n"),
            "{text}"
        );
        c.losses.insert("exit_records".into(), 7);
        let text = render(&Figures::of(&c));
        let losses = text.split("\nLosses\n").nth(1).unwrap();
        assert!(
            losses.starts_with("  exit_records                                      7\n\n"),
            "{losses}"
        );
    }
}
