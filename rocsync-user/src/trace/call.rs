//! A captured API call, decoded and typed.

use rocsync_common::{Api, CallRecord, Entry};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    pub api: Api,
    pub pid: u32,
    pub tid: u32,
    pub correlation: u64,
    pub enter_ns: u64,
    /// `None` when the call had not returned by the end of the capture.
    pub exit_ns: Option<u64>,
    pub ret: Option<i64>,
    /// Raw argument values, in the order of [`Api::arg_names`].
    pub args: [u64; 3],
}

/// How an argument is written: handles as `"0x…"` strings, the rest as integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    Handle,
    Unsigned,
    Signed,
}

pub fn arg_kind(name: &str) -> ArgKind {
    match name {
        "event" | "stream" => ArgKind::Handle,
        "device" | "priority" => ArgKind::Signed,
        _ => ArgKind::Unsigned,
    }
}

impl Call {
    /// A decoded record; its API id was validated by the decoder.
    pub fn from_record(r: &CallRecord) -> Option<Call> {
        Some(Call {
            api: Api::from_u32(r.api)?,
            pid: r.pid,
            tid: r.tid,
            correlation: r.correlation,
            enter_ns: r.enter_ns,
            exit_ns: Some(r.exit_ns),
            ret: Some(r.ret),
            args: r.args,
        })
    }

    /// A call still in flight when the capture stopped, from its entry stash.
    pub fn in_flight(pid_tgid: u64, e: &Entry) -> Option<Call> {
        let api = Api::from_u32(rocsync_common::Cookie(e.api as u64).api())?;
        let mut args = e.args;
        // An out-parameter was not written yet: its pointer means nothing to the reader.
        if !matches!(api.out_param(), rocsync_common::OutParam::None) {
            args[0] = 0;
        }
        Some(Call {
            api,
            pid: (pid_tgid >> 32) as u32,
            tid: pid_tgid as u32,
            correlation: e.correlation,
            enter_ns: e.enter_ns,
            exit_ns: None,
            ret: None,
            args,
        })
    }

    pub fn ok(&self) -> bool {
        self.ret == Some(0)
    }

    /// The value of a named argument, if this API has it.
    pub fn arg(&self, name: &str) -> Option<u64> {
        let i = self.api.arg_names().iter().position(|n| *n == name)?;
        Some(self.args[i])
    }

    /// The event handle argument, if this API has one.
    #[inline]
    pub fn event(&self) -> Option<u64> {
        self.api.op().event_index().map(|i| self.args[i])
    }

    /// The stream handle argument, if this API has one.
    #[inline]
    pub fn stream(&self) -> Option<u64> {
        self.api.op().stream_index().map(|i| self.args[i])
    }
}
