//! The job report against ranks written out by hand.
use super::*;
use crate::report::fields::Scalar;

fn seen(id: Option<&str>, rank: u64, calls: &[(u64, &str)]) -> Seen {
    Seen {
        id: id.map(String::from),
        rank: Some(rank),
        nranks: Some(2),
        calls: (calls.iter())
            .map(|(s, w)| {
                let (what, size) = (std::rc::Rc::from(*w), Scalar::Absent);
                (*s, Sig { what, size })
            })
            .collect(),
    }
}

fn trace(pid: u64, s: Seen, said: Option<Said>) -> Ranks {
    let mut r = Ranks::default();
    r.comms.insert((pid, "0x10".into()), s);
    r.said.extend(said);
    r
}

#[test]
fn the_rank_at_an_older_collective_is_the_laggard_and_the_others_wait_in_theirs() {
    let blocked = Said {
        pid: 1,
        seq: 3,
        id: Some("0xabc".into()),
        how: "blocked",
        api: Some("ncclAllReduce".into()),
    };
    let a = trace(1, seen(Some("0xabc"), 0, &[(4, "x")]), Some(blocked));
    let b = trace(2, seen(Some("0xabc"), 1, &[(1, "x"), (2, "x")]), None);
    let job = job(vec![("a.json".into(), a), ("b.json".into(), b)]);
    assert_eq!(job.communicators.len(), 1);
    assert_eq!(
        job.communicators[0].laggard.as_deref(),
        Some(
            "laggard: rank 1 (pid 2, b.json) at #2 of comm 0xabc; \
             rank 0 (pid 1, a.json) waits in ncclAllReduce #3"
        )
    );
    let text = render(&job);
    assert!(text.contains("communicator 0xabc:"), "{text}");
}

#[test]
fn ranks_without_an_id_align_by_their_collectives_or_are_said_not_to() {
    // Rank 0 knows its communicator from #1; rank 1 was attached after #3: its #1 is
    // the communicator's #4 (the only shift where the signatures agree).
    let sigs = [(1, "a"), (2, "b"), (3, "c"), (4, "d"), (5, "e"), (6, "f")];
    let a = trace(1, seen(Some("0xabc"), 0, &sigs), None);
    let b = trace(2, seen(None, 1, &[(1, "d"), (2, "e")]), None);
    let job1 = job(vec![("a.json".into(), a), ("b.json".into(), b)]);
    let c = &job1.communicators[0];
    assert_eq!(c.ranks.len(), 2, "{job1:?}");
    let r1 = c.ranks.iter().find(|r| r.pid == 2).unwrap();
    assert_eq!(r1.at, 5);
    assert!(
        c.laggard
            .as_deref()
            .unwrap()
            .starts_with("laggard: rank 1 (pid 2, b.json) at #5")
    );
    // The same collective every step: any shift fits, so none is chosen.
    let same = [(1, "x"), (2, "x"), (3, "x"), (4, "x")];
    let a = trace(1, seen(Some("0xabc"), 0, &same), None);
    let b = trace(2, seen(None, 1, &[(1, "x"), (2, "x")]), None);
    let job2 = job(vec![("a.json".into(), a), ("b.json".into(), b)]);
    assert_eq!(job2.communicators.len(), 2);
    assert!(
        job2.notes[0].contains("cannot align pid 2"),
        "{:?}",
        job2.notes
    );
    assert_eq!(job2.communicators[1].comm, "unaligned-1");
}

#[test]
fn a_huge_number_costs_no_walk_and_names_are_escaped() {
    // A rank numbered near 2^62 beside one from 1: aligned by its signature alone, at
    // once (the candidates are the reference's calls of its first call's signature).
    let a = trace(
        1,
        seen(Some("0xabc"), 0, &[(1, "a"), (2, "b"), (3, "c")]),
        None,
    );
    let b = trace(
        2,
        seen(None, 1, &[(1 << 62, "q"), ((1 << 62) + 1, "r")]),
        None,
    );
    let started = std::time::Instant::now();
    let j = job(vec![("a.json".into(), a), ("b.json".into(), b)]);
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
    assert_eq!(j.communicators.len(), 2);
    assert_eq!(
        shown("b\nlaggard: x\u{1b}[2J.json"),
        "b\\nlaggard: x\\u{1b}[2J.json"
    );
}
