//! What a blocked synchronisation waits on, from the dependency state the probes keep
//! of every counted process (`Dependency`: where each event was last recorded, which
//! event each stream last waited on; each stream's last collective): a stream's last
//! collective or wait before the call, whichever came later — a collective ends the
//! chain; a wait leads to the record it was on, then to that stream, and so on. A step
//! the state cannot vouch for ends the chain with why — it never names a later record,
//! wait or collective than the one the call depended on.

use rocsync_common::{Api, CommState, Cookie, Dependency, LastCollective};
use serde_json::{Value, json};

/// Steps followed at most: a chain across a node's streams is short.
const MAX_STEPS: usize = 8;

/// The probes' dependency state of one process: (stream → its last wait, event → its
/// last record).
pub(crate) trait State {
    fn last_wait(&self, stream: u64) -> Option<Dependency>;
    fn last_record(&self, event: u64) -> Option<Dependency>;
    fn last_collective(&self, stream: u64) -> Option<LastCollective>;
    fn comm(&self, handle: u64) -> Option<CommState>;
    /// Whether its records and waits went unprobed at some moment in `(from_ns, to_ns]`
    /// (the budget's duty cycle): one made then may be missing from the state.
    fn blind_between(&self, _from_ns: u64, _to_ns: u64) -> bool {
        false
    }
}

/// Why a step cannot be vouched for while the duty cycle had the probes off.
const CYCLED: &str = "records and waits were not all probed since (the budget's duty cycle)";

/// What the call `api(arg0)` entered at `entry_ns` waits on, step by step; the log's
/// short form of it; `offset_ns` turns the probes' clock into the wall clock.
pub(crate) fn waits_on(api: Api, arg0: u64, entry_ns: u64, state: &impl State) -> Vec<Value> {
    let cookie = Cookie::of(api);
    let mut steps = Vec::new();
    // Stream to follow, and the moment its work was enqueued up to.
    let (mut stream, mut before) = if cookie.stream_arg() == 1 {
        (arg0, entry_ns)
    } else if cookie.event_arg() == 1 {
        match recorded(arg0, entry_ns, state, &mut steps) {
            Some(s) => s,
            None => return steps,
        }
    } else {
        // A device's synchronisation waits on every stream: no one chain.
        return steps;
    };
    let mut seen = vec![stream];
    while steps.len() < MAX_STEPS {
        let wait = state.last_wait(stream);
        // A wait (or a later collective) made while unprobed would be the answer.
        let known = [
            wait.map(|w| w.ns).filter(|&ns| ns <= before),
            state
                .last_collective(stream)
                .map(|c| c.ns)
                .filter(|&ns| ns <= before),
        ];
        let since = known.into_iter().flatten().max().unwrap_or(0);
        if state.blind_between(since, before) {
            steps.push(json!({"stream": hex(stream), "unknown": CYCLED}));
            return steps;
        }
        // Enqueued on it before the call, and after its last wait: what it waits on.
        if let Some(c) = state.last_collective(stream).filter(|c| c.ns <= before)
            && wait.is_none_or(|w| w.ns > before || c.ns >= w.ns)
        {
            steps.push(collective_step(stream, &c, state.comm(c.comm)));
            return steps;
        }
        let Some(w) = wait else {
            // Its own work, and nothing it waited on: the chain ends at this stream.
            steps.push(json!({"stream": hex(stream), "waited": "nothing the probes saw"}));
            return steps;
        };
        if w.ns > before {
            steps.push(json!({
                "stream": hex(stream),
                "unknown": "it waited again since: its wait before is not kept",
            }));
            return steps;
        }
        steps.push(json!({"stream": hex(stream), "waited_on_event": hex(w.handle), "at_ns": w.ns}));
        match recorded(w.handle, w.ns, state, &mut steps) {
            Some((s, at)) if !seen.contains(&s) => {
                seen.push(s);
                (stream, before) = (s, at);
            }
            _ => return steps,
        }
    }
    steps
}

/// The step of a stream's last collective: its API, number and communicator.
fn collective_step(stream: u64, c: &LastCollective, comm: Option<CommState>) -> Value {
    let known = |v: u32| (v != u32::MAX).then_some(v);
    let api = Api::from_u32(c.api).map_or("unknown", Api::symbol);
    let id = comm.map(|m| m.id).filter(|&id| id != 0).map(hex);
    json!({
        "stream": hex(stream),
        "collective": {
            "api": api, "seq": c.seq, "comm": id, "comm_handle": hex(c.comm),
            "rank": comm.and_then(|m| known(m.rank)),
            "nranks": comm.and_then(|m| known(m.nranks)),
        },
        "at_ns": c.ns,
    })
}

/// The collective the chain ends at, if it does.
pub(crate) fn collective(steps: &[Value]) -> Option<&Value> {
    steps.last()?.get("collective")
}

/// A handle as traces write them.
fn hex(h: u64) -> String {
    format!("{h:#x}")
}

/// The step of `event`'s record before `before`; its stream and when.
fn recorded(
    event: u64,
    before: u64,
    state: &impl State,
    steps: &mut Vec<Value>,
) -> Option<(u64, u64)> {
    let last = state.last_record(event);
    let since = last.map(|r| r.ns).filter(|&ns| ns <= before).unwrap_or(0);
    if state.blind_between(since, before) {
        steps.push(json!({"event": hex(event), "unknown": CYCLED}));
        return None;
    }
    let Some(r) = last else {
        steps.push(json!({"event": hex(event), "unknown": "never recorded while counted"}));
        return None;
    };
    if r.ns > before {
        steps.push(json!({
            "event": hex(event),
            "unknown": "recorded again since: the record waited on is not kept",
        }));
        return None;
    }
    steps.push(json!({"event": hex(event), "recorded_on_stream": hex(r.handle), "at_ns": r.ns}));
    Some((r.handle, r.ns))
}

/// The chain in a line: `event 0x… recorded on stream 0x… 1.2 s before`.
pub(crate) fn said(steps: &[Value], entry_ns: u64) -> Option<String> {
    if let Some(c) = collective(steps) {
        let comm = c["comm"]
            .as_str()
            .unwrap_or("unknown (set up before the probes)");
        return Some(format!(
            "{} #{} of comm {comm}",
            c["api"].as_str()?,
            c["seq"]
        ));
    }
    let last = steps
        .iter()
        .rev()
        .find(|s| s.get("recorded_on_stream").is_some())?;
    let ago = entry_ns.saturating_sub(last["at_ns"].as_u64()?) as f64 / 1e9;
    Some(format!(
        "event {} recorded on stream {} {ago:.1} s before",
        last["event"].as_str()?,
        last["recorded_on_stream"].as_str()?
    ))
}

/// `at_ns` (the probes' clock) as `at_unix_us`.
pub(crate) fn on_wall_clock(mut steps: Vec<Value>, offset_ns: i64) -> Vec<Value> {
    for s in &mut steps {
        if let Some(ns) = s.get("at_ns").and_then(Value::as_u64)
            && let Some(o) = s.as_object_mut()
        {
            o.remove("at_ns");
            o.insert("at_unix_us".into(), ((ns as i64 + offset_ns) / 1000).into());
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[derive(Default)]
    struct Fake {
        waits: HashMap<u64, Dependency>,
        records: HashMap<u64, Dependency>,
        collectives: HashMap<u64, LastCollective>,
        comms: HashMap<u64, CommState>,
        /// A span the records and waits were unprobed.
        blind: Option<(u64, u64)>,
    }

    impl State for Fake {
        fn blind_between(&self, from_ns: u64, to_ns: u64) -> bool {
            self.blind
                .is_some_and(|(off, on)| off <= to_ns && on > from_ns)
        }
        fn last_wait(&self, stream: u64) -> Option<Dependency> {
            self.waits.get(&stream).copied()
        }
        fn last_record(&self, event: u64) -> Option<Dependency> {
            self.records.get(&event).copied()
        }
        fn last_collective(&self, stream: u64) -> Option<LastCollective> {
            self.collectives.get(&stream).copied()
        }
        fn comm(&self, handle: u64) -> Option<CommState> {
            self.comms.get(&handle).copied()
        }
    }

    fn coll(comm: u64, seq: u64, ns: u64) -> LastCollective {
        LastCollective {
            comm,
            seq,
            ns,
            api: Api::NcclAllReduce as u32,
            pad: 0,
        }
    }

    #[test]
    fn a_step_with_unprobed_moments_after_it_is_not_vouched_for() {
        let mut s = Fake::default();
        s.waits.insert(2, dep(7, 20));
        s.records.insert(7, dep(5, 15));
        // Unprobed before the record: the chain is whole.
        s.blind = Some((1, 10));
        let steps = waits_on(Api::CudaStreamSynchronize, 2, 30, &s);
        assert_eq!(steps[1]["recorded_on_stream"], "0x5", "{steps:?}");
        // Between the record and the wait on it: a later record may be the one waited on.
        s.blind = Some((16, 18));
        let steps = waits_on(Api::CudaStreamSynchronize, 2, 30, &s);
        assert_eq!(steps[1]["unknown"], CYCLED, "{steps:?}");
        // Between the wait and the call: a later wait may be what it waits on.
        s.blind = Some((25, 26));
        let steps = waits_on(Api::CudaStreamSynchronize, 2, 30, &s);
        assert_eq!(steps.len(), 1);
        assert_eq!(steps[0]["unknown"], CYCLED, "{steps:?}");
        // After the call began: nothing it waits on was made then.
        s.blind = Some((31, 40));
        let steps = waits_on(Api::CudaStreamSynchronize, 2, 30, &s);
        assert_eq!(steps[1]["recorded_on_stream"], "0x5", "{steps:?}");
    }

    #[test]
    fn a_chain_ends_at_the_collective_of_the_blocked_stream_or_of_the_producer() {
        let mut s = Fake::default();
        s.comms.insert(
            0xc0,
            CommState {
                id: 0xabc,
                seq: 21,
                rank: 0,
                nranks: 2,
                ..CommState::default()
            },
        );
        // The blocked stream's own collective (PyTorch's synchronous all_reduce).
        s.collectives.insert(2, coll(0xc0, 21, 10));
        let steps = waits_on(Api::CudaStreamSynchronize, 2, 30, &s);
        let c = collective(&steps).unwrap();
        assert_eq!(
            (c["seq"].as_u64(), c["comm"].as_str()),
            (Some(21), Some("0xabc"))
        );
        assert_eq!(said(&steps, 30).unwrap(), "ncclAllReduce #21 of comm 0xabc");
        // Its wait came later: the wait's producer stream, and that one's collective.
        s.waits.insert(2, dep(7, 20));
        s.records.insert(7, dep(5, 15));
        s.collectives.insert(5, coll(0xc0, 22, 12));
        let steps = waits_on(Api::CudaStreamSynchronize, 2, 30, &s);
        assert_eq!(steps.len(), 3);
        assert_eq!(collective(&steps).unwrap()["seq"], 22);
        // One enqueued after the call began is never named.
        s.collectives.insert(5, coll(0xc0, 23, 40));
        let steps = waits_on(Api::CudaStreamSynchronize, 2, 30, &s);
        assert!(collective(&steps).is_none());
        // A communicator the probes never saw set up: its id unknown, said so.
        s.comms.clear();
        s.collectives.insert(5, coll(0xc0, 3, 12));
        let steps = waits_on(Api::CudaStreamSynchronize, 2, 30, &s);
        assert!(collective(&steps).unwrap()["comm"].is_null());
        assert!(said(&steps, 30).unwrap().contains("unknown"));
    }

    fn dep(handle: u64, ns: u64) -> Dependency {
        Dependency { handle, ns }
    }

    #[test]
    fn a_stream_sync_follows_its_wait_to_the_record_and_that_streams_own_wait() {
        let mut s = Fake::default();
        // Stream 2 waited (at 20) on event 7, recorded (at 10) on stream 1, which waited
        // (at 5) on event 8, recorded (at 1) on stream 3, which waited on nothing.
        s.waits.insert(2, dep(7, 20));
        s.records.insert(7, dep(1, 10));
        s.waits.insert(1, dep(8, 5));
        s.records.insert(8, dep(3, 1));
        let steps = waits_on(Api::HipStreamSynchronize, 2, 30, &s);
        let keys: Vec<String> = steps
            .iter()
            .map(|v| {
                let o = v.as_object().unwrap();
                o.keys()
                    .filter(|k| *k != "at_ns")
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect();
        assert_eq!(
            keys,
            [
                "stream,waited_on_event",
                "event,recorded_on_stream",
                "stream,waited_on_event",
                "event,recorded_on_stream",
                "stream,waited",
            ]
        );
        assert_eq!(steps[1]["recorded_on_stream"], "0x1");
        assert_eq!(
            said(&steps, 30).unwrap(),
            "event 0x8 recorded on stream 0x3 0.0 s before"
        );
    }

    #[test]
    fn a_later_wait_or_record_ends_the_chain_with_why_never_naming_it() {
        let mut s = Fake::default();
        s.waits.insert(2, dep(7, 40)); // after the call began at 30
        let steps = waits_on(Api::HipStreamSynchronize, 2, 30, &s);
        assert_eq!(steps.len(), 1);
        assert!(
            steps[0]["unknown"]
                .as_str()
                .unwrap()
                .contains("waited again")
        );
        s.waits.insert(2, dep(7, 20));
        s.records.insert(7, dep(1, 25)); // recorded after the wait
        let steps = waits_on(Api::HipStreamSynchronize, 2, 30, &s);
        assert!(
            steps[1]["unknown"]
                .as_str()
                .unwrap()
                .contains("recorded again")
        );
        assert_eq!(said(&steps, 30), None);
    }

    #[test]
    fn an_event_sync_starts_at_its_record_and_a_device_sync_has_no_chain() {
        let mut s = Fake::default();
        s.records.insert(7, dep(1, 10));
        let steps = waits_on(Api::HipEventSynchronize, 7, 30, &s);
        assert_eq!(steps[0]["recorded_on_stream"], "0x1");
        assert_eq!(steps[1]["waited"], "nothing the probes saw");
        assert!(waits_on(Api::HipDeviceSynchronize, 0, 30, &s).is_empty());
        // A cycle ends: stream 1 waits on an event recorded on itself.
        s.waits.insert(1, dep(7, 20));
        let steps = waits_on(Api::HipStreamSynchronize, 1, 30, &s);
        assert_eq!(steps.len(), 2);
    }
}
