//! How the report writes a duration, a stream and a thread: the words every section
//! shares (a file of its own, so that the sections need not import the text's root).

use crate::read::report::figures::Stream;

/// A duration given in µs, in the unit that reads: `8.0 s`, `12.5 ms`, `97.6 µs`, `800 ns`.
pub(in crate::read::report) fn dur(us: f64) -> String {
    let a = us.abs();
    if a >= 1e6 {
        format!("{:.1} s", us / 1e6)
    } else if a >= 1e3 {
        format!("{:.1} ms", us / 1e3)
    } else if a >= 1.0 {
        format!("{us:.1} µs")
    } else {
        format!("{:.0} ns", us * 1e3)
    }
}

/// `stream 2 (0x5625…)`, or `stream 0x5625…` where the trace gives no number.
pub(in crate::read::report) fn stream(s: &Stream) -> String {
    match s.index {
        Some(i) => format!("stream {i} ({})", s.handle),
        None => format!("stream {}", s.handle),
    }
}

/// `thread 124 (python3)`.
pub(in crate::read::report) fn thread(tid: u32, name: Option<&str>) -> String {
    match name {
        Some(n) => format!("thread {tid} ({n})"),
        None => format!("thread {tid}"),
    }
}
