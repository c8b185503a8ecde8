//! A call written without its return is always said: where its thread went on (later
//! calls of it returned) its return was lost, and is counted `unpaired_entries`, whether
//! the call was held in order or released in flight at a tick ("deferred"); a call still
//! in flight at the end says it never returned; a return that completes no call is
//! counted `unpaired_exits`. No kernel.

use crate::common::pipeline::{Rows, both, entry, exit};
use rocsync::calls::{emit::raw::Reader, pipeline::Pipeline};
use rocsync_common::Api;

const E: u64 = 0x5000;
const S: u64 = 0xa000;

#[test]
fn a_deferred_call_whose_thread_went_on_without_its_return_is_a_lost_exit() {
    let mut p = Pipeline::new(Rows::default(), true);
    p.entry(&entry(1, 9, Api::HipEventRecord, [E, S, 0]));
    p.exit(&exit(9, Api::HipEventRecord, 1_500, 0));
    // The synchronize is in flight at a tick: released in flight ("deferred").
    p.entry(&entry(2, 9, Api::HipEventSynchronize, [E, 0, 0]));
    p.tick();
    // Its exit record never reaches the pipeline; the thread goes on.
    for corr in 3..63 {
        both(&mut p, corr, 9, Api::HipStreamSynchronize, [S, 0, 0]);
    }
    // Thread 8's synchronize is in flight at the end: no loss, said per API.
    p.entry(&entry(63, 8, Api::HipDeviceSynchronize, [0; 3]));
    p.tick();
    p.stopping();
    let (Rows(rows), stats) = p.finish().unwrap();
    assert_eq!((stats.unpaired_entries, stats.unpaired_exits), (1, 0));
    let sync = rows.iter().find(|r| r.call.correlation == 2).unwrap();
    assert_eq!((sync.call.exit_ns, sync.call.ret), (None, None));
    let n = |api: &str| stats.per_api[api].no_return;
    assert_eq!(
        (n("hipEventSynchronize"), n("hipDeviceSynchronize")),
        (1, 1)
    );
    assert_eq!(stats.calls(), 63);
}

#[test]
fn a_state_changing_call_whose_thread_went_on_without_its_return_is_a_lost_exit() {
    // Held in order (a record changes state), not deferred: the calls after it wait
    // until the end, and then are all written.
    let mut p = Pipeline::new(Rows::default(), true);
    p.entry(&entry(1, 9, Api::HipEventRecord, [E, S, 0]));
    p.tick();
    both(&mut p, 2, 9, Api::HipStreamSynchronize, [S, 0, 0]);
    p.tick();
    let (Rows(rows), stats) = p.finish().unwrap();
    assert_eq!((stats.unpaired_entries, stats.unpaired_exits), (1, 0));
    assert_eq!(rows.len(), 2);
}

#[test]
fn a_return_that_completes_no_call_is_counted() {
    // A raw file (hand-made, or cut) whose completion names no call of it.
    let raw = concat!(
        r#"{"rocsync_raw":{"version":"0.1.0","clock_offset_ns":0,"command":["app"]}}"#,
        "\n",
        r#"{"completion":{"correlation":41,"exit_ns":9000,"ret":0}}"#,
        "\n",
    );
    let mut p = Pipeline::new(Rows::default(), true);
    let mut r = Reader::new(raw.as_bytes()).unwrap();
    while let Some(item) = r.next_item().unwrap() {
        p.replay(item);
    }
    let (Rows(rows), stats) = p.finish().unwrap();
    assert!(rows.is_empty());
    assert_eq!(stats.unpaired_exits, 1);
}
