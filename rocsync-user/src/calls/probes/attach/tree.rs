//! Following a target's process tree: the fork and exit tracepoints (see the probes'
//! `tree` module) and the file-wide attachments that make a child's inherited libraries
//! traced from its first call.

use anyhow::{Context as _, Result};
use aya::{maps::Array, programs::RawTracePoint};

use super::btf;
use crate::calls::probes::Probes;

const FORK: &str = "process_fork";
const EXIT: &str = "process_exit";

impl Probes {
    /// Starts following children: the kernel adds every child process of a followed
    /// target to the traced set at its fork. From here on, library probes are attached
    /// file-wide (a forked child inherits its parent's mappings, not its pid-scoped
    /// breakpoints); the call probes then filter by the traced set.
    pub fn follow_children(&mut self) -> Result<()> {
        let layout = btf::task_layout().context("following child processes needs kernel BTF")?;
        let mut a: Array<_, rocsync_common::TaskLayout> = Array::try_from(
            self.ebpf
                .map_mut("TASK_LAYOUT")
                .context("TASK_LAYOUT map missing")?,
        )?;
        a.set(0, layout, 0).context("updating TASK_LAYOUT")?;
        for (prog, tracepoint) in [(FORK, "sched_process_fork"), (EXIT, "sched_process_exit")] {
            let p: &mut RawTracePoint = self
                .ebpf
                .program_mut(prog)
                .with_context(|| format!("program {prog} missing from the eBPF object"))?
                .try_into()?;
            p.load()
                .with_context(|| format!("loading program {prog}"))?;
            // Owned by the program: detached when the probes are dropped.
            p.attach(tracepoint)
                .with_context(|| format!("attaching to the {tracepoint} tracepoint"))?;
        }
        self.links.set_file_wide();
        Ok(())
    }

    /// Whether library probes are attached file-wide (children are followed).
    pub fn file_wide(&self) -> bool {
        self.links.file_wide()
    }
}
