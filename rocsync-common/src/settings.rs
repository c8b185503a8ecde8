//! What userspace tells the probes: each target's settings (`TARGETS`, by tgid) and the
//! capture-wide switch. Map values, not ring records.

use crate::{Api, UNKNOWN_AGENT};

/// Per-target settings, keyed by tgid in the `TARGETS` map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// Non-zero: capture calls of this process.
    pub capture: u32,
    /// Non-zero: stop the process at each link-map change so new libraries are attached
    /// before their first call.
    pub stop_on_link_map: u32,
    /// Bit N set: record agent (device) N. Zero: every agent.
    pub agents: u64,
    /// Non-zero: child processes are traced from their fork, with these settings.
    pub follow: u32,
    /// Non-zero: count this process's calls in `METRICS` (daemon mode).
    pub metrics: u32,
    /// The process's calls counted (daemon mode; wraps): their rate is what its probes
    /// cost it, which the daemon's budget holds.
    pub calls: u32,
    /// Non-zero: HSA agents are numbered as the process's HIP devices, by
    /// `agent_devices` (its `HIP_VISIBLE_DEVICES` makes HIP device N some other agent).
    pub remap: u32,
    /// The HIP device of each GPU agent by enumeration ordinal; [`HIDDEN_AGENT`] when no
    /// device is that agent.
    pub agent_devices: [u8; 16],
    /// Of [`Config::calls`], the polling ones ([`crate::Api::is_polling`]): what the
    /// budget can shed.
    pub polls: u32,
    /// Of [`Config::calls`], those whose return is not probed (no return probe, or the
    /// daemon's records, stream waits and destroys while nothing records): one trap
    /// each, which the budget prices apart from a pair's two.
    pub alone: u32,
    /// The daemon's label group of the process (`--metric-labels`): non-zero, its calls
    /// are counted in `GROUP_METRICS` under this group rather than in `METRICS`.
    pub metric_group: u32,
}

/// [`Config::capture`] of a process the daemon counts while a trace on demand records it:
/// entries and exits go to the ring; while the trace stops, exits only (calls in flight
/// complete).
pub const TRACE_RECORDING: u32 = 1;
pub const TRACE_STOPPING: u32 = 2;

/// [`Config::agent_devices`]: the agent is no HIP device of the process.
pub const HIDDEN_AGENT: u8 = 0xff;

impl Config {
    /// Not captured, not counted, no mapping: what the other settings are built on.
    pub const INACTIVE: Config = Config {
        capture: 0,
        stop_on_link_map: 0,
        agents: 0,
        follow: 0,
        remap: 0,
        agent_devices: [HIDDEN_AGENT; 16],
        metrics: 0,
        calls: 0,
        polls: 0,
        alone: 0,
        metric_group: 0,
    };

    /// The number a queue on the agent enumerated `ordinal`-th gets: the HIP device it is
    /// (`UNKNOWN_AGENT` when hidden), or the ordinal itself without a mapping.
    pub fn device_of_agent(&self, ordinal: u32) -> u32 {
        if self.remap == 0 {
            return ordinal;
        }
        match self.agent_devices.get(ordinal as usize) {
            Some(&d) if d != HIDDEN_AGENT => d as u32,
            _ => UNKNOWN_AGENT,
        }
    }
}

/// The capture-wide switch the call probes read (one array slot: no hash lookup on the
/// hot path). Call probes are attached per process, so the kernel runs them only in
/// traced processes; `by_process` asks them to check `TARGETS` too (file-wide probes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Switch {
    /// Non-zero: record calls entered from now on.
    pub capture: u32,
    /// Non-zero: record only processes in `TARGETS` with `capture` set.
    pub by_process: u32,
    /// Bit N set: record agent (device) N. Zero: every agent. Both settings hold a mask
    /// because two paths read them: a capture's call probes read only this switch (one
    /// array slot, no hash lookup per call), while the doorbell probe and the daemon's
    /// traces — different agents in different processes — read the target's.
    pub agents: u64,
    /// Non-zero: the daemon's always-on mode. Calls of processes in `TARGETS` are counted
    /// in the kernel (`METRICS`) and write nothing to the ring; exec and library loads of
    /// every process are announced, for discovery.
    pub metrics: u32,
    /// Non-zero: the loader probe stops no target (rocsync is suspended by Ctrl-Z and
    /// could not continue it); it announces each link-map change instead.
    pub stops_off: u32,
    /// How `hipGetDevice`'s calls are recorded ([`GetDeviceMode`]).
    pub hip_get_device: u16,
    /// How `cudaGetDevice`'s calls are recorded.
    pub cuda_get_device: u16,
    pub pad: u32,
}

/// How a `*GetDevice` is recorded. `attach` probes it only briefly, to learn the devices
/// its threads chose before the capture: one successful call per thread tells it (later
/// changes come from `*SetDevice`, probed), and it is called thousands of times a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum GetDeviceMode {
    /// Every call (probed by the user's choice, or not probed at all).
    Every = 0,
    /// The temporary probes are learning: a thread's calls until one succeeds; the
    /// later ones are counted, not recorded.
    Learning = 1,
    /// The temporary probes are being removed: entry and return links go one after the
    /// other, so a call entered from now on is not recorded (its return, still probed,
    /// would find no entry), only counted.
    Off = 2,
}

impl Switch {
    /// How `api` (a `*GetDevice`) is recorded. `api` is a constant in each API's entry
    /// program: the choice folds away.
    #[inline(always)]
    pub fn get_device(&self, api: u32) -> u16 {
        if api == Api::HipGetDevice as u32 {
            self.hip_get_device
        } else {
            self.cuda_get_device
        }
    }

    /// Sets how `api` is recorded; any API but a `*GetDevice` has no mode.
    pub fn set_get_device(&mut self, api: Api, mode: GetDeviceMode) {
        match api {
            Api::HipGetDevice => self.hip_get_device = mode as u16,
            Api::CudaGetDevice => self.cuda_get_device = mode as u16,
            _ => {}
        }
    }
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: plain `#[repr(C)]` data with explicit padding and no invalid bit patterns.
    unsafe impl aya::Pod for super::Switch {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::Config {}
}
