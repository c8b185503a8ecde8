//! The top of a report: what the trace lost and which figures that touches, then why
//! the daemon took the trace — the slow call, its chain, its collective, the ranks
//! behind, where the program was and every thread's stack.

use std::fmt::Write as _;

use crate::read::report::{
    figures::{Figures, losses::section},
    job::shown,
    text::{dur, thread},
    word::{Collective, Word},
};

pub(super) fn render(o: &mut String, f: &Figures) {
    if !f.lost.is_empty() {
        let _ = writeln!(
            o,
            "LOSSES: this trace lost records; the figures each touches undercount:"
        );
        for l in &f.lost {
            let touched: Vec<&str> = l.touches.iter().map(|t| section(t)).collect();
            let _ = writeln!(
                o,
                "  {:<40} {:>10}  {}",
                l.what,
                l.count,
                touched.join(", ")
            );
        }
        o.push('\n');
    }
    if let Some(w) = &f.trigger {
        word(o, w);
        o.push('\n');
    }
}

fn opt(v: Option<u64>) -> String {
    v.map_or("?".into(), |v| v.to_string())
}

fn collective(c: &Collective) -> String {
    let api = c.api.as_deref().unwrap_or("collective");
    let comm = c.comm.as_deref().unwrap_or("unknown");
    let rank = match (c.rank, c.nranks) {
        (Some(r), Some(n)) => format!(" (rank {r} of {n})"),
        (Some(r), None) => format!(" (rank {r})"),
        _ => String::new(),
    };
    format!("{api} #{} of comm {comm}{rank}", c.seq)
}

fn word(o: &mut String, w: &Word) {
    let pid = opt(w.pid);
    let api = shown(w.api.as_deref().unwrap_or("a call"));
    let on = w.tid.map_or(String::new(), |t| format!(" thread {t}"));
    let blocked = w
        .blocked_ms
        .map_or(String::new(), |ms| format!(" {}", dur(ms * 1e3)));
    let head = match w.kind {
        "hang" => format!("Traced for a hang: pid {pid}{on} blocked in {api}{blocked} when found"),
        "stall" => format!("Traced for a stall: pid {pid}{on} blocked{blocked} in {api}"),
        "behind" => format!("Traced as a rank behind: pid {pid}"),
        k => format!("Traced as a rank {k}: pid {pid}"),
    };
    let ended = w.ended.as_deref().map_or(String::new(), |e| {
        format!("; the trace ended: {}", shown(e))
    });
    let _ = writeln!(o, "{head}{ended}");
    if let Some(p) = &w.place {
        let _ = writeln!(o, "  where: {}", shown(p));
    }
    if !w.waits_on.is_empty() {
        let _ = writeln!(o, "  waits on:");
        for s in &w.waits_on {
            let _ = writeln!(o, "    {}", shown(&s.said()));
        }
    }
    if let Some(c) = &w.collective {
        let how = match w.kind {
            "hang" | "stall" => "in",
            _ => "at",
        };
        let _ = writeln!(o, "  collective: {how} {}", shown(&collective(c)));
    }
    if let Some(b) = &w.waited_by {
        let what = b
            .collective
            .as_ref()
            .map_or(String::new(), |c| format!(" in {}", shown(&collective(c))));
        let _ = writeln!(o, "  waited for by: pid {}{what}", opt(b.pid));
    }
    if !w.behind.is_empty() {
        let b: Vec<String> = (w.behind.iter())
            .map(|b| {
                format!(
                    "rank {} (pid {}) at #{}",
                    opt(b.rank),
                    opt(b.pid),
                    opt(b.seq)
                )
            })
            .collect();
        let _ = writeln!(o, "  ranks behind: {}", b.join(", "));
    }
    let Some(s) = &w.stacks else {
        return;
    };
    let took = s
        .took_ms
        .map_or(String::new(), |ms| format!("read in {}", dur(ms * 1e3)));
    let py = s
        .python_version
        .as_deref()
        .map_or("not Python".into(), |v| format!("Python {}", shown(v)));
    let _ = writeln!(
        o,
        "  stacks ({took}{}{py}):",
        if took.is_empty() { "" } else { ", " }
    );
    if let Some(e) = &s.error {
        let _ = writeln!(o, "    (not read: {})", shown(e));
    }
    for t in &s.threads {
        let tid = t.tid.map_or(0, |t| t as u32);
        let name = t.name.as_deref().map(shown);
        let blocked = if t.blocked { ", blocked" } else { "" };
        let _ = writeln!(o, "    {}{blocked}:", thread(tid, name.as_deref()));
        for f in t.frames() {
            let _ = writeln!(o, "      {}", shown(f));
        }
        for (what, e) in [("python", &t.python_error), ("native", &t.native_error)] {
            if let Some(e) = e {
                let _ = writeln!(o, "      ({what}: {})", shown(e));
            }
        }
    }
    let cut = s.cut_threads + s.cut_frames + s.cut_strings;
    if cut > 0 {
        let _ = writeln!(
            o,
            "    (left out by the bounds: {} threads, {} frames, {} strings)",
            s.cut_threads, s.cut_frames, s.cut_strings
        );
    }
}
