//! A rank without a communicator id (its capture began after the set-up) aligned to a
//! communicator by the order and signatures (name, type, size) of its collectives: the
//! shifts that fit. Compared only with the groups holding its first collective's
//! signature, at most [`MAX_GROUPS_TRIED`] of them, so that a folder of thousands of
//! unaligned ranks stays linear (compared with every group, 50 000 took a minute).

use std::collections::{BTreeMap, HashMap};

use super::ranks::Sig;
use crate::read::report::job::rank::Rank;

/// Collectives two ranks must share to be aligned by their signatures.
const MIN_OVERLAP: usize = 2;
/// Shifts tried per communicator: each is a pass over the rank's collectives.
const MAX_CANDIDATES: usize = 4096;
/// Communicators a rank without an id is compared with (those holding its first
/// collective's signature): a folder of thousands of unaligned ranks stays linear.
pub(super) const MAX_GROUPS_TRIED: usize = 64;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Target {
    Known(String),
    Unaligned(usize),
}

/// The groups (communicators, unaligned ranks) by the signatures their reference ranks'
/// collectives have: a rank without an id is compared only with those holding its first
/// collective's.
pub(super) struct Groups {
    /// At most [`MAX_GROUPS_TRIED`] per signature, and whether more had it.
    pub by_sig: HashMap<(String, String), (Vec<Target>, bool)>,
    /// Each group's reference: the most collectives of any of its ranks.
    longest: HashMap<Target, usize>,
}

fn key(s: &Sig) -> (String, String) {
    (s.what.to_string(), s.size.json().unwrap_or_default())
}

impl Groups {
    pub(super) fn new(known: &BTreeMap<String, Vec<Rank>>) -> Self {
        let mut g = Groups {
            by_sig: HashMap::new(),
            longest: HashMap::new(),
        };
        for (id, ranks) in known {
            for r in ranks {
                g.joined(Target::Known(id.clone()), r, &[]);
            }
        }
        g
    }

    /// `r` joined `target` (of ranks `before`): its signatures are the group's when it
    /// is the group's longest.
    pub(super) fn joined(&mut self, target: Target, r: &Rank, before: &[Rank]) {
        let longest = self.longest.entry(target.clone()).or_default();
        if r.calls.len() <= *longest && !before.is_empty() {
            return;
        }
        *longest = (*longest).max(r.calls.len());
        let mut keys: Vec<(String, String)> = r.calls.iter().map(|(_, s)| key(s)).collect();
        keys.sort();
        keys.dedup();
        for k in keys {
            let (v, more) = self.by_sig.entry(k).or_default();
            if v.contains(&target) {
                continue;
            }
            match v.len() < MAX_GROUPS_TRIED {
                true => v.push(target.clone()),
                false => *more = true,
            }
        }
    }

    /// Every (group, shift) whose reference rank's collectives `r`'s match by signature,
    /// up to two (two are as ambiguous as more); and whether every candidate was tried.
    pub(super) fn fits(
        &self,
        r: &Rank,
        known: &BTreeMap<String, Vec<Rank>>,
        unaligned: &[Vec<Rank>],
    ) -> (Vec<(Target, i64)>, bool) {
        let mut out = Vec::new();
        let Some((first, sig)) = r.calls.first().filter(|_| r.calls.len() >= MIN_OVERLAP) else {
            return (out, true);
        };
        let (candidates, more) = match self.by_sig.get(&key(sig)) {
            Some((v, more)) => (v.as_slice(), *more),
            None => (&[][..], false),
        };
        for target in candidates {
            let group = match target {
                Target::Known(id) => &known[id],
                Target::Unaligned(i) => &unaligned[*i],
            };
            for d in shifts(r, (*first, sig), group) {
                out.push((target.clone(), d));
                if out.len() >= 2 {
                    return (out, true);
                }
            }
        }
        (out, !more)
    }
}

/// The shifts that map `r`'s collectives onto those of `group`'s reference rank, each
/// matching by signature, at least [`MIN_OVERLAP`] of them.
fn shifts(r: &Rank, (first, sig): (u64, &Sig), group: &[Rank]) -> Vec<i64> {
    let Some(reference) = group.iter().max_by_key(|g| g.calls.len()) else {
        return Vec::new();
    };
    let theirs: BTreeMap<u64, &Sig> = reference.calls.iter().map(|(s, w)| (*s, w)).collect();
    // A shift that fits maps the rank's first collective onto one of the same
    // signature: those are the only candidates (never a walk over the numbers).
    let candidates = (reference.calls.iter())
        .filter(|(_, w)| w == sig)
        .map(|(t, _)| *t as i64 - first as i64)
        .take(MAX_CANDIDATES);
    candidates
        .filter(|&d| {
            let overlap = r.calls.iter().filter_map(|(s, w)| {
                let t = *s as i64 + d;
                (t > 0).then(|| theirs.get(&(t as u64)).map(|tw| *tw == w))?
            });
            let (mut n, mut all) = (0, true);
            for same in overlap {
                n += 1;
                all &= same;
            }
            all && n >= MIN_OVERLAP
        })
        .take(2)
        .collect()
}

pub(super) fn shift_by(r: &mut Rank, d: i64) {
    let shifted = |s: u64| (s as i64 + d).max(0) as u64;
    r.at = shifted(r.at);
    for c in &mut r.calls {
        c.0 = shifted(c.0);
    }
}
