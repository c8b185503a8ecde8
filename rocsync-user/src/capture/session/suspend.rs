//! Ctrl-Z: rocsync stops itself, but no target may wait on it while it is stopped.

use std::time::{Duration, Instant};

use super::{RESCAN_EVERY, Session};
use crate::calls::probes::SETTLE;

impl Session {
    /// SIGTSTP (Ctrl-Z, or `kill -TSTP`). Stopped, rocsync could not continue a target
    /// held at a library load, and a target loads libraries at every Python import. So
    /// first the loader probe stops holding anyone (it announces the changes instead) and
    /// every pending stop is continued (but a target in rocsync's job, which the same
    /// Ctrl-Z reached: see `continue_process`). Then rocsync stops itself.
    /// Once continued it holds the targets again and probes what they loaded meanwhile;
    /// their calls into it before then are not traced, which it says. The calls of
    /// libraries already probed are captured meanwhile, into the ring: what overflows it
    /// is counted as lost.
    pub(super) fn suspend(&mut self) {
        self.suspended = true;
        if let Err(e) = self.probes.set_switch(self.switch()) {
            // Without the switch a stop could not be refused: stay running.
            self.suspended = false;
            self.say(&format!("rocsync: warning: not suspending (Ctrl-Z): {e:#}"));
            return;
        }
        // A probe that read the switch before it changed may still be stopping a target.
        std::thread::sleep(SETTLE);
        for pid in self.probes.stopped_pids() {
            let _ = self.probes.continue_stopped(pid, false);
        }
        self.status.clear();
        self.say(
            "rocsync: suspended (Ctrl-Z): no target is held at a library load until rocsync \
             continues (fg); calls into a runtime loaded meanwhile are traced from then on",
        );
        // What was said reaches the terminal before the shell's prompt, unless stderr is
        // stuck: then rocsync stops without it.
        crate::os::stderr::flush_within(Duration::from_millis(200));
        let since = Instant::now();
        // SAFETY: stops this process (every thread) until SIGCONT; nothing is held.
        unsafe { libc::raise(libc::SIGSTOP) };
        let away = since.elapsed();
        self.suspended = false;
        let stats = &mut self.pipeline.stats;
        stats.suspensions += 1;
        stats.suspended_ms += away.as_millis() as u64;
        if let Err(e) = self.probes.set_switch(self.switch()) {
            self.say(&format!(
                "rocsync: warning: the targets are not held at library loads any more: \
                 {e:#}; a runtime they load is found within {}s",
                RESCAN_EVERY.as_secs()
            ));
        }
        let found = self.rescan();
        self.say(&format!(
            "rocsync: continued after {:.1}s suspended; {found} runtime librar{} loaded \
             meanwhile probed now",
            away.as_secs_f64(),
            if found == 1 { "y" } else { "ies" }
        ));
    }
}
