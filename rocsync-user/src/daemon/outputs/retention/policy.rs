//! Which traces retention removes. Age is each trace's own: older than the limit, gone
//! (unless waiting for its upload). Size is shared between users: the bound is split
//! evenly between the users with traces in the state directory (a trace is its traced
//! process's user's), and only a user over that share loses traces, the one most over it
//! first, its oldest first (uploaded ones before waiting ones). A user within their share
//! never loses a trace to another's flood: one node-wide "oldest first" had `nobody`'s
//! floods of hang traces remove root's. A waiting trace removed is lost, and said so.

use std::{
    cmp::Reverse,
    collections::{BTreeMap, VecDeque},
    path::{Path, PathBuf},
    time::{Duration, SystemTime},
};

/// A trace file in the state directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Entry {
    pub path: PathBuf,
    /// What it takes on disk.
    pub size: u64,
    pub modified: SystemTime,
    /// Waiting for its upload.
    pub waiting: bool,
    /// The uid of the process it traced; `None`: not known (written before owners were
    /// recorded, or by hand), all such counted as one user.
    pub owner: Option<u32>,
}

/// A trace to remove, whether it was still waiting for its upload, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Removal {
    pub path: PathBuf,
    pub waiting: bool,
    pub why: Why,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Why {
    /// Older than `max_age`; whose it was (its removal said in its user's lines).
    Age { owner: Option<u32> },
    /// Its user held `bytes` (this one included) over `share`, the bound split between
    /// `users` users.
    Share {
        owner: Option<u32>,
        bytes: u64,
        share: u64,
        users: usize,
    },
}

/// One user's traces that may go, oldest first, and all the bytes they hold.
#[derive(Default)]
struct User {
    bytes: u64,
    uploaded: VecDeque<Entry>,
    waiting: VecDeque<Entry>,
}

impl User {
    /// Its next trace to go: the oldest uploaded one, else the oldest waiting one.
    fn next(&self) -> Option<&Entry> {
        self.uploaded.front().or(self.waiting.front())
    }

    fn pop(&mut self) -> Option<Entry> {
        let f = self
            .uploaded
            .pop_front()
            .or_else(|| self.waiting.pop_front())?;
        self.bytes -= f.size;
        Some(f)
    }
}

/// Which of `files` to remove at `now` within `max_bytes` and `max_age`, sparing `keep`
/// (the trace just written, every file of it: it still counts towards its user's bytes).
/// Where the user most over their share has only the trace just written left, the total
/// stays over the bound until the next pass: no other user loses a trace for it.
pub(super) fn expired(
    (max_bytes, max_age): (Option<u64>, Option<Duration>),
    mut files: Vec<Entry>,
    now: SystemTime,
    keep: &[&Path],
) -> Vec<Removal> {
    files.sort_by(|a, b| (a.modified, &a.path).cmp(&(b.modified, &b.path)));
    let kept = |f: &Entry| keep.contains(&f.path.as_path());
    let old = |f: &Entry| {
        !f.waiting
            && max_age.is_some_and(|a| now.duration_since(f.modified).unwrap_or_default() > a)
    };
    let (old, files): (Vec<Entry>, Vec<Entry>) =
        files.into_iter().partition(|f| !kept(f) && old(f));
    let mut gone: Vec<Removal> = (old.into_iter())
        .map(|f| Removal {
            path: f.path,
            waiting: false,
            why: Why::Age { owner: f.owner },
        })
        .collect();
    let Some(max) = max_bytes else {
        return gone;
    };
    let mut users: BTreeMap<Option<u32>, User> = BTreeMap::new();
    let mut total = 0;
    for f in files {
        let user = users.entry(f.owner).or_default();
        user.bytes += f.size;
        total += f.size;
        if kept(&f) {
            continue;
        }
        match f.waiting {
            true => user.waiting.push_back(f),
            false => user.uploaded.push_back(f),
        }
    }
    let share = max / users.len().max(1) as u64;
    while total > max {
        // The user most over their share (of two holding as much, the one with a trace that
        // may go, then the oldest such trace). Where that user has only the trace just
        // written left, the pass ends: another user's traces never make room for it.
        let most = (users.iter())
            .filter(|(_, u)| u.bytes > share)
            .max_by_key(|(owner, u)| {
                let next = u.next().map(|f| Reverse(f.modified));
                (u.bytes, next.is_some(), next, Reverse(**owner))
            })
            .map(|(owner, u)| (*owner, u.bytes));
        let Some((owner, bytes)) = most else {
            break;
        };
        let Some(f) = users.get_mut(&owner).and_then(User::pop) else {
            break;
        };
        total -= f.size;
        gone.push(Removal {
            path: f.path,
            waiting: f.waiting,
            why: Why::Share {
                owner,
                bytes,
                share,
                users: users.len(),
            },
        });
    }
    gone
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Duration = Duration::from_secs(1_000_000);

    /// A trace `name` of `size` bytes, `age_s` old, of `owner`'s, maybe waiting.
    fn f(name: &str, size: u64, age_s: u64, waiting: bool, owner: Option<u32>) -> Entry {
        Entry {
            path: PathBuf::from(name),
            size,
            modified: SystemTime::UNIX_EPOCH + T0 - Duration::from_secs(age_s),
            waiting,
            owner,
        }
    }

    fn run(max: (Option<u64>, Option<Duration>), files: &[Entry], keep: &[&str]) -> Vec<Removal> {
        let keep: Vec<&Path> = keep.iter().map(Path::new).collect();
        expired(max, files.to_vec(), SystemTime::UNIX_EPOCH + T0, &keep)
    }

    /// (name, waiting) of each removal, in order.
    fn gone(removals: Vec<Removal>) -> Vec<(String, bool)> {
        (removals.into_iter())
            .map(|r| (r.path.display().to_string(), r.waiting))
            .collect()
    }

    #[test]
    fn oldest_first_within_size_and_age_and_never_the_newest() {
        let files = [10, 10, 10, 10].iter().zip(["a", "b", "c", "d"]);
        let files: Vec<Entry> = (files.zip([300, 200, 100, 0]))
            .map(|((&size, n), age)| f(n, size, age, false, None))
            .collect();
        let names = |r: Vec<Removal>| gone(r).into_iter().map(|g| g.0).collect::<Vec<_>>();
        assert_eq!(names(run((Some(25), None), &files, &["d"])), ["a", "b"]);
        let age = Some(Duration::from_secs(150));
        assert_eq!(names(run((None, age), &files, &["d"])), ["a", "b"]);
        assert_eq!(
            run((Some(1), None), &files, &["d"]).len(),
            3,
            "the newest stays"
        );
    }

    #[test]
    fn a_trace_waiting_for_its_upload_goes_last_and_never_for_age() {
        let files = [
            f("a", 10, 300, true, None),
            f("b", 10, 200, false, None),
            f("c", 10, 100, false, None),
            f("d", 10, 0, false, None),
        ];
        // b and c by age (a is spared by age); then 20 bytes left: within the size.
        let both = (Some(25), Some(Duration::from_secs(50)));
        let expected = [("b".into(), false), ("c".into(), false)];
        assert_eq!(gone(run(both, &files, &["d"])), expected);
        let tight = run((Some(15), None), &files, &["d"]);
        let expected = [("b".into(), false), ("c".into(), false), ("a".into(), true)];
        assert_eq!(
            gone(tight),
            expected,
            "the waiting one last, counted as such"
        );
    }

    #[test]
    fn every_file_of_the_trace_just_written_stays() {
        // One trace of three processes, its files written over a second, and an old one.
        let files = [300, 2, 1, 0].iter().zip(["old", "p1", "p2", "p3"]);
        let files: Vec<Entry> = files.map(|(&age, n)| f(n, 10, age, false, None)).collect();
        let tiny = (Some(1), Some(Duration::from_secs(1)));
        let expected = [("old".to_string(), false)];
        assert_eq!(gone(run(tiny, &files, &["p1", "p2", "p3"])), expected);
    }

    /// The case: `nobody`'s floods of hang traces made node-wide "oldest first"
    /// remove root's single, older, hang trace.
    #[test]
    fn a_flood_of_one_users_traces_never_removes_anothers_within_their_share() {
        let (root, nobody) = (Some(0), Some(65534));
        let mut files = vec![f("root-hang", 300, 10_000, false, root)];
        files.extend((0..50).map(|i| f(&format!("flood-{i:02}"), 100, 5_000 - i, false, nobody)));
        let newest = "flood-49";
        let removed = run((Some(1000), None), &files, &[newest]);
        assert!(
            removed.iter().all(|r| r.path != Path::new("root-hang")),
            "{removed:?}"
        );
        // nobody's oldest first, until the total fits: 300 + 7 × 100 left.
        let names: Vec<String> = gone(removed.clone()).into_iter().map(|g| g.0).collect();
        let expected: Vec<String> = (0..43).map(|i| format!("flood-{i:02}")).collect();
        assert_eq!(names, expected);
        assert_eq!(
            removed[0].why,
            Why::Share {
                owner: nobody,
                bytes: 5000,
                share: 500,
                users: 2
            }
        );
        // Nor when root's trace is over the share but nobody is further over it with
        // only the trace just written: the total stays over the bound until the next.
        let files = [
            f("root-hang", 700, 10, false, root),
            f(newest, 900, 0, false, nobody),
        ];
        assert_eq!(run((Some(1000), None), &files, &[newest]), []);
    }

    #[test]
    fn the_oldest_of_the_user_most_over_their_share_goes_first() {
        let (a, b, c) = (Some(1), Some(2), Some(3));
        let files = [
            f("c-old", 10, 900, false, c), // within its share: never removed
            f("a-1", 40, 500, false, a),
            f("b-1", 20, 800, false, b),
            f("a-2", 40, 400, false, a),
            f("b-2", 20, 300, false, b),
            f("a-3", 40, 100, false, a),
        ];
        // 170 bytes, bound 90: a share of 30 each. a (120) goes first, its oldest
        // first, until b (40) is the most over it; then b's oldest.
        let removed = run((Some(90), None), &files, &[]);
        let names: Vec<String> = gone(removed).into_iter().map(|g| g.0).collect();
        assert_eq!(names, ["a-1", "a-2"]);
        let removed = run((Some(60), None), &files, &[]);
        let names: Vec<String> = gone(removed).into_iter().map(|g| g.0).collect();
        assert_eq!(names, ["a-1", "a-2", "b-1", "a-3"]);
    }

    /// A removal before upload stays a loss (counted by the caller), whoever's share it
    /// was; a user's uploaded traces go before their waiting ones.
    #[test]
    fn a_waiting_trace_of_a_user_over_their_share_is_removed_last_and_said_lost() {
        let (root, nobody) = (Some(0), Some(65534));
        let files = [
            f("root", 10, 900, true, root),
            f("nobody-waiting", 30, 800, true, nobody),
            f("nobody-uploaded", 30, 100, false, nobody),
            f("nobody-new", 30, 0, true, nobody),
        ];
        let removed = gone(run((Some(40), None), &files, &["nobody-new"]));
        let expected = [
            ("nobody-uploaded".to_string(), false),
            ("nobody-waiting".to_string(), true),
        ];
        assert_eq!(removed, expected);
    }

    #[test]
    fn traces_of_no_known_user_share_as_one_user() {
        let files = [
            f("root", 50, 900, false, Some(0)),
            f("unknown-1", 50, 800, false, None),
            f("unknown-2", 50, 700, false, None),
        ];
        let removed = gone(run((Some(100), None), &files, &[]));
        assert_eq!(removed, [("unknown-1".to_string(), false)]);
    }
}
