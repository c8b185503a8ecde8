//! A raw capture (`--raw`) replayed through the same resolve stage as `convert`, into the
//! report's [`Capture`].

use std::{
    collections::BTreeMap,
    io::{self, BufRead},
};

use anyhow::{Context as _, Result};
use rocsync_common::Op;

use super::{
    capture::{Capture, Observed, Produced},
    held::{Held, Refused},
};
use crate::{
    emit::{
        Sink,
        raw::{Item, Reader},
    },
    ingest::{Packet, Queue},
    pipeline::Pipeline,
    resolve::Row,
};

/// Whether the file starts as a raw capture does (its header line).
pub fn looks_raw(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(&head[..head.len().min(64)]);
    text.trim_start()
        .trim_start_matches('{')
        .trim_start()
        .starts_with(&format!("\"{}\"", crate::emit::raw::HEADER_KEY))
}

pub fn read(input: impl BufRead) -> Result<Capture> {
    read_within(input, crate::input::MAX_HELD)
}

fn read_within(input: impl BufRead, max_held: u64) -> Result<Capture> {
    let mut reader = Reader::new(input)?;
    let collect = Collect {
        capture: Capture::default(),
        held: Held::new(max_held),
        past: BTreeMap::new(),
    };
    let mut pipeline = Pipeline::new(collect, reader.header.from_start);
    let mut trailer = false;
    while let Some(item) = reader.next_item()? {
        trailer |= matches!(item, Item::Trailer(_));
        pipeline.replay(item);
    }
    let (collect, stats) = pipeline.finish().context("replaying the capture")?;
    let mut capture = collect.capture;
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
}

impl Collect {
    fn take(&mut self, r: &Row) {
        let c = &r.call;
        // The trace leaves these out (filtered by --agents, device selection): so does
        // the report, so that a trace and its raw capture report alike.
        if c.filtered || matches!(c.api.op(), Op::SetDevice | Op::GetDevice) {
            return;
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
            producer: r.producer.map(|p| Produced {
                correlation: p.correlation,
                stream: p.stream,
                tid: p.tid,
                record_ns: i64::try_from(p.mid_ns).unwrap_or(i64::MAX),
            }),
            unresolved,
        });
    }
}

impl Sink for Collect {
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
    fn queue(&mut self, _q: &Queue) -> io::Result<()> {
        Ok(())
    }
    fn packet(&mut self, _p: &Packet) -> io::Result<()> {
        Ok(())
    }
}
