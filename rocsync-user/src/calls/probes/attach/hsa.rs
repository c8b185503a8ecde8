//! Attaching the HSA write-path probes: queue creation and destruction, doorbells,
//! agent enumeration.

use std::path::Path;

use anyhow::Result;

use super::report::LibraryReport;
use crate::calls::probes::{
    Probes,
    attach::programs::{
        AGENT_INFO_ENTER, AGENT_INFO_EXIT, DOORBELL, ITERATE_AGENTS_ENTER, ITERATE_AGENTS_EXIT,
        QUEUE_CREATE_ENTER, QUEUE_CREATE_EXIT, QUEUE_DESTROY,
    },
    elf,
    elf::{Lookup, SymbolError},
};

/// The HSA write path: program per symbol (entry and return programs of one function), in
/// the order attached. `hsa_iterate_agents` comes after `hsa_agent_get_info`: an
/// enumeration it sees begin has every agent query seen too.
const HSA_PROBES: [(&str, &[&str]); 6] = [
    ("hsa_agent_get_info", &[AGENT_INFO_ENTER, AGENT_INFO_EXIT]),
    ("hsa_queue_create", &[QUEUE_CREATE_ENTER, QUEUE_CREATE_EXIT]),
    ("hsa_queue_destroy", &[QUEUE_DESTROY]),
    ("hsa_signal_store_screlease", &[DOORBELL]),
    ("hsa_signal_store_relaxed", &[DOORBELL]),
    (
        "hsa_iterate_agents",
        &[ITERATE_AGENTS_ENTER, ITERATE_AGENTS_EXIT],
    ),
];

impl Probes {
    /// Attaches the HSA write-path probes (queue creation and destruction, doorbells) to
    /// the HSA runtime at `path` for `pid`. Aliases at one address are probed once.
    pub fn attach_hsa(&mut self, path: &Path, pid: u32) -> Result<LibraryReport> {
        let names: Vec<&'static str> = HSA_PROBES.iter().map(|(n, _)| *n).collect();
        let Lookup { found, missing, .. } = elf::lookup(path, &names)?;
        if !found.iter().any(|f| f.names.contains(&"hsa_queue_create")) {
            return Err(SymbolError::NoneHooked(format!(
                "{} does not export hsa_queue_create: is it really libhsa-runtime64?",
                path.display()
            ))
            .into());
        }
        let undo = self.links.undo_mark();
        let mut probed = Vec::new();
        // In HSA_PROBES' order (an address's first name stands for its aliases).
        let ordered = HSA_PROBES
            .iter()
            .filter_map(|(n, progs)| Some((found.iter().find(|f| f.names[0] == *n)?, *progs)));
        for (f, progs) in ordered {
            for &prog in progs {
                let point = f.placement.offset.into();
                let (ebpf, names) = (&mut self.ebpf, &f.names);
                if let Err(e) = self.links.attach(ebpf, prog, point, path, Some(pid), names) {
                    self.links.rollback(&mut self.ebpf, undo);
                    return Err(e);
                }
            }
            probed.push((f.placement.clone(), f.names.clone()));
        }
        Ok(LibraryReport::new(path, probed, missing))
    }
}
