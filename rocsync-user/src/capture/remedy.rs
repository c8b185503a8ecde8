//! What a capture that lost call records says to do about it: the probes wrote faster
//! than rocsync read, so a larger ring holds more, and skipping the poll that made most
//! of the calls writes far fewer.

use rocsync_common::Api;

use crate::calls::stats::CaptureStats;

/// The remedy for records the call ring lost, if it lost any; `ring_bytes`, the call
/// ring's size now.
pub(super) fn said(stats: &CaptureStats, ring_bytes: u32) -> Option<String> {
    let k = &stats.kernel;
    if k.entries + k.exits == 0 {
        return None;
    }
    let now = match ring_bytes {
        b if b >= 1 << 20 => format!("{}", b >> 20),
        b => format!("{}K", b >> 10),
    };
    let larger = (u64::from(ring_bytes) * 4).min(1 << 30);
    let larger = match larger {
        b if b >= 1 << 20 => format!("{}", b >> 20),
        b => format!("{}K", b >> 10),
    };
    let mut said = format!(
        "rocsync: the probes wrote call records faster than rocsync read them: a larger \
         ring holds more (--ring-size {larger}; it is {now} now)"
    );
    // The poll that made most of the calls, if one did: skipped, its calls cost a trap
    // less and write nothing.
    let calls = stats.calls().max(1);
    let poll = (stats.per_api.iter())
        .filter(|(name, _)| {
            Api::ALL
                .iter()
                .any(|a| a.symbol() == **name && a.is_polling())
        })
        .max_by_key(|(_, n)| n.calls)
        .filter(|(_, n)| n.calls * 2 > calls);
    if let Some((name, n)) = poll {
        said.push_str(&format!(
            ", and --skip {name} leaves out the poll that made {}% of the calls recorded \
             (its waits are the synchronizes')",
            n.calls * 100 / calls
        ));
    }
    Some(said)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calls::stats::ApiCount;

    #[test]
    fn lost_records_name_a_larger_ring_and_the_poll_that_made_most_calls() {
        let mut stats = CaptureStats::default();
        assert_eq!(said(&stats, 64 << 20), None);
        stats.kernel.entries = 10;
        let polls = ApiCount {
            calls: 90,
            ..Default::default()
        };
        stats.per_api.insert("hipEventQuery", polls);
        let syncs = ApiCount {
            calls: 10,
            ..Default::default()
        };
        stats.per_api.insert("hipStreamSynchronize", syncs);
        let s = said(&stats, 64 << 20).unwrap();
        assert!(s.contains("--ring-size 256; it is 64 now"), "{s}");
        assert!(s.contains("--skip hipEventQuery"), "{s}");
        assert!(s.contains("90%"), "{s}");
        // No poll made most calls: the ring alone.
        stats.per_api.get_mut("hipEventQuery").unwrap().calls = 5;
        let s = said(&stats, 4 << 10).unwrap();
        assert!(s.contains("--ring-size 16K; it is 4K now"), "{s}");
        assert!(!s.contains("--skip"), "{s}");
    }
}
