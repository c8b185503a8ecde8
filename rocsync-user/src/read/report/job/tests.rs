//! The job report against ranks written out by hand.
use super::*;
use crate::read::report::{
    job::{ranks::Sig, text::render, verdict::Verdict},
    load::fields::Scalar,
};

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

fn blocked(pid: u64, seq: u64) -> Said {
    Said {
        pid,
        seq,
        id: Some("0xabc".into()),
        how: "blocked",
        api: Some("ncclAllReduce".into()),
        rank: None,
        nranks: None,
    }
}

#[test]
fn the_rank_at_an_older_collective_is_behind_and_the_others_wait_in_theirs() {
    let a = trace(1, seen(Some("0xabc"), 0, &[(4, "x")]), Some(blocked(1, 3)));
    let b = trace(2, seen(Some("0xabc"), 1, &[(1, "x"), (2, "x")]), None);
    let job = job(vec![("node-a/a.json".into(), a), ("b.json".into(), b)]);
    assert_eq!(job.communicators.len(), 1);
    let c = &job.communicators[0];
    let Verdict::RankBehind { seq, behind } = &c.verdict else {
        panic!("{:?}", c.verdict)
    };
    assert_eq!(
        (*seq, behind.len(), behind[0].pid, behind[0].at),
        (3, 1, 2, 2)
    );
    let f = c.collective.as_ref().unwrap();
    assert_eq!(f.blocked_ranks[0].host.as_deref(), Some("node-a"));
    let text = render(&job);
    assert!(
        text.contains(
            "verdict: comm 0xabc: a rank behind: rank 1 (pid 2) at #2; \
             the others are in ncclAllReduce #3"
        ),
        "{text}"
    );
    assert!(
        text.contains("blocked in it: rank 0 (pid 1 on node-a)"),
        "{text}"
    );
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
    assert!(matches!(&c.verdict, Verdict::RankBehind { seq: 6, behind } if behind[0].pid == 2));
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
    assert_eq!(job2.communicators[1].unaligned, Some(1));
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
    let j = job(vec![("a.json".into(), a), ("b.json".into(), b)]);
    assert_eq!(j.communicators.len(), 2);
    assert_eq!(
        shown("b\nlaggard: x\u{1b}[2J.json"),
        "b\\nlaggard: x\\u{1b}[2J.json"
    );
}

/// Ranks without an id, each of a signature of its own, are compared only with the
/// groups holding their first collective's: none here, so none is tried at all (it
/// was every group, for every rank: 50 000 ranks took a minute).
#[test]
fn ranks_without_an_id_are_compared_only_with_groups_sharing_their_signature() {
    let traces: Vec<(String, Ranks)> = (0..3000u64)
        .map(|i| {
            let (x, y) = (format!("x{i}"), format!("y{i}"));
            let s = seen(None, 0, &[(1, &x), (2, &y)]);
            (format!("{i}.json"), trace(i, s, None))
        })
        .collect();
    let known = BTreeMap::new();
    let mut groups = Groups::new(&known);
    let mut unaligned = Vec::new();
    for (_, t) in &traces {
        let seen = t.comms.values().next().unwrap();
        let r = rank_of("f", 1, seen, None, t);
        let (fits, all) = groups.fits(&r, &known, &unaligned);
        assert!(fits.is_empty() && all);
        groups.joined(Target::Unaligned(unaligned.len()), &r, &[]);
        unaligned.push(vec![r]);
    }
    assert!(
        groups
            .by_sig
            .values()
            .all(|(v, more)| v.len() == 1 && !more)
    );
    let j = job(traces);
    assert_eq!(j.communicators_count, 3000);
}

#[test]
fn every_rank_blocked_in_the_same_collective_is_none_completed_and_a_missing_rank_no_verdict() {
    let x = "ncclAllReduce \"Float\"";
    let a = trace(1, seen(Some("0xabc"), 0, &[(3, x)]), Some(blocked(1, 3)));
    let b = trace(2, seen(Some("0xabc"), 1, &[(3, x)]), Some(blocked(2, 3)));
    let both = job(vec![("a.json".into(), a), ("b.json".into(), b)]);
    let c = &both.communicators[0];
    assert!(
        matches!(c.verdict, Verdict::NoneCompleted { seq: 3 }),
        "{:?}",
        c.verdict
    );
    assert!(render(&both).contains("all ranks launched ncclAllReduce #3 and none completed"));
    let a = trace(1, seen(Some("0xabc"), 0, &[(3, x)]), Some(blocked(1, 3)));
    let alone = job(vec![
        ("a.json".into(), a),
        ("c.json".into(), Ranks::default()),
    ]);
    let c = &alone.communicators[0];
    let Verdict::NotEnoughTraces {
        missing_ranks,
        traces_without_collectives,
    } = &c.verdict
    else {
        panic!("{:?}", c.verdict)
    };
    assert_eq!(
        (missing_ranks.as_slice(), c.missing_ranks_count),
        (&[1][..], 1)
    );
    assert_eq!(traces_without_collectives, &["c.json"]);
    let text = render(&alone);
    assert!(
        text.contains("not enough traces: rank 1 absent (no trace holds them); 1 trace holds no collective (c.json)"),
        "{text}"
    );
}

#[test]
fn different_operations_at_one_number_are_mismatched() {
    let a = trace(
        1,
        seen(
            Some("0xabc"),
            0,
            &[(1, "ncclAllReduce"), (2, "ncclAllReduce")],
        ),
        None,
    );
    let b = trace(
        2,
        seen(
            Some("0xabc"),
            1,
            &[(1, "ncclAllReduce"), (2, "ncclBroadcast")],
        ),
        None,
    );
    let j = job(vec![("a.json".into(), a), ("b.json".into(), b)]);
    let Verdict::MismatchedCollectives { seq, ranks } = &j.communicators[0].verdict else {
        panic!("{:?}", j.communicators[0].verdict)
    };
    assert_eq!(*seq, 2);
    let ops: Vec<&str> = ranks.iter().map(|r| r.op.as_str()).collect();
    assert_eq!(ops, ["ncclAllReduce", "ncclBroadcast"]);
}
