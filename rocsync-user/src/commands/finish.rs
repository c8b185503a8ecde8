//! What every capture does at the end: write the outputs, print the summary.

use anyhow::Result;

use crate::{
    capture::Captured,
    cli::OutputArgs,
    output::PendingFile,
    summary,
    trace::raw::{self, Header},
};

/// Output files reserved before the capture starts, so a bad path fails early.
pub struct Outputs {
    raw: Option<PendingFile>,
}

impl Outputs {
    pub fn reserve(args: &OutputArgs) -> Result<Self> {
        let raw = args.raw.as_deref().map(PendingFile::create).transpose()?;
        Ok(Self { raw })
    }

    /// Writes everything captured; calls are ordered by correlation id.
    pub fn write(self, mut cap: Captured, header: Header) -> Result<()> {
        cap.calls.sort_unstable_by_key(|c| (c.correlation, c.pid));
        let mut lines = Vec::new();
        if let Some(f) = self.raw {
            let header = Header {
                drops: cap.drops.calls,
                ..header
            };
            let path = f.commit(|w| {
                raw::write_header(w, &header)?;
                cap.calls.iter().try_for_each(|c| raw::write_call(w, c))
            })?;
            lines.push(format!("raw calls: {}", path.display()));
        }
        eprint!(
            "{}",
            summary::render(&cap.calls, &cap.drops, cap.in_flight, &lines)
        );
        cap.detached();
        if cap.drops.calls > 0 {
            eprintln!(
                "rocsync: warning: {} calls were dropped because the ring buffer was full",
                cap.drops.calls
            );
        }
        Ok(())
    }
}
