//! The report printed at the end of every capture.

use std::{collections::BTreeMap, fmt::Write as _};

use crate::capture::Drops;

/// Calls per API, drops and outputs, as printed to stderr.
pub fn render(
    per_api: &BTreeMap<&str, (u64, u64)>,
    drops: &Drops,
    in_flight: u64,
    extra: &[String],
) -> String {
    let total: u64 = per_api.values().map(|v| v.0).sum();
    let mut s = String::new();
    let _ = writeln!(s, "rocsync: captured {total} calls");
    for (api, (n, failed)) in per_api {
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
