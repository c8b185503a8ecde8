//! The report as text: one section per figure, widest columns first read.

use std::fmt::Write as _;

use super::figures::Figures;

pub fn render(f: &Figures) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{} calls", f.calls);
    let _ = writeln!(o, "\nTime blocked per API and device (µs)");
    let _ = writeln!(
        o,
        "  {:<28} {:>6} {:>8} {:>12} {:>12} {:>12} {:>14}",
        "api", "device", "calls", "p50", "p99", "max", "total"
    );
    for a in &f.per_api {
        let dev = a.device.map_or("-".to_string(), |d| d.to_string());
        let _ = writeln!(
            o,
            "  {:<28} {:>6} {:>8} {:>12.3} {:>12.3} {:>12.3} {:>14.3}",
            a.api,
            dev,
            a.calls,
            a.blocked_p50_us,
            a.blocked_p99_us,
            a.blocked_max_us,
            a.blocked_total_us
        );
    }
    let _ = writeln!(o, "\nLongest waits");
    if f.longest_waits.is_empty() {
        let _ = writeln!(o, "  (no synchronisation)");
    }
    for w in &f.longest_waits {
        let on = w.stream.as_deref().unwrap_or("-");
        let _ = write!(
            o,
            "  {:>12.3} µs  {} ({}) corr {} thread {} {} at {:.3} µs",
            w.blocked_us, w.api, w.kind, w.correlation, w.tid, on, w.at_us
        );
        match (&w.producer, &w.unresolved) {
            (Some(p), _) => {
                let _ = writeln!(
                    o,
                    "\n      ← recorded on {} by thread {} (corr {}), {:.3} µs before",
                    p.stream, p.tid, p.correlation, p.since_record_us
                );
            }
            (None, Some(why)) => {
                let _ = writeln!(o, "\n      ← unresolved: {why}");
            }
            (None, None) => o.push('\n'),
        }
    }
    let _ = writeln!(o, "\nWho waits on whom");
    if f.dependencies.is_empty() {
        let _ = writeln!(o, "  (no resolved wait on an event)");
    } else {
        let _ = writeln!(
            o,
            "  {:<8} {:<28} {:<28} {:>7} {:>14} {:>12}",
            "pid", "waiter", "waits on", "waits", "total µs", "max µs"
        );
    }
    for d in &f.dependencies {
        let _ = writeln!(
            o,
            "  {:<8} {:<28} {:<28} {:>7} {:>14.3} {:>12.3}",
            d.pid, d.waiter, d.producer, d.waits, d.blocked_total_us, d.blocked_max_us
        );
    }
    counts(&mut o, "Unresolved waits", &f.unresolved, "none");
    counts(&mut o, "Losses", &f.losses, "no drop counters");
    counts(&mut o, "Not used by this report", &f.unusable, "nothing");
    counts(&mut o, "Cut to the report's bounds", &f.cut, "nothing");
    o
}

fn counts(o: &mut String, title: &str, m: &std::collections::BTreeMap<String, u64>, none: &str) {
    let _ = writeln!(o, "\n{title}");
    if m.is_empty() {
        let _ = writeln!(o, "  ({none})");
    }
    for (k, v) in m {
        let _ = writeln!(o, "  {k:<40} {v:>10}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Capture;

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
}
