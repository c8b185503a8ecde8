//! The threads a capture's calls came from, each told once when first seen, so that its
//! name is read from the kernel while it lives (a thread that exits keeps it).

use rustc_hash::FxHashSet as HashSet;

/// Threads told at most: past it a thread is written `thread TID` (a capture of more
/// threads churns them; their names would only grow the trace's end).
pub(crate) const MAX_THREADS: usize = 1 << 16;

#[derive(Default)]
pub(crate) struct NewThreads {
    seen: HashSet<(u32, u32)>,
    fresh: Vec<(u32, u32)>,
}

impl NewThreads {
    /// A call entered on `(pid, tid)`.
    pub(crate) fn entered(&mut self, pid: u32, tid: u32) {
        if self.seen.len() < MAX_THREADS && self.seen.insert((pid, tid)) {
            self.fresh.push((pid, tid));
        }
    }

    /// The threads first seen since the last take, in the order seen.
    pub(crate) fn take(&mut self) -> Vec<(u32, u32)> {
        std::mem::take(&mut self.fresh)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_thread_is_told_once() {
        let mut t = NewThreads::default();
        t.entered(1, 1);
        t.entered(1, 2);
        t.entered(1, 1);
        assert_eq!(t.take(), [(1, 1), (1, 2)]);
        t.entered(1, 2);
        t.entered(2, 2);
        assert_eq!(t.take(), [(2, 2)]);
    }
}
