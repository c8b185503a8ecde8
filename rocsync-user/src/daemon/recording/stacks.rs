//! The stacks of an unasked trace's process (`stacks/`), read once it began: into its
//! object (`stacks`, `where`) and as rows on the blocked thread's track, so Perfetto shows
//! where the thread was beside its blocked call.

use serde_json::json;

use crate::{
    daemon::{recording::traces::Active, triggers::origin::Unasked},
    os::clock,
    stacks::Stacks,
};

/// The span a stack's rows cover when the call's entry is not known (a stall's process,
/// a rank): the moment of the read.
const SNAPSHOT_NS: u64 = 1_000_000;

impl Active {
    /// Which process and thread to read the stacks of: its object's, the thread the
    /// trace is for (a rank's main thread when none is named).
    pub(crate) fn stacks_wanted(&mut self) -> Option<(u32, u32)> {
        let (kind, o) = self.origin.unasked()?;
        let pid = u32::try_from(o["pid"].as_u64()?).ok()?;
        let tid = o["tid"].as_u64().and_then(|t| u32::try_from(t).ok());
        // Said as such unless the read comes back in time.
        let o = self.origin.object_mut(kind)?;
        o["stacks"] = json!({"pid": pid, "error": "not read before the trace ended"});
        Some((pid, tid.unwrap_or(pid)))
    }

    /// The stacks read: in its object, and as rows — from the blocked call's entry (a
    /// hang's) or the read's moment, to the read.
    pub(crate) fn add_stacks(&mut self, s: &Stacks) {
        let Some((kind, o)) = self.origin.unasked() else {
            return;
        };
        let offset = clock::realtime_offset_ns();
        let mono = |unix_us: i64| (unix_us * 1000 - offset).max(0) as u64;
        let read_ns = mono(s.read_at_unix_us as i64);
        let from_ns = match (kind, o["entry_unix_us"].as_i64()) {
            (Unasked::Hang, Some(entry)) => mono(entry).min(read_ns),
            _ => read_ns.saturating_sub(SNAPSHOT_NS),
        };
        if let Some(o) = self.origin.object_mut(kind) {
            o["stacks"] = s.to_json();
            o["where"] = s.where_().into();
        }
        let traces = self.pipeline.sink_mut().trace_mut();
        let _ = traces.extra_rows(s.pid, (from_ns, read_ns), |ts, dur| s.rows(ts, dur));
    }
}
