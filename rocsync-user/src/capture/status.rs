//! The live status line on a terminal: elapsed time, calls captured and their rate,
//! waits resolved, records lost. Nothing when stderr is not a terminal.

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::calls::stats::CaptureStats;

pub(crate) struct Status {
    bar: Option<ProgressBar>,
    started: Instant,
    last: (Instant, u64),
}

impl Status {
    pub(crate) fn new(enabled: bool) -> Self {
        let bar = (enabled && std::io::IsTerminal::is_terminal(&std::io::stderr())).then(|| {
            // Drawn through rocsync's stderr queue: a paused terminal blocks no one.
            let term = Box::new(crate::os::stderr::StatusTerm::default());
            let b =
                ProgressBar::with_draw_target(None, ProgressDrawTarget::term_like_with_hz(term, 4));
            b.set_style(ProgressStyle::with_template("rocsync: {msg}").expect("valid template"));
            b
        });
        let now = Instant::now();
        Self {
            bar,
            started: now,
            last: (now, 0),
        }
    }

    /// Prints a line above the status line (or plainly, without one).
    pub(crate) fn say(&self, line: &str) {
        match &self.bar {
            Some(b) => b.println(line),
            None => crate::say!("{line}"),
        }
    }

    pub(crate) fn update(&mut self, stats: &CaptureStats) {
        let Some(bar) = &self.bar else { return };
        let now = Instant::now();
        let calls = stats.calls();
        let dt = now.duration_since(self.last.0);
        if dt < Duration::from_millis(250) {
            return;
        }
        let rate = (calls - self.last.1.min(calls)) as f64 / dt.as_secs_f64();
        self.last = (now, calls);
        bar.set_message(format!(
            "{:>6.1}s  {calls} calls  {rate:.0}/s  waits resolved {}/{}  lost {}",
            self.started.elapsed().as_secs_f64(),
            stats.waits_resolved,
            stats.waits_resolved + stats.waits_unresolved(),
            stats.lost_total(),
        ));
    }

    pub(crate) fn clear(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
