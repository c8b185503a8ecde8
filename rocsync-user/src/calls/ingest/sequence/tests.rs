//! The sequencer's order, deferrals, losses and skips.

use rocsync_common::Api;

use super::*;

fn call(corr: u64, api: Api, done: bool) -> Call {
    Call {
        api,
        pid: 1,
        tid: 1,
        correlation: corr,
        enter_ns: corr,
        exit_ns: done.then_some(corr + 1),
        ret: done.then_some(0),
        args: [0; 3],
        filtered: false,
    }
}

fn exit(corr: u64) -> Exit {
    Exit {
        exit_ns: corr + 1,
        ret: 0,
        out: None,
    }
}

fn names(got: &[Released]) -> Vec<String> {
    got.iter()
        .map(|r| match r {
            Released::Call(c) => format!("{}", c.correlation),
            Released::Deferred(c) => format!("{}d", c.correlation),
            Released::Completion(c, _) => format!("{c}c"),
            Released::Lost(c, n) => format!("{c}lost{n}"),
            Released::Late(c) => format!("{}late", c.correlation),
        })
        .collect()
}

#[test]
fn reorders_arrivals() {
    let mut s = Sequencer::new();
    let mut got = Vec::new();
    for c in [2, 3, 1] {
        s.entered(call(c, Api::HipEventRecord, true), &mut |r| got.push(r));
    }
    assert_eq!(names(&got), ["1", "2", "3"]);
    assert_eq!(s.pending(), 0);
}

#[test]
fn a_blocked_synchronize_is_passed_over_and_completed_later() {
    let mut s = Sequencer::new();
    let mut got = Vec::new();
    s.entered(call(1, Api::HipDeviceSynchronize, false), &mut |r| {
        got.push(r)
    });
    s.entered(call(2, Api::HipEventRecord, true), &mut |r| got.push(r));
    assert!(got.is_empty(), "held until a tick finds it still in flight");
    s.tick(&mut |r| got.push(r));
    assert!(s.returned(1, exit(1), &mut |r| got.push(r)));
    assert_eq!(names(&got), ["1d", "2", "1c"]);
}

#[test]
fn an_in_flight_record_holds_the_order() {
    let mut s = Sequencer::new();
    let mut got = Vec::new();
    s.entered(call(1, Api::HipEventRecord, false), &mut |r| got.push(r));
    s.entered(call(2, Api::HipStreamWaitEvent, true), &mut |r| got.push(r));
    s.tick(&mut |r| got.push(r));
    s.tick(&mut |r| got.push(r));
    assert!(got.is_empty(), "{:?}", names(&got));
    assert!(s.returned(1, exit(1), &mut |r| got.push(r)));
    assert_eq!(names(&got), ["1", "2"]);
}

#[test]
fn a_lost_exit_releases_a_state_changing_call() {
    let mut s = Sequencer::new();
    let mut got = Vec::new();
    s.entered(call(1, Api::HipEventRecord, false), &mut |r| got.push(r));
    s.entered(call(2, Api::HipStreamWaitEvent, true), &mut |r| got.push(r));
    s.exit_lost(1, &mut |r| got.push(r));
    assert_eq!(names(&got), ["1", "2"]);
    let Released::Call(c) = &got[0] else { panic!() };
    assert_eq!((c.exit_ns, c.ret), (None, None));
}

#[test]
fn an_id_missing_at_two_ticks_is_lost_and_a_late_arrival_is_late() {
    let mut s = Sequencer::new();
    let mut got = Vec::new();
    s.entered(call(2, Api::HipEventRecord, true), &mut |r| got.push(r));
    s.tick(&mut |r| got.push(r));
    assert!(got.is_empty(), "one tick is not enough: {:?}", names(&got));
    s.tick(&mut |r| got.push(r));
    s.entered(call(1, Api::HipEventRecord, true), &mut |r| got.push(r));
    assert_eq!(names(&got), ["1lost1", "2", "1late"]);
}

#[test]
fn finish_flushes_everything_in_order() {
    let mut s = Sequencer::new();
    let mut got = Vec::new();
    s.entered(call(3, Api::HipEventRecord, true), &mut |r| got.push(r));
    s.entered(call(2, Api::HipDeviceSynchronize, false), &mut |r| {
        got.push(r)
    });
    s.finish(&mut |r| got.push(r));
    assert_eq!(names(&got), ["1lost1", "2d", "3"]);
}

#[test]
fn ids_assigned_after_the_last_seen_are_lost_at_the_end() {
    let mut s = Sequencer::new();
    let mut out = Vec::new();
    s.entered(call(1, Api::HipStreamSynchronize, true), &mut |r| {
        out.push(r)
    });
    s.entered(call(3, Api::HipStreamSynchronize, true), &mut |r| {
        out.push(r)
    });
    // The probes went on to 6; 4, 5 and 6 never arrived (their records were dropped).
    s.assigned_up_to(6);
    s.finish(&mut |r| out.push(r));
    let lost: Vec<(u64, u64)> = out
        .iter()
        .filter_map(|r| match r {
            Released::Lost(first, n) => Some((*first, *n)),
            _ => None,
        })
        .collect();
    assert_eq!(lost, vec![(2, 1), (4, 3)]);
}

#[test]
fn other_processes_ids_are_skipped_not_lost() {
    let mut s = Sequencer::starting_at(10);
    let mut got = Vec::new();
    s.skip(10, &mut |r| got.push(r));
    s.entered(call(12, Api::HipEventRecord, true), &mut |r| got.push(r));
    s.skip(11, &mut |r| got.push(r));
    s.skip(13, &mut |r| got.push(r));
    s.tick(&mut |r| got.push(r));
    s.tick(&mut |r| got.push(r));
    s.finish(&mut |r| got.push(r));
    assert_eq!(names(&got), ["12"]);
}

#[test]
fn a_gap_among_skipped_ids_is_still_lost() {
    let mut s = Sequencer::starting_at(5);
    let mut got = Vec::new();
    s.entered(call(5, Api::HipEventRecord, true), &mut |r| got.push(r));
    s.skip(7, &mut |r| got.push(r));
    s.entered(call(8, Api::HipStreamWaitEvent, true), &mut |r| got.push(r));
    s.tick(&mut |r| got.push(r));
    assert_eq!(names(&got), ["5"], "6 is missing: suspect at one tick");
    s.tick(&mut |r| got.push(r));
    assert_eq!(names(&got), ["5", "6lost1", "8"]);
}

#[test]
fn ids_before_the_start_are_not_lost() {
    let mut s = Sequencer::starting_at(100);
    let mut got = Vec::new();
    s.entered(call(101, Api::HipEventRecord, true), &mut |r| got.push(r));
    s.skip(100, &mut |r| got.push(r));
    s.skip(99, &mut |r| got.push(r));
    s.finish(&mut |r| got.push(r));
    assert_eq!(names(&got), ["101"]);
}

#[test]
fn giving_up_the_head_loses_the_missing_id_and_releases_the_rest() {
    let mut s = Sequencer::new();
    let mut got = Vec::new();
    for c in [3, 4] {
        s.entered(call(c, Api::HipEventRecord, true), &mut |r| got.push(r));
    }
    assert!(got.is_empty(), "waiting for 1 and 2");
    s.give_up_head(&mut |r| got.push(r));
    assert_eq!(names(&got), ["1lost2", "3", "4"]);
    assert_eq!(s.pending(), 0);
    // Arriving after all, they are late.
    s.entered(call(1, Api::HipEventRecord, true), &mut |r| got.push(r));
    assert_eq!(names(&got[3..]), ["1late"]);
}

#[test]
fn every_gap_known_at_a_tick_is_lost_at_the_next() {
    let mut s = Sequencer::new();
    let mut got = Vec::new();
    // An overflowing ring: gaps at 1, 3-4, 7, each with calls behind it.
    for c in [2, 5, 6, 8] {
        s.entered(call(c, Api::HipEventRecord, true), &mut |r| got.push(r));
    }
    s.tick(&mut |r| got.push(r));
    assert!(got.is_empty(), "one tick is not enough: {:?}", names(&got));
    // Arrived between the ticks, beyond what was known: not yet lost.
    s.entered(call(10, Api::HipEventRecord, true), &mut |r| got.push(r));
    s.tick(&mut |r| got.push(r));
    assert_eq!(
        names(&got),
        ["1lost1", "2", "3lost2", "5", "6", "7lost1", "8"]
    );
    assert_eq!(s.pending(), 1);
    s.tick(&mut |r| got.push(r));
    assert_eq!(names(&got[7..]), ["9lost1", "10"]);
}

#[test]
fn calls_waiting_are_bounded() {
    let mut s = Sequencer::new();
    let mut got = 0;
    // Id 1 never comes: without a tick, the calls behind it are held up to the bound.
    for c in 2..(MAX_PENDING as u64 + 10) {
        s.entered(call(c, Api::HipEventRecord, true), &mut |_| got += 1);
    }
    assert!(s.pending() <= MAX_PENDING);
    assert!(got >= 9, "the head was never given up");
}
