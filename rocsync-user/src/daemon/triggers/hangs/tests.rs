use std::time::Duration;

use super::*;
use rocsync_common::PendingCall;

fn call(api: Api, ns: u64) -> PendingCall {
    PendingCall {
        api: api as u32,
        device: 0,
        ns,
        ..PendingCall::default()
    }
}

const S: u64 = 1_000_000_000;

#[test]
fn only_tracked_synchronisations_count_and_the_threshold_is_inclusive() {
    let now = 100 * S;
    let calls = [
        (1, 10, call(Api::HipStreamSynchronize, now - 3 * S)),
        // Younger than the threshold: its age shows, it is no hang.
        (1, 11, call(Api::HipStreamSynchronize, now - S / 2)),
        // Exactly the threshold: a hang.
        (2, 20, call(Api::HipDeviceSynchronize, now - 2 * S)),
        // A poll, a record, an untracked process, an unknown id: none counts.
        (1, 12, call(Api::HipEventQuery, now - 50 * S)),
        (1, 13, call(Api::HipEventRecord, now - 50 * S)),
        (3, 30, call(Api::HipStreamSynchronize, now - 50 * S)),
        (
            1,
            14,
            PendingCall {
                api: 9999,
                ..call(Api::HipStreamSynchronize, 0)
            },
        ),
        // Started after `now` was read (a later entry): age 0, not a wrap.
        (2, 21, call(Api::HipStreamWaitEvent, now + S)),
    ];
    let (oldest, blocked) = scan(&calls, |pid| pid != 3, now, Duration::from_secs(2));
    let oldest: Vec<(&str, f64)> = oldest.into_iter().collect();
    assert_eq!(
        oldest,
        [
            ("hipDeviceSynchronize", 2.0),
            ("hipStreamSynchronize", 3.0),
            ("hipStreamWaitEvent", 0.0)
        ]
    );
    assert_eq!(
        blocked,
        [
            (1, 10, Api::HipStreamSynchronize, now - 3 * S, 0),
            (2, 20, Api::HipDeviceSynchronize, now - 2 * S, 0)
        ]
    );
}

#[test]
fn a_hang_ends_when_its_call_is_gone_or_its_process_is() {
    let hang = |tid, entry_ns| Hang {
        trace: 0,
        tid,
        api: Api::HipStreamSynchronize,
        entry_ns,
        uid: 0,
        waits_on: None,
        location: None,
    };
    let open = HashMap::from([
        (1, hang(10, 5 * S)), // still blocked
        (2, hang(20, 5 * S)), // returned: nothing in flight on its thread
        (3, hang(30, 5 * S)), // returned, and its thread is in a later call
        (4, hang(40, 5 * S)), // killed while blocked: its entry stays in the map
    ]);
    let calls = [
        (1, 10, call(Api::HipStreamSynchronize, 5 * S)),
        // Another thread of pid 2 blocked since the same instant: not the hang's.
        (2, 21, call(Api::HipStreamSynchronize, 5 * S)),
        (3, 30, call(Api::HipStreamSynchronize, 9 * S)),
        (4, 40, call(Api::HipStreamSynchronize, 5 * S)),
    ];
    let mut ended = ended(&open, &calls, |pid| pid != 4);
    ended.sort();
    assert_eq!(ended, [(2, "returned"), (3, "returned"), (4, "exited")]);
    // A process gone is `exited` whether or not its call was seen to return.
    let gone = crate::daemon::triggers::hangs::ended(&open, &[], |_| false);
    assert!(gone.iter().all(|&(_, how)| how == "exited") && gone.len() == 4);
}

#[test]
fn hangs_have_their_own_limits_per_process_user_and_node() {
    let mut a = Admission::default();
    let t = Instant::now();
    let i = Duration::from_secs(60);
    let at = |secs| t + Duration::from_secs(secs);
    assert_eq!(a.admit((1, 100), t, i, &[]), Ok(()));
    // The same process within the interval: held, and admitted once it passed.
    assert_eq!(a.admit((1, 100), at(5), i, &[100]), Err(Untraced::Interval));
    assert_eq!(a.admit((1, 100), t + i, i, &[]), Ok(()));
    // A user with PER_USER recording waits; another user does not.
    let busy = [100; PER_USER];
    assert_eq!(a.admit((2, 100), at(1), i, &busy), Err(Untraced::UserLimit));
    assert_eq!(a.admit((3, 200), at(1), i, &busy), Ok(()));
    // The node's limit, whoever asks.
    let full: Vec<u32> = (0..PER_NODE as u32).collect();
    assert_eq!(a.admit((4, 999), at(1), i, &full), Err(Untraced::NodeLimit));
}
