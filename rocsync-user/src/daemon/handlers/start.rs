//! The one place a trigger's [`Start`] becomes a recording: its processes chosen, its
//! trace opened (numbered, bounded in size), and its recording switched on — the
//! daemon's own stall and hang traces beginning with what the flight recorder holds.

use anyhow::Result;

use crate::daemon::{
    recording::{flight, selection, traces::Active},
    state::Daemon,
    triggers::Start,
};

impl Daemon {
    /// Starts what a trigger asked, unless its processes are gone or (asked) its agents
    /// are another session's: then nothing of it stays. Returns the trace.
    pub fn begin(&mut self, start: Start) -> Result<&mut Active> {
        // A stall's or a hang's process is named as it is: it may have exited since, and
        // what the flight recorder holds of it is still its trace.
        let unasked = start.origin.unasked();
        let pids = match unasked {
            true => start.spec.pids.clone(),
            false => selection::matched(&self.tracker, &start.spec)?,
        };
        let id = self.take_id();
        let limits = (id, self.config.trace_max_bytes);
        let trace = Active::open(&self.tracker, start, pids, &self.config.state_dir, limits)?;
        match (&mut self.flight, unasked) {
            (Some(f), true) => {
                let chunks = f.chunks();
                let history = flight::records(&chunks);
                self.sessions
                    .start_from(&mut self.tracker, trace, history)?;
            }
            _ => self.sessions.start(&mut self.tracker, trace)?,
        }
        Ok(&mut self.sessions.traces.last_mut().expect("just started").1)
    }
}
