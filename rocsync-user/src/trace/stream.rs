//! The live output path: calls released in correlation order are resolved and written as
//! the capture runs, so memory holds only what is in flight or not yet in order.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap, VecDeque},
    io::{self, Write},
};

use super::{
    kineto::{KinetoWriter, Position, TraceInfo},
    raw,
};
use crate::{
    capture::sequence::Released,
    resolve::{Resolver, Row, SyncKind},
};

pub struct TraceStream<W: Write, R: Write> {
    resolver: Resolver,
    kineto: KinetoWriter<W>,
    raw: Option<R>,
    /// Rows of calls released while still in flight, until their record arrives.
    deferred: HashMap<(u32, u64), Row>,
    /// Calls and failed calls per API, for the summary.
    pub per_api: BTreeMap<&'static str, (u64, u64)>,
    pub calls: u64,
    /// AQL packets per type, for the summary.
    pub packets: BTreeMap<&'static str, u64>,
    /// Records that arrived after their place in the order had been passed.
    pub late: u64,
    pids: BTreeSet<u32>,
    last_ns: u64,
    /// Barrier packets each thread submitted lately: (doorbell ns, row position).
    barriers: HashMap<(u32, u32), VecDeque<(u64, Position)>>,
}

/// Barriers remembered per thread for the call that submitted them.
const RECENT_BARRIERS: usize = 64;

/// The closed outputs of a stream.
pub struct Finished<W, R> {
    pub trace: W,
    pub raw: Option<R>,
    /// Calls written without a return: still in flight at the end.
    pub in_flight: u64,
}

impl<W: Write, R: Write> TraceStream<W, R> {
    pub fn new(kineto: KinetoWriter<W>, raw: Option<R>) -> Self {
        Self {
            resolver: Resolver::default(),
            kineto,
            raw,
            deferred: HashMap::new(),
            per_api: BTreeMap::new(),
            calls: 0,
            packets: BTreeMap::new(),
            late: 0,
            pids: BTreeSet::new(),
            barriers: HashMap::new(),
            last_ns: 0,
        }
    }

    /// Processes seen so far.
    pub fn pids(&self) -> impl Iterator<Item = u32> + '_ {
        self.pids.iter().copied()
    }

    /// An HSA queue created or destroyed.
    pub fn queue(&mut self, q: &rocsync_common::QueueRecord) {
        self.pids.insert(q.pid);
        self.kineto.queue(q);
    }

    /// An AQL packet published at a doorbell. A barrier is remembered for the call that
    /// submitted it (same thread, inside the call's window), which is written later.
    pub fn packet(&mut self, p: &rocsync_common::PacketRecord) -> io::Result<()> {
        let kind = super::packet::decode(&p.packet).kind.name();
        *self.packets.entry(kind).or_default() += 1;
        if let Some((at, true)) = self.kineto.packet(p)? {
            let recent = self.barriers.entry((p.pid, p.tid)).or_default();
            if recent.len() == RECENT_BARRIERS {
                recent.pop_front();
            }
            recent.push_back((p.ns, at));
        }
        Ok(())
    }

    pub fn waits(&self) -> (u64, u64) {
        (self.resolver.waits_resolved, self.resolver.waits_unresolved)
    }

    pub fn released(&mut self, r: Released) -> io::Result<()> {
        match r {
            Released::Call(c) => {
                let row = self.resolver.push(&c);
                self.write(row)
            }
            Released::Deferred(c) => {
                let row = self.resolver.push(&c);
                self.deferred.insert((c.pid, c.correlation), row);
                Ok(())
            }
            Released::Completion(c) => {
                let row = match self.deferred.remove(&(c.pid, c.correlation)) {
                    Some(row) => Row { call: c, ..row },
                    None => {
                        self.late += 1;
                        self.resolver.push(&c)
                    }
                };
                self.write(row)
            }
        }
    }

    fn write(&mut self, row: Row) -> io::Result<()> {
        let c = &row.call;
        self.calls += 1;
        self.pids.insert(c.pid);
        let e = self.per_api.entry(c.api.symbol()).or_default();
        e.0 += 1;
        if !c.ok() {
            e.1 += 1;
        }
        self.last_ns = self.last_ns.max(c.exit_ns.unwrap_or(c.enter_ns));
        if let Some(raw) = &mut self.raw {
            raw::write_call(raw, c)?;
        }
        self.kineto.row(&row, self.last_ns)?;
        if row.sync == Some(SyncKind::StreamWaitEvent)
            && let Some(exit) = c.exit_ns
            && let Some(recent) = self.barriers.get(&(c.pid, c.tid))
            && let Some(&(_, at)) = recent
                .iter()
                .find(|(ns, _)| (c.enter_ns..=exit).contains(ns))
        {
            self.kineto.link(c, self.last_ns, at)?;
        }
        Ok(())
    }

    /// Writes the calls still in flight and closes both outputs.
    pub fn finish(
        mut self,
        info: &TraceInfo<'_>,
        raw_end: &raw::Trailer,
    ) -> io::Result<Finished<W, R>> {
        let mut rest: Vec<Row> = self.deferred.drain().map(|(_, r)| r).collect();
        rest.sort_by_key(|r| r.call.correlation);
        let in_flight = rest.len() as u64;
        for row in rest {
            self.write(row)?;
        }
        if let Some(raw) = &mut self.raw {
            raw::write_trailer(raw, raw_end)?;
        }
        let trace = self.kineto.finish(info)?;
        Ok(Finished {
            trace,
            raw: self.raw,
            in_flight,
        })
    }
}
