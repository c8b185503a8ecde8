//! Where each chosen function of a runtime file gets its probes: its entry's and its
//! return's offsets ([`placement`](crate::calls::probes::placement); an entry no return probe shares
//! goes further where [`alone`](super::alone) proves it may), and the placement said
//! (`-v`, `doctor`, the daemon's log).

use std::path::Path;

use anyhow::Result;
use rocsync_common::Api;

use crate::calls::backend::Runtime;
use crate::calls::probes::{ApiChoice, elf, elf::Lookup, placement::Placement};

/// One function's probe points.
pub struct Points {
    pub api: Api,
    /// Its names (aliases share an address, so one probe; the first gives the API).
    pub names: Vec<&'static str>,
    pub entry: u64,
    pub ret: u64,
    /// Where its entry probes (its return's point where no entry attaches).
    pub said: Placement,
}

/// The chosen functions `path` defines and their points, and the names it lacks; `None`
/// where it defines none and `carried` (a library carrying its own static copy of the
/// runtime). `at_entry`: every probe on the first instruction (`--probe-at-entry`).
pub fn resolve(
    runtime: &Runtime,
    choice: &ApiChoice,
    path: &Path,
    at_entry: bool,
    carried: bool,
) -> Result<(Vec<Points>, Vec<&'static str>, bool)> {
    let names: Vec<&'static str> = runtime
        .apis()
        .filter(|a| choice.probes(*a))
        .map(|a| a.symbol())
        .collect();
    let Lookup {
        found,
        missing,
        symbols,
    } = elf::lookup(path, &names)?;
    if found.is_empty() && !carried {
        return Err(elf::SymbolError::NoneHooked(format!(
            "{} exports none of the hooked {} functions ({}): is it really {}?",
            path.display(),
            runtime.library,
            names.join(", "),
            runtime.library
        ))
        .into());
    }
    let points = found
        .into_iter()
        .map(|f| {
            let api = runtime
                .apis()
                .find(|a| a.symbol() == f.names[0])
                .expect("resolved names come from the runtime's table");
            // The return where `[rsp]` is the return address; the entry alone past the
            // stack frame's setup where no return probe of it shares its point.
            let paired = if at_entry {
                f.offset
            } else {
                f.placement.offset
            };
            let alone = f.alone.filter(|_| !at_entry && choice.entry_alone(api));
            let entries = choice.returns.wants(api, false);
            Points {
                api,
                names: f.names,
                entry: alone.as_ref().map_or(paired, |a| a.offset),
                ret: paired,
                said: alone.filter(|_| entries).unwrap_or(f.placement),
            }
        })
        .collect();
    Ok((points, missing, symbols))
}

/// Where the daemon's probes of `path` trap while it counts: records', stream waits',
/// destroys' and polls' entries alone (their returns attach apart, only while something
/// records), every other function's pair.
pub fn counting(runtime: &Runtime, path: &Path) -> Result<Vec<Points>> {
    let counting = ApiChoice {
        returns: crate::calls::probes::ReturnProbes::Needed,
        ..ApiChoice::default()
    };
    Ok(resolve(runtime, &counting, path, false, true)?.0)
}

/// What functions' probes are placed on, grouped by placement, as the daemon's log and
/// `doctor` say it: "hipEventRecord, hipStreamWaitEvent: `call` past the frame's setup
/// (emulated, entry alone); hipStreamSynchronize: `sub` after endbr64 (single-stepped)".
pub fn said(points: &[Points]) -> String {
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    for p in points {
        let how = p.said.kind();
        match groups.iter_mut().find(|(h, _)| *h == how) {
            Some((_, names)) => names.push(p.names[0]),
            None => groups.push((how, vec![p.names[0]])),
        }
    }
    let groups: Vec<String> = groups
        .into_iter()
        .map(|(how, names)| format!("{}: {how}", names.join(", ")))
        .collect();
    groups.join("; ")
}

/// Whether most of the entries probed alone among `points` are single-stepped (none
/// moved past a frame setup onto an instruction the kernel emulates).
pub fn alone_stepped(points: &[Points]) -> bool {
    let alone: Vec<&Points> = (points.iter())
        .filter(|p| p.api.return_optional() || p.api.entry_only())
        .collect();
    2 * alone.iter().filter(|p| !p.said.emulated).count() > alone.len()
}
