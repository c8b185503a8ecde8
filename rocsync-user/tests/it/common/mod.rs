//! Helpers shared by the integration tests.
#![allow(dead_code, unused_imports)]

pub(crate) mod apis;
mod blocked;
mod calls;
mod capture;
pub(crate) mod daemon;
pub(crate) mod daemon_hsa;
mod held;
pub(crate) mod job_traces;
pub(crate) mod kineto;
mod launch;
mod members;
mod output;
pub(crate) mod packets;
pub(crate) mod pipeline;
pub(crate) mod pod;
mod raw;
mod rows;
mod stuck;
mod window;

pub(crate) use blocked::*;
pub(crate) use calls::*;
pub(crate) use capture::*;
pub(crate) use held::*;
pub(crate) use launch::*;
pub(crate) use members::*;
pub(crate) use output::*;
pub(crate) use raw::*;
pub(crate) use rows::*;
pub(crate) use window::*;

/// `rocsync doctor` looks for runtimes wherever users have them, `/opt` too. The test
/// that plants copies there holds this for writing, and every doctor run holds it for
/// reading: on several test threads a run would otherwise see files being planted or
/// removed.
pub(crate) static DOCTOR_SEARCH: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// `cmd` (a `rocsync doctor`) run to its end, no test planting runtimes meanwhile.
pub(crate) fn doctor_output(cmd: &mut std::process::Command) -> std::process::Output {
    let _search = DOCTOR_SEARCH.read().unwrap_or_else(|e| e.into_inner());
    cmd.output().unwrap()
}

/// A test's child process, killed and reaped however the test ends (a failed assertion
/// included): nothing a test started outlives it.
pub(crate) struct Reaped(pub std::process::Child);

/// A child ended by the test: killed (if it still runs) and reaped.
pub(crate) trait End {
    fn end(&mut self);
}

impl End for std::process::Child {
    fn end(&mut self) {
        let _ = self.kill();
        let _ = self.wait();
    }
}

impl std::ops::Deref for Reaped {
    type Target = std::process::Child;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Reaped {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            self.end();
        }
    }
}
