//! SIGHUP: the configuration read again and checked whole before it replaces the one in
//! effect; what was set up at start is kept and said to wait for a restart.

use crate::daemon::{
    outputs::statedir, settings::config::DaemonConfig, settings::keys::SETTINGS, state::Daemon,
    triggers::sampled::Sampling, untrusted,
};

impl Daemon {
    /// A new configuration, checked whole before it replaces the one in effect (a bad
    /// one is said and the old kept): the state directory made as at start, and the
    /// sampling schedule follows the sampling now configured.
    pub(crate) fn reload(&mut self) {
        let checked = DaemonConfig::load(&self.flags).and_then(|c| {
            statedir::make(&c.state_dir)?;
            Ok(c)
        });
        let mut c = match checked {
            Ok(c) => c,
            Err(e) => {
                let e = format!("{e:#}");
                return crate::say!(
                    "rocsync daemon: warning: keeping the configuration: {}",
                    untrusted::shown(&e)
                );
            }
        };
        if c.kernel_threshold() != self.config.kernel_threshold()
            && let Err(e) = self
                .tracker
                .probes
                .set_stall_threshold(c.kernel_threshold())
        {
            crate::say!("rocsync daemon: warning: {e:#}");
        }
        if c.sampling != self.config.sampling {
            self.sampling = Sampling::new(c.sampling);
        }
        self.tracker.set_filters(c.filters.clone());
        if !(self.destinations).reload(c.destinations(), self.config.destinations()) {
            (c.upload, c.node_name) = (self.config.upload.clone(), self.config.node_name.clone());
        }
        // What was set up at start stays as it is (listeners, the flight recorder, the
        // socket's group, the learning done): said, never pretended.
        let old = &self.config;
        let restart = SETTINGS.iter().filter(|s| s.restart);
        for s in restart.filter(|s| (s.shown)(old) != (s.shown)(&c)) {
            let key = s.key;
            crate::say!("rocsync daemon: warning: {key} changed: it takes effect at restart");
        }
        self.config = c.keeping_start(old);
        crate::say!("rocsync daemon: configuration reloaded");
    }
}
