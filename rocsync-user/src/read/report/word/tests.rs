//! The daemon's word read back: as the agreed schema writes it, and as a hostile trace
//! might (wrong types, a million frames).
use super::*;
use serde_json::json;

fn word(parameters: serde_json::Value) -> (Word, u64) {
    let p: Parameters = serde_json::from_value(parameters).unwrap();
    p.word().unwrap()
}

#[test]
fn a_hang_with_its_stacks_is_read_as_the_schema_writes_it() {
    let (w, cut) = word(json!({"hang": {
        "api": "hipStreamSynchronize", "pid": 123, "tid": 124,
        "blocked_ms_when_found": 6000.5, "ended": "bound",
        "waits_on": [{"stream": "0x2", "collective": {"api": "ncclAllReduce", "seq": 21,
            "comm": "0x9d", "rank": 0, "nranks": 2}}],
        "collective": {"api": "ncclAllReduce", "seq": 21, "comm": "0x9d", "rank": 0, "nranks": 2},
        "behind": [{"pid": 125, "rank": 1, "seq": 20, "comm": "0x9d"}],
        "where": "step (train.py:142)",
        "stacks": {"pid": 123, "read_at_unix_us": 1, "took_ms": 9.8, "python_version": "3.11.7",
            "error": null, "threads": [
                {"tid": 124, "name": "python3", "blocked": true,
                 "python_stack": [{"function": "step", "file": "/job/train.py", "line": 142},
                                  {"function": "<module>", "file": "/job/train.py", "line": 200}],
                 "python_error": null,
                 "native_stack": [{"address": "0x7f3a", "symbol": "clock_nanosleep",
                     "object": "/usr/lib/libc.so.6", "offset": "0x1234", "symbolized": true},
                     {"address": "0x7f3b", "symbol": null, "object": null, "offset": null,
                      "symbolized": false}],
                 "native_error": null}],
            "cut": {"threads": 0, "frames": 2, "strings": 0}}
    }}));
    assert_eq!(cut, 0);
    assert_eq!(
        (w.kind, w.pid, w.api.as_deref()),
        ("hang", Some(123), Some("hipStreamSynchronize"))
    );
    assert_eq!(
        w.waits_on[0].said(),
        "stream 0x2: ncclAllReduce #21 of comm 0x9d"
    );
    assert_eq!(w.waits_on[0].stream.as_deref(), Some("0x2"));
    assert_eq!(w.collective.as_ref().unwrap().seq, 21);
    assert_eq!(w.behind[0].rank, Some(1));
    assert_eq!(w.place.as_deref(), Some("step (train.py:142)"));
    let s = w.stacks.unwrap();
    assert_eq!(s.cut_frames, 2);
    let t = s.blocked().unwrap();
    let frames: Vec<&String> = t.frames().collect();
    assert_eq!(
        frames,
        [
            "step (train.py:142)",
            "<module> (train.py:200)",
            "clock_nanosleep (libc.so.6+0x1234)",
            "0x7f3b"
        ]
    );
}

#[test]
fn a_hostile_word_costs_its_bounds_and_is_never_an_error() {
    let frames: Vec<serde_json::Value> = (0..10_000)
        .map(|i| json!({"function": i, "file": ["x"], "line": "y"}))
        .collect();
    let (w, cut) = word(json!({"behind": {
        "pid": "not a pid", "seq": 4, "comm": 7, "where": {"a": 1},
        "stacks": {"threads": [{"tid": 1, "python_stack": frames, "native_stack": "no"}, 3]},
    }}));
    assert_eq!((w.kind, w.pid, w.place.as_deref()), ("behind", None, None));
    assert_eq!(w.collective.as_ref().map(|c| c.seq), Some(4));
    let t = &w.stacks.as_ref().unwrap().threads[0];
    assert_eq!(t.python_stack.as_ref().unwrap().len(), 128);
    assert_eq!(t.python_stack.as_ref().unwrap()[0], "? (?)");
    assert_eq!(t.native_stack, None);
    assert_eq!(cut, 10_000 - 128);
}
