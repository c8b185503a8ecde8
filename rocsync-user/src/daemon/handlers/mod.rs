//! What the daemon does when its loop wakes, beyond its small wakes (`state.rs`): what
//! it records (`recording.rs`: the probes' ring read, the triggers asked, a `Start`
//! begun, traces ended when due) and what it answers (`requests.rs`: the socket,
//! `/metrics`, dynolog).

pub(super) mod recording;
pub(super) mod requests;

use rocsync_common::{Api, GetDeviceMode, Op, Switch};

/// Whether the loop goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    Go,
    Stop,
}

/// The daemon's switch: calls counted, by process. Its only `*GetDevice` probes are the
/// scan's temporary ones: while they learn, a trace (the flight recorder's, from the
/// start) records a thread's calls until one succeeds, and none while they go.
pub(crate) fn switch(get_device: GetDeviceMode) -> Switch {
    let mut s = Switch {
        by_process: 1,
        metrics: 1,
        ..Switch::default()
    };
    for &api in Api::ALL.iter().filter(|a| a.op() == Op::GetDevice) {
        s.set_get_device(api, get_device);
    }
    s
}
