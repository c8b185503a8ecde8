//! The subcommands.

mod attach;
mod convert;
mod run;
mod trace;

pub use attach::attach;
pub use convert::convert;
pub use run::run;
pub use trace::{status, trace};

use anyhow::Result;
use serde_json::Value;

use crate::{
    capture::Captured,
    emit::outputs::{Outputs, Report},
};

/// Closes a live capture's outputs and prints its summary, once its probes are detached.
fn write_outputs(outputs: Outputs, captured: Captured, mut parameters: Value) -> Result<()> {
    let Captured {
        error,
        processes,
        sink,
        stats,
        libraries,
        call_probe_links,
        detaching,
        ..
    } = captured;
    parameters["call_probe_links"] = call_probe_links.into();
    let report = Report {
        parameters,
        libraries: libraries
            .iter()
            .map(|l| l.path.display().to_string())
            .collect(),
        single_stepped: libraries
            .iter()
            .flat_map(|l| &l.probed)
            .filter(|(p, _)| !p.emulated)
            .map(|(p, names)| format!("{} ({})", names.join(" = "), p.probed))
            .collect(),
        processes,
    };
    let written = match error {
        None => outputs.finish(sink, &stats, report).map(drop),
        Some(e) => outputs.salvage(sink, &stats, e),
    };
    detaching.wait();
    if libraries.is_empty() {
        crate::say!(
            "rocsync: warning: the target never mapped a GPU runtime library that rocsync traces"
        );
    }
    written
}
