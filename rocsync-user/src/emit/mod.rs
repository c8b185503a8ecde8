//! Emit: resolved rows, queues and packets into the outputs — the Kineto trace, the raw
//! JSON Lines capture, the files they live in, and the summary. Knows nothing of probes.

pub mod files;
pub mod json;
pub mod kineto;
pub mod outputs;
pub mod processes;
pub mod raw;
pub mod summary;

use std::io;

use crate::{
    ingest::{Packet, Queue},
    resolve::Row,
};

/// Where the pipeline delivers what it resolved, in the order it resolved it.
pub trait Sink {
    /// A call at its place in the correlation order, returned (or known never to).
    fn row(&mut self, row: &Row) -> io::Result<()>;
    /// A call released at its place while still in flight; [`Sink::completed`] follows.
    fn deferred(&mut self, row: &Row) -> io::Result<()>;
    /// A deferred call returned (`exit_ns` set) or, at the end of the capture, never did.
    fn completed(&mut self, row: &Row) -> io::Result<()>;
    /// `count` correlation ids from `first` never arrived.
    fn lost(&mut self, first: u64, count: u64) -> io::Result<()>;
    fn queue(&mut self, q: &Queue) -> io::Result<()>;
    fn packet(&mut self, p: &Packet) -> io::Result<()>;
}

/// Both outputs of a capture: the trace and, if asked for, the raw capture.
pub struct Tee<A, B>(pub A, pub Option<B>);

impl<A: Sink, B: Sink> Sink for Tee<A, B> {
    fn row(&mut self, row: &Row) -> io::Result<()> {
        if let Some(b) = &mut self.1 {
            b.row(row)?;
        }
        self.0.row(row)
    }
    fn deferred(&mut self, row: &Row) -> io::Result<()> {
        if let Some(b) = &mut self.1 {
            b.deferred(row)?;
        }
        self.0.deferred(row)
    }
    fn completed(&mut self, row: &Row) -> io::Result<()> {
        if let Some(b) = &mut self.1 {
            b.completed(row)?;
        }
        self.0.completed(row)
    }
    fn lost(&mut self, first: u64, count: u64) -> io::Result<()> {
        if let Some(b) = &mut self.1 {
            b.lost(first, count)?;
        }
        self.0.lost(first, count)
    }
    fn queue(&mut self, q: &Queue) -> io::Result<()> {
        if let Some(b) = &mut self.1 {
            b.queue(q)?;
        }
        self.0.queue(q)
    }
    fn packet(&mut self, p: &Packet) -> io::Result<()> {
        if let Some(b) = &mut self.1 {
            b.packet(p)?;
        }
        self.0.packet(p)
    }
}
