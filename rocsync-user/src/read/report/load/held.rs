//! What the report holds, bounded in bytes: its rows, and the names they share (each held
//! once, however many rows have it). A trace's rows are bounded by what they cost, not by
//! how many they are (100 000 rows of 20 KB names took 6 GB when each kept its own).

use std::{collections::HashSet, rc::Rc};

use crate::read::input::bytes;

/// Distinct names held (APIs, sync kinds, reasons; collectives' names and types): a trace
/// rocsync wrote has a few dozen.
pub(in crate::read::report) const MAX_NAMES: usize = 4096;

/// What a held name costs besides its bytes: its slot in the set, the `Rc` header.
const NAME_COST: usize = 64;

pub(in crate::read::report) struct Held {
    max: u64,
    used: u64,
    names: HashSet<Rc<str>>,
}

/// Why a row was not kept: its words in the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(in crate::read::report) enum Refused {
    Budget,
    Names,
}

impl Held {
    pub(in crate::read::report) fn new(max: u64) -> Self {
        Held {
            max,
            used: 0,
            names: HashSet::new(),
        }
    }

    /// Takes `bytes` of the budget; past it, nothing is taken.
    pub(in crate::read::report) fn take(&mut self, bytes: usize) -> Result<(), Refused> {
        let after = self.used + bytes as u64;
        if after > self.max {
            return Err(Refused::Budget);
        }
        self.used = after;
        Ok(())
    }

    /// `name`, held once for every row that has it.
    pub(in crate::read::report) fn name(&mut self, name: &str) -> Result<Rc<str>, Refused> {
        match self.names.get(name) {
            Some(n) => Ok(n.clone()),
            None if self.names.len() >= MAX_NAMES => Err(Refused::Names),
            None => {
                self.take(name.len() + NAME_COST)?;
                let n: Rc<str> = name.into();
                self.names.insert(n.clone());
                Ok(n)
            }
        }
    }

    /// The reason counted for a row refused, as the report says it.
    pub(in crate::read::report) fn why(&self, r: Refused, rows: &str) -> String {
        match r {
            Refused::Budget => {
                format!("{rows} past the report's bound of {} held", bytes(self.max))
            }
            Refused::Names => {
                format!("{rows} past the report's bound of {MAX_NAMES} distinct names")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_held_once_and_everything_within_the_budget() {
        let mut h = Held::new(200);
        let a = h.name("hipEventRecord").unwrap();
        let b = h.name("hipEventRecord").unwrap();
        assert!(Rc::ptr_eq(&a, &b), "one copy");
        assert_eq!(h.used, (14 + NAME_COST) as u64);
        assert_eq!(h.take(200), Err(Refused::Budget));
        assert_eq!(h.used, (14 + NAME_COST) as u64, "nothing taken past it");
        assert_eq!(h.name(&"x".repeat(100)), Err(Refused::Budget));
        assert_eq!(
            h.why(Refused::Budget, "rows"),
            "rows past the report's bound of 200 bytes held"
        );
    }
}
