//! What was typed (`cli`) turned into the settings the commands run with: the one place
//! that knows both.

use crate::{
    calls::{
        backend::{RUNTIMES, Runtime},
        probes::{ApiChoice, ProbeOptions},
    },
    capture::CaptureSettings,
    front::cli::CaptureArgs,
};

impl From<CaptureArgs> for CaptureSettings {
    fn from(a: CaptureArgs) -> Self {
        // An unknown name cannot come: clap admits only the runtimes' names.
        let runtimes = match a.backend.as_deref().and_then(Runtime::by_name) {
            Some(r) => vec![r],
            None => RUNTIMES.iter().collect(),
        };
        CaptureSettings {
            output: a.output,
            raw: a.raw,
            force: a.force,
            verbose: a.verbose,
            runtimes,
            agents: a.agents.unwrap_or_default(),
            apis: ApiChoice {
                extra: a.probe.into_iter().flat_map(|l| l.0).collect(),
                skip: a.skip,
                temporary: Vec::new(),
                returns: Default::default(),
            },
            probes: ProbeOptions {
                ring_bytes: a.ring_size,
                // Calls come at up to hundreds of thousands a second; the other records
                // (HSA, loader, processes) far fewer.
                call_ring_bytes: Some(a.ring_size.unwrap_or(crate::capture::CALL_RING_BYTES)),
                at_entry: a.probe_at_entry,
                diagnostics: a.verbose,
                classic_uprobes: a.classic_uprobes,
                labelled_series: None,
            },
            // Running threads' devices are learnt by `attach` alone (`AttachArgs`).
            learn_devices: std::time::Duration::ZERO,
            status_line: !a.no_status,
            follow: !a.no_follow,
            daemon_socket: a.daemon_socket,
            max_bytes: a.trace_max_bytes,
            waited: false,
        }
    }
}
