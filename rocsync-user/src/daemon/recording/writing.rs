//! Traces are written off the daemon's loop. Finishing a trace resolves what is left and
//! writes every process's file; dumping a full flight recorder writes millions of calls
//! (measured: 5.3 s for 256 MiB, during which the loop drained nothing — 1.5 M calls of a
//! 300 000 calls/s process dropped — and `/healthz` waited). The loop must go on draining
//! the probes and answering meanwhile, so each is written on a blocking thread and its
//! client answered when it is done.

use std::{
    collections::{BTreeMap, HashMap},
    path::PathBuf,
    sync::{Arc, atomic::AtomicBool, atomic::Ordering},
};

use tokio::task::{Id, JoinSet};

use crate::calls::emit::processes::ProcessInfo;
use crate::daemon::{
    outputs::{self, retention},
    recording::flight::{self, Held},
    recording::{files, traces::Active},
    serving::protocol::Reply,
    serving::socket::PendingReply,
};

/// A trace written: what it is, its client, if one waits, and its answer.
pub(crate) struct Done {
    pub name: String,
    pub client: Option<PendingReply>,
    pub reply: Reply,
    /// The traced processes' pods (namespace, name), for upload keys.
    pub pods: BTreeMap<u32, (String, String)>,
    /// The traced processes' jobs (their world communicator's id), for upload keys.
    pub jobs: BTreeMap<u32, String>,
    /// The traced processes' users, whose shares of retention their files count in.
    pub owners: retention::Owners,
    /// A stall or hang trace (`rocsync status` lists the newest).
    pub unasked: bool,
    /// A flight recorder dump cut at its bound (a trace's cut is counted as it ends).
    pub truncated: bool,
}

impl Done {
    /// What its destinations take: the files written, or a failure; `None` for an
    /// answer that writes nothing.
    pub(crate) fn trace(&self) -> Option<outputs::Trace<'_>> {
        let (files, pids, failed): (&[String], &[Option<u32>], bool) = match &self.reply {
            Reply::Written(w) => (&w.files, &w.pids, false),
            Reply::Refused { .. } => (&[], &[], true),
            _ => return None,
        };
        Some(outputs::Trace {
            files,
            pids,
            pods: &self.pods,
            jobs: &self.jobs,
            owners: &self.owners,
            failed,
        })
    }
}

#[derive(Default)]
pub(crate) struct Writing {
    jobs: JoinSet<Done>,
    /// What each job writes (its name in `rocsync status`), and if it is a flight
    /// recorder dump, whose.
    names: HashMap<Id, (String, Option<Dump>)>,
}

/// A flight recorder dump being written: whether root asked for it, and its flag to end
/// early (root's request preempts another user's, as for traces).
struct Dump {
    roots: bool,
    preempted: Arc<AtomicBool>,
}

impl Writing {
    /// Finishes `trace` and writes its files.
    pub(crate) fn trace(&mut self, trace: Active) {
        let name = trace.name();
        let done_name = name.clone();
        let pods = pods_of(&trace.processes);
        let jobs = trace.jobs.clone();
        let owners = trace.owners.clone();
        let unasked = trace.origin.unasked().is_some();
        let job = self.jobs.spawn_blocking(trimmed(move || {
            let (client, reply) = trace.finish();
            Done {
                name: done_name,
                client,
                reply,
                pods,
                jobs,
                owners,
                unasked,
                truncated: false,
            }
        }));
        self.names.insert(job.id(), (name, None));
    }

    /// Writes what the flight recorder held when asked (`roots`: root asked).
    pub(crate) fn flight(
        &mut self,
        (held, roots): (Held, bool),
        state_dir: PathBuf,
        id: u64,
        processes: BTreeMap<u32, ProcessInfo>,
        client: PendingReply,
        links: (&'static str, serde_json::Value),
    ) {
        let preempted = Arc::new(AtomicBool::new(false));
        let ends = preempted.clone();
        let name = format!("flight recorder dump {id}");
        let done_name = name.clone();
        let pods = pods_of(&processes);
        // Read at the request, as a trace's are when it begins.
        let owners = retention::owners_of(processes.keys().copied());
        let job = self.jobs.spawn_blocking(trimmed(move || {
            let records = flight::records(&held.chunks);
            let queues = held.queues.iter().map(Vec::as_slice);
            let unentered = flight::returns_unentered(&held.chunks);
            let dumped = flight::dump(
                queues.chain(records),
                (held.assigned, held.known_from),
                (&state_dir, held.max_bytes),
                (id, &ends),
                processes,
                (links.0, links.1, (held.duty_cycled, unentered)),
            );
            let truncated = dumped.as_ref().is_ok_and(|d| d.1);
            Done {
                name: done_name,
                client: Some(client),
                reply: files::answer(dumped.map(|d| d.0)),
                pods,
                jobs: BTreeMap::new(),
                owners,
                unasked: false,
                truncated,
            }
        }));
        self.names
            .insert(job.id(), (name, Some(Dump { roots, preempted })));
    }

    /// A flight recorder dump is being written.
    pub(crate) fn flight_pending(&self) -> bool {
        self.names.values().any(|(_, flight)| flight.is_some())
    }

    /// For root's request: the dumps other users asked for end now, written as far as
    /// they went (a group member looping `trace --flight` kept root's refused). False
    /// while one of root's is written: that one goes on, and root waits.
    pub(crate) fn preempt_flights(&mut self) -> bool {
        let dumps = || self.names.values().filter_map(|(_, d)| d.as_ref());
        if dumps().any(|d| d.roots) {
            return false;
        }
        for d in dumps() {
            d.preempted.store(true, Ordering::Relaxed);
        }
        true
    }

    /// What is being written, by name.
    pub(crate) fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.names.values().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        names
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// The next trace written; pending while none is being written.
    pub(crate) async fn next(&mut self) -> Done {
        loop {
            match self.jobs.join_next_with_id().await {
                Some(Ok((id, done))) => {
                    self.names.remove(&id);
                    return done;
                }
                // A writer that panicked: its client's connection closes unanswered.
                Some(Err(e)) => {
                    self.names.remove(&e.id());
                    crate::say!("rocsync daemon: error: writing a trace: {e}");
                }
                None => std::future::pending::<()>().await,
            }
        }
    }
}

/// `write`, then the memory it freed handed back to the system. A writer's thread
/// allocates from a malloc arena of its own, which keeps what a trace freed: measured,
/// the daemon stayed at 904–969 MiB resident after a flight recorder dump (its recorder
/// holding 291).
fn trimmed(write: impl FnOnce() -> Done) -> impl FnOnce() -> Done {
    move || {
        // `write`'s captures (the trace, the recorder's chunks) are dropped by its end.
        let done = write();
        crate::os::memory::give_back();
        done
    }
}

/// Each process's pod as its traces' upload keys name it (`Pod::key_parts`).
fn pods_of(processes: &BTreeMap<u32, ProcessInfo>) -> BTreeMap<u32, (String, String)> {
    processes
        .iter()
        .filter_map(|(pid, info)| {
            let pod: crate::kubernetes::Pod = serde_json::from_value(info.pod.clone()?).ok()?;
            Some((*pid, pod.key_parts()))
        })
        .collect()
}
