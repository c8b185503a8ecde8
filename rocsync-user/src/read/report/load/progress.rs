//! Progress of a long report on stderr (a 920 MB trace took 27 s in silence): on a
//! terminal from the first second, elsewhere (a log, a pipe) only once it has taken a few
//! seconds, so a short report, and a script reading stdout, see nothing of it.

use std::{
    io::{IsTerminal as _, Read},
    time::{Duration, Instant},
};

/// When the first line comes and how often the next ones, on a terminal and elsewhere.
const TERMINAL: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(2));
const ELSEWHERE: (Duration, Duration) = (Duration::from_secs(5), Duration::from_secs(5));

pub(in crate::read::report) struct Progress {
    what: &'static str,
    started: Instant,
    last: Option<Instant>,
    timing: (Duration, Duration),
    /// Files read so far (a folder's report).
    items: u64,
    said: bool,
}

impl Progress {
    pub(in crate::read::report) fn new(what: &'static str) -> Self {
        let tty = std::io::stderr().is_terminal();
        Progress {
            what,
            started: Instant::now(),
            last: None,
            timing: if tty { TERMINAL } else { ELSEWHERE },
            items: 0,
            said: false,
        }
    }

    /// Whether a line is due at `now`.
    fn due(&self, now: Instant) -> bool {
        let (first, every) = self.timing;
        match self.last {
            None => now.duration_since(self.started) >= first,
            Some(l) => now.duration_since(l) >= every,
        }
    }

    fn say(&mut self, line: String) {
        let now = Instant::now();
        if self.due(now) {
            self.last = Some(now);
            self.said = true;
            crate::say!("rocsync: report: {line}");
        }
    }

    /// One more file read.
    pub(in crate::read::report) fn item(&mut self) {
        self.items += 1;
        let (what, n) = (self.what, self.items);
        self.say(format!("{what}: {n} read"));
    }

    /// `done` bytes of `total` read.
    fn bytes(&mut self, done: u64, total: u64) {
        self.say(share(self.what, done, total));
    }

    /// The end, said if anything was.
    pub(in crate::read::report) fn done(&mut self) {
        if self.said {
            let secs = self.started.elapsed().as_secs_f64();
            crate::say!("rocsync: report: {} done in {secs:.1} s", self.what);
        }
    }
}

/// `reading the trace: 320 MiB of 920 MiB (35 %)`.
fn share(what: &str, done: u64, total: u64) -> String {
    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    let pct = (done as f64 * 100.0 / total.max(1) as f64).min(100.0);
    format!(
        "{what}: {:.0} MiB of {:.0} MiB ({pct:.0} %)",
        mib(done),
        mib(total)
    )
}

/// A file read with its progress said.
pub(in crate::read::report) struct Reading<R> {
    inner: R,
    done: u64,
    total: u64,
    progress: Progress,
}

impl<R> Reading<R> {
    pub(in crate::read::report) fn new(inner: R, total: u64) -> Self {
        Reading {
            inner,
            done: 0,
            total,
            progress: Progress::new("reading the trace"),
        }
    }
}

impl<R: Read> Read for Reading<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.done += n as u64;
        match n {
            0 => self.progress.done(),
            _ => self.progress.bytes(self.done, self.total),
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn said_only_once_due_and_then_at_intervals() {
        let mut p = Progress::new("reading");
        p.timing = ELSEWHERE;
        let t = p.started;
        assert!(
            !p.due(t + Duration::from_secs(4)),
            "a short report says nothing"
        );
        assert!(p.due(t + Duration::from_secs(5)));
        p.last = Some(t + Duration::from_secs(5));
        assert!(!p.due(t + Duration::from_secs(9)));
        assert!(p.due(t + Duration::from_secs(10)));
        p.timing = TERMINAL;
        p.last = None;
        assert!(
            p.due(t + Duration::from_secs(1)),
            "a terminal sees it sooner"
        );
        assert_eq!(
            share("reading the trace", 320 << 20, 920 << 20),
            "reading the trace: 320 MiB of 920 MiB (35 %)"
        );
    }
}
