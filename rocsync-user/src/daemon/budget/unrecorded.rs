//! What the duty cycle keeps from the records: while records and waits are cycled off,
//! nothing of them is recorded (the flight recorder records the periods on). Each
//! period off is a span per API in the shed log (`shed_log.rs`), with the calls
//! estimated in it, which every flight recorder dump and trace overlapping it says in
//! `rocsync.parameters.not_recorded` (and, summed, in its `drops`); with the flight
//! recorder on, `/metrics` counts those calls by API
//! (`rocsync_flight_recorder_unrecorded_calls_total`).

use std::collections::BTreeMap;

use rocsync_common::{Api, MetricKey};

use crate::daemon::tracking::apart::shed_log::ShedLog;

/// The estimated calls, by API (over label groups and devices: each call is in one
/// series).
fn by_api(added: &BTreeMap<(u32, u32), u64>) -> BTreeMap<&'static str, u64> {
    let mut out = BTreeMap::new();
    for (&(_, slot), &n) in added {
        if let Some(api) = Api::from_u32(MetricKey::of_slot(slot).api) {
            *out.entry(api.symbol()).or_default() += n;
        }
    }
    out
}

#[derive(Default)]
pub(crate) struct Unrecorded {
    /// Per API, the calls estimated when the open span began.
    base: Option<BTreeMap<&'static str, u64>>,
    /// Per API, the estimates as last seen.
    last: BTreeMap<&'static str, u64>,
    /// Per API, the calls the flight recorder did not record (estimated).
    pub calls: BTreeMap<&'static str, u64>,
}

impl Unrecorded {
    /// The cycle took `apis`' probes off in `libraries`: a span begins.
    pub(crate) fn off(
        &mut self,
        log: &ShedLog,
        (apis, libraries): (&[&'static str], &str),
        added: &BTreeMap<(u32, u32), u64>,
    ) {
        self.base = Some(by_api(added));
        log.cycled_off(apis, libraries);
    }

    /// The estimates so far (`flight`: the flight recorder runs, and did not record
    /// them).
    pub(crate) fn update(
        &mut self,
        log: &ShedLog,
        added: &BTreeMap<(u32, u32), u64>,
        flight: bool,
    ) {
        let now = by_api(added);
        if let Some(base) = &self.base {
            for (&api, &n) in &now {
                log.cycle_estimated(api, n.saturating_sub(base.get(api).copied().unwrap_or(0)));
            }
        }
        for (&api, &n) in &now {
            // Estimates forgotten with their label group leave the counter as it was.
            let last = self.last.insert(api, n).unwrap_or(0);
            if flight && n > last {
                *self.calls.entry(api).or_default() += n - last;
            }
        }
    }

    /// The probes are on again: the open span ends, its estimate as it stands.
    pub(crate) fn on(&mut self, log: &ShedLog, added: &BTreeMap<(u32, u32), u64>, flight: bool) {
        self.update(log, added, flight);
        if self.base.take().is_some() {
            log.cycled_on();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_holds_the_calls_estimated_since_it_began_and_the_counter_only_rises() {
        let log = ShedLog::default();
        let mut u = Unrecorded::default();
        let rec = MetricKey::slot(Api::HipEventRecord as u32, 0).unwrap();
        let rec1 = MetricKey::slot(Api::HipEventRecord as u32, 1).unwrap();
        let mut added = BTreeMap::from([((0, rec), 100)]);
        u.update(&log, &added, true);
        assert_eq!(u.calls["hipEventRecord"], 100);
        u.off(&log, (&["hipEventRecord"], "/lib"), &added);
        added.insert((0, rec), 130);
        added.insert((3, rec1), 20);
        u.on(&log, &added, true);
        let spans = log.overlapping(0);
        assert_eq!(spans[0]["estimated_calls"], 50, "{spans}");
        assert_eq!(u.calls["hipEventRecord"], 150);
        // Group 3 gone: its estimates forgotten, the counter stays.
        added.remove(&(3, rec1));
        u.update(&log, &added, true);
        assert_eq!(u.calls["hipEventRecord"], 150);
        // Without the flight recorder nothing is counted as unrecorded by it.
        added.insert((0, rec), 200);
        u.update(&log, &added, false);
        assert_eq!(u.calls["hipEventRecord"], 150);
    }
}
