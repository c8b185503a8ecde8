//! A runtime the daemon cannot open as it is mapped (here: larger than a runtime can be)
//! is never left unprobed without a word: refused as unusable, counted and said once,
//! however many looks and processes find it. The neighbour runs as `nobody`; needs root.

use super::hostile_files::{Neighbour, open_dir, sparse_and_real};
use crate::common::daemon::*;

#[test]
fn a_runtime_too_large_to_open_is_refused_counted_and_said_once() {
    let name = "a_runtime_too_large_to_open_is_refused_counted_and_said_once";
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    let program = open_dir(&dir);
    let (big, real) = sparse_and_real(&dir, "big", 2 << 30);
    let (daemon, mut lines) = start_daemon(&dir, &program, &[]);
    let addr = metrics_addr(&lines);
    let unusable = "rocsync_files_refused_total{reason=\"unusable\"}";

    let mut a = Neighbour::start(&program, &[&big]);
    a.load();
    lines.wait_for("more than a runtime library can be");
    assert_eq!(metric(&addr, unusable), 1.0);
    // More looks at it: a load in the same process, and a second process that maps it
    // beside a real copy (whose probing says the daemon has looked).
    a.load();
    let mut b = Neighbour::start(&program, &[&big, &real]);
    b.load();
    lines.wait_for(&format!("probing {}", real.display()));
    assert_eq!(metric(&addr, unusable), 1.0);
    let said: Vec<String> = (lines.drain().iter())
        .filter(|l| l.contains("big/libamdhip64.so"))
        .cloned()
        .collect();
    assert_eq!(said.len(), 1, "{said:#?}");
    assert!(said[0].contains("warning: pid "), "{}", said[0]);
    a.end();
    b.end();
    stop(daemon);
}
