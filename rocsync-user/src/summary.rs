//! The report printed at the end of every capture.

use std::{collections::BTreeMap, fmt::Write as _};

use crate::{capture::Drops, trace::call::Call};

/// Calls per API, drops and outputs, as printed to stderr.
pub fn render(calls: &[Call], drops: &Drops, in_flight: usize, extra: &[String]) -> String {
    let mut per_api: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for c in calls {
        let e = per_api.entry(c.api.symbol()).or_default();
        e.0 += 1;
        if !c.ok() {
            e.1 += 1;
        }
    }
    let mut s = String::new();
    let _ = writeln!(s, "rocsync: captured {} calls", calls.len());
    for (api, (n, failed)) in &per_api {
        let _ = write!(s, "  {api:<28} {n:>9}");
        if *failed > 0 {
            let _ = write!(s, "  ({failed} returned an error or were in flight)");
        }
        s.push('\n');
    }
    for line in extra {
        let _ = writeln!(s, "  {line}");
    }
    if in_flight > 0 {
        let _ = writeln!(
            s,
            "  in flight at stop: {in_flight} (written without exit time or return code)"
        );
    }
    let _ = writeln!(
        s,
        "  dropped: {} calls (ring buffer full), {} library-load notifications, {} undecodable records",
        drops.calls, drops.link_map, drops.undecodable
    );
    s
}
