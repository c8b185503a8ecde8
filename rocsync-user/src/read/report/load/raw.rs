//! A raw capture (`--raw`) replayed through the same resolve stage as `convert`, into the
//! report's [`Capture`].

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    io::{self, BufRead},
};

use anyhow::{Context as _, Result};
use rocsync_common::{Backend, Op, UNKNOWN_AGENT};

use super::held::{Held, Refused};
use crate::calls::{
    emit::{
        Sink,
        comms::{Comm, Comms},
        processes::ProcessInfo,
        raw::{Item, Reader},
    },
    ingest::{Packet, Queue, aql},
    pipeline::Pipeline,
    resolve::{Row, SyncKind},
};
use crate::read::report::capture::{Capture, NcclCall, Observed, Produced};

/// Whether the file starts as a raw capture does (its header line).
pub(in crate::read::report) fn looks_raw(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(&head[..head.len().min(64)]);
    text.trim_start()
        .trim_start_matches('{')
        .trim_start()
        .starts_with(&format!("\"{}\"", crate::calls::emit::raw::HEADER_KEY))
}

pub(in crate::read::report) fn read(input: impl BufRead) -> Result<Capture> {
    read_within(input, crate::read::input::MAX_HELD)
}

fn read_within(input: impl BufRead, max_held: u64) -> Result<Capture> {
    let mut reader = Reader::new(input)?;
    let collect = Collect {
        capture: Capture::default(),
        held: Held::new(max_held),
        past: BTreeMap::new(),
        comms: Comms::default(),
        queues: HashMap::new(),
        signals: HashSet::new(),
    };
    let mut pipeline = Pipeline::new(collect, reader.header.from_start);
    let mut trailer = false;
    let mut names = Vec::new();
    while let Some(item) = reader.next_item()? {
        if let Item::Trailer(t) = &item {
            trailer = true;
            names = thread_names(&t.processes);
        }
        pipeline.replay(item);
    }
    let (collect, stats) = pipeline.finish().context("replaying the capture")?;
    let mut capture = collect.capture;
    // As the trace names them: the threads that made calls.
    let callers: HashSet<(u32, u32)> = capture.calls.iter().map(|c| (c.pid, c.tid)).collect();
    let mut held = collect.held;
    for (thread, name) in names.into_iter().filter(|(t, _)| callers.contains(t)) {
        match held.name(&name) {
            Ok(n) => _ = capture.thread_names.insert(thread, n),
            Err(_) => capture.cut("thread names past the report's bounds".into(), 1),
        }
    }
    for (why, n) in collect.past {
        capture.cut(why, n);
    }
    capture.losses = stats
        .drops()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    if !trailer {
        // Its last counts were never written: what it holds is reported, and said.
        capture.unusable("no trailer (the capture was cut short)");
    }
    capture.rebase();
    Ok(capture)
}

/// Takes the resolved rows as the trace writer does: each call once, when complete;
/// within what the report holds.
struct Collect {
    capture: Capture,
    held: Held,
    /// Calls past what the report holds, by reason.
    past: BTreeMap<String, u64>,
    /// Communicators, as the trace writer learns them.
    comms: Comms,
    /// Queues created, with their agent (`None`: created before the capture); the
    /// completion signals of the packets seen, for the barriers' dependencies.
    queues: HashMap<u64, Option<i64>>,
    signals: HashSet<u64>,
}

impl Collect {
    fn take(&mut self, r: &Row) {
        let c = &r.call;
        // The trace leaves these out (filtered by --agents, device selection): so does
        // the report, so that a trace and its raw capture report alike.
        if c.filtered || matches!(c.api.op(), Op::SetDevice | Op::GetDevice) {
            return;
        }
        if c.api.backend() == Backend::Nccl {
            return self.nccl(r);
        }
        if r.barrier
            .is_some_and(|b| self.queues.contains_key(&b.queue))
        {
            self.capture.packets.call_barriers += 1;
        }
        let Some(exit) = c.exit_ns else {
            self.capture
                .unusable("call still in flight at the end (no duration)");
            return;
        };
        let waits = r.sync.is_some_and(|k| k.waits_on_event());
        let unresolved = r.unresolved.filter(|_| waits).map(|u| u.name());
        // Its names first: a call refused takes nothing of the budget.
        let names = (|| -> Result<_, Refused> {
            let api = self.held.name(c.api.symbol())?;
            let sync = r.sync.map(|k| self.held.name(k.cupti_name())).transpose()?;
            let unresolved = unresolved.map(|u| self.held.name(u)).transpose()?;
            self.held.take(std::mem::size_of::<Observed>())?;
            Ok((api, sync, unresolved))
        })();
        let (api, sync, unresolved) = match names {
            Ok(n) => n,
            Err(why) => {
                *self.past.entry(self.held.why(why, "calls")).or_default() += 1;
                return;
            }
        };
        self.capture.calls.push(Observed {
            api,
            pid: c.pid,
            tid: c.tid,
            correlation: c.correlation,
            start_ns: i64::try_from(c.enter_ns).unwrap_or(i64::MAX),
            blocked_ns: i64::try_from(exit.saturating_sub(c.enter_ns)).unwrap_or(i64::MAX),
            device: r.sync.map(|_| r.device),
            sync,
            stream: c.stream(),
            // The trace numbers the stream of a stream's synchronize or wait, as its
            // device row's track.
            stream_index: r.stream_index.filter(|_| {
                matches!(
                    r.sync,
                    Some(SyncKind::StreamSynchronize | SyncKind::StreamWaitEvent)
                )
            }),
            producer: r.producer.map(|p| Produced {
                correlation: p.correlation,
                stream: p.stream,
                stream_index: Some(p.stream_index).filter(|&i| i >= 0),
                tid: p.tid,
                record_ns: i64::try_from(p.mid_ns).unwrap_or(i64::MAX),
            }),
            unresolved,
        });
    }
}

impl Collect {
    /// An NCCL/RCCL call, with its communicator as the trace writer knows it.
    fn nccl(&mut self, r: &Row) {
        let c = &r.call;
        self.comms.learn(c);
        let numbered = c.numbered();
        let has_comm = !matches!(c.api.op(), Op::Group);
        let comm = has_comm
            .then(|| self.comms.get(c.pid, c.args[0]).copied())
            .flatten();
        let kept = (self.held.name(c.api.symbol())).and_then(|api| {
            self.held
                .take(std::mem::size_of::<NcclCall>() + 32)
                .map(|()| api)
        });
        let api = match kept {
            Ok(api) => api,
            Err(why) => {
                let why = self.held.why(why, "cpu_op rows");
                *self.past.entry(why).or_default() += 1;
                return;
            }
        };
        self.capture.nccl.push(NcclCall {
            pid: c.pid,
            api,
            start_ns: i64::try_from(c.enter_ns).unwrap_or(i64::MAX),
            comm: numbered.map(|_| c.args[0]),
            id: comm.map(|m| m.id).filter(|&id| id != 0),
            rank: comm.and_then(|m| m.rank).map(u64::from),
            nranks: comm.and_then(|m| m.nranks).map(u64::from),
            seq: numbered.map(|n| u64::from(n.seq)),
            stream: numbered.map(|_| c.args[1]),
        });
    }
}

impl Sink for Collect {
    fn communicator(&mut self, pid: u32, handle: u64, comm: Comm) -> io::Result<()> {
        self.comms.insert(pid, handle, comm);
        Ok(())
    }
    fn row(&mut self, row: &Row) -> io::Result<()> {
        self.take(row);
        Ok(())
    }
    fn deferred(&mut self, _row: &Row) -> io::Result<()> {
        Ok(())
    }
    fn completed(&mut self, row: &Row) -> io::Result<()> {
        self.take(row);
        Ok(())
    }
    fn lost(&mut self, _first: u64, _count: u64) -> io::Result<()> {
        Ok(())
    }
    fn queue(&mut self, q: &Queue) -> io::Result<()> {
        if q.created {
            let agent = (q.ordinal != UNKNOWN_AGENT).then_some(i64::from(q.ordinal));
            self.queues.entry(q.queue).or_insert(agent);
        }
        Ok(())
    }
    fn packet(&mut self, p: &Packet) -> io::Result<()> {
        // As the trace writer: a packet of a queue it has no track for is not written.
        let Some(&agent) = self.queues.get(&p.queue) else {
            return Ok(());
        };
        let d = aql::decode(&p.bytes);
        let deps = d.deps().iter().filter(|s| self.signals.contains(s)).count();
        self.capture.packets.barrier_dependencies += deps as u64;
        if d.completion_signal != 0 {
            self.signals.insert(d.completion_signal);
        }
        let names = (self.held.name(&format!("{:#x}", p.queue)))
            .and_then(|q| Ok((q, self.held.name(d.kind.name())?)));
        match names {
            Ok((queue, kind)) => self.capture.packets.add(agent, queue, kind),
            Err(why) => {
                let why = self.held.why(why, "hsa_packet rows");
                *self.past.entry(why).or_default() += 1;
            }
        }
        Ok(())
    }
}

/// The threads' names the trailer's processes carry (`{"PID": {"threads": {"TID": NAME}}}`).
fn thread_names(processes: &serde_json::Value) -> Vec<((u32, u32), String)> {
    let Some(all) = processes.as_object() else {
        return Vec::new();
    };
    all.iter()
        .filter_map(|(pid, p)| Some((pid.parse().ok()?, ProcessInfo::from_json(p).threads)))
        .flat_map(|(pid, threads)| threads.into_iter().map(move |(tid, n)| ((pid, tid), n)))
        .collect()
}
