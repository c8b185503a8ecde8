//! Emit: resolved rows, queues and packets into the outputs — the Kineto trace, the raw
//! JSON Lines capture, the files they live in, and the summary. Knows nothing of probes.

pub mod comms;
pub(crate) mod dirs;
pub(crate) mod files;
pub(crate) mod json;
pub mod kineto;
pub(crate) mod outputs;
pub(crate) mod processes;
pub mod raw;
pub(crate) mod stale;
pub(crate) mod summary;

use std::io;

use crate::calls::{
    ingest::{Packet, Queue},
    resolve::Row,
};
use comms::Comm;

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
    /// A communicator of `pid` set up before the capture, known from the probes' state:
    /// its calls' rows name it.
    fn communicator(&mut self, _pid: u32, _handle: u64, _comm: Comm) -> io::Result<()> {
        Ok(())
    }
}

/// Both outputs of a capture: the trace and, if asked for, the raw capture. Each goes on
/// when the other fails (a full disk under one of them): whatever is still written holds
/// the whole capture, and each error is said at the end. The capture stops only when
/// nothing is written any more.
pub struct Tee<A, B> {
    trace: A,
    raw: Option<B>,
    trace_error: Option<io::Error>,
    raw_error: Option<io::Error>,
}

impl<A, B> Tee<A, B> {
    pub fn new(trace: A, raw: Option<B>) -> Self {
        Self {
            trace,
            raw,
            trace_error: None,
            raw_error: None,
        }
    }

    pub fn trace_mut(&mut self) -> &mut A {
        &mut self.trace
    }

    pub fn trace(&self) -> &A {
        &self.trace
    }

    /// The error that stopped the raw capture, if any: it holds what came before, its
    /// last line possibly cut.
    pub fn take_raw_error(&mut self) -> Option<io::Error> {
        self.raw_error.take()
    }

    /// The trace's sink, the raw capture's, and the error that stopped the trace, if any.
    pub fn into_parts(self) -> (A, Option<B>, Option<io::Error>) {
        (self.trace, self.raw, self.trace_error)
    }

    fn both(
        &mut self,
        raw: impl FnOnce(&mut B) -> io::Result<()>,
        trace: impl FnOnce(&mut A) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut failed = None;
        if let Some(b) = &mut self.raw
            && self.raw_error.is_none()
            && let Err(e) = raw(b)
        {
            failed = Some(copy(&e));
            self.raw_error = Some(e);
        }
        if self.trace_error.is_none()
            && let Err(e) = trace(&mut self.trace)
        {
            if self.raw.is_none() {
                return Err(e);
            }
            failed = Some(copy(&e));
            self.trace_error = Some(e);
        }
        // Stopped only when neither output takes anything any more.
        match failed {
            Some(e) if self.trace_error.is_some() && self.raw_error.is_some() => Err(e),
            _ => Ok(()),
        }
    }
}

/// An I/O error said twice (kept for the end, and returned to stop the capture).
fn copy(e: &io::Error) -> io::Error {
    io::Error::new(e.kind(), e.to_string())
}

impl<A: Sink, B: Sink> Sink for Tee<A, B> {
    fn row(&mut self, row: &Row) -> io::Result<()> {
        self.both(|b| b.row(row), |a| a.row(row))
    }
    fn deferred(&mut self, row: &Row) -> io::Result<()> {
        self.both(|b| b.deferred(row), |a| a.deferred(row))
    }
    fn completed(&mut self, row: &Row) -> io::Result<()> {
        self.both(|b| b.completed(row), |a| a.completed(row))
    }
    fn lost(&mut self, first: u64, count: u64) -> io::Result<()> {
        self.both(|b| b.lost(first, count), |a| a.lost(first, count))
    }
    fn queue(&mut self, q: &Queue) -> io::Result<()> {
        self.both(|b| b.queue(q), |a| a.queue(q))
    }
    fn packet(&mut self, p: &Packet) -> io::Result<()> {
        self.both(|b| b.packet(p), |a| a.packet(p))
    }
    fn communicator(&mut self, pid: u32, handle: u64, comm: Comm) -> io::Result<()> {
        self.both(
            |b| b.communicator(pid, handle, comm),
            |a| a.communicator(pid, handle, comm),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts what reaches it; fails from the `fails_from`th item on.
    #[derive(Default)]
    struct Counting {
        seen: usize,
        fails_from: Option<usize>,
    }

    impl Counting {
        fn take(&mut self) -> io::Result<()> {
            self.seen += 1;
            match self.fails_from {
                Some(k) if self.seen >= k => Err(io::Error::other("no space left")),
                _ => Ok(()),
            }
        }
    }

    impl Sink for Counting {
        fn row(&mut self, _: &Row) -> io::Result<()> {
            self.take()
        }
        fn deferred(&mut self, _: &Row) -> io::Result<()> {
            self.take()
        }
        fn completed(&mut self, _: &Row) -> io::Result<()> {
            self.take()
        }
        fn lost(&mut self, _: u64, _: u64) -> io::Result<()> {
            self.take()
        }
        fn queue(&mut self, _: &Queue) -> io::Result<()> {
            self.take()
        }
        fn packet(&mut self, _: &Packet) -> io::Result<()> {
            self.take()
        }
    }

    fn failing_trace() -> Counting {
        Counting {
            fails_from: Some(2),
            ..Default::default()
        }
    }

    #[test]
    fn a_failed_trace_leaves_the_raw_capture_going() {
        let mut tee = Tee::new(failing_trace(), Some(Counting::default()));
        for i in 0..4 {
            tee.lost(i, 1).unwrap();
        }
        let (trace, raw, error) = tee.into_parts();
        assert_eq!(raw.unwrap().seen, 4, "the raw capture took everything");
        assert_eq!(trace.seen, 2, "the trace is left alone once it failed");
        assert_eq!(error.unwrap().to_string(), "no space left");
    }

    #[test]
    fn without_a_raw_capture_the_trace_error_stops_the_capture() {
        let mut tee: Tee<Counting, Counting> = Tee::new(failing_trace(), None);
        tee.lost(0, 1).unwrap();
        assert!(tee.lost(1, 1).is_err());
        assert!(tee.into_parts().2.is_none());
    }

    #[test]
    fn a_failed_raw_capture_leaves_the_trace_going() {
        let mut tee = Tee::new(Counting::default(), Some(failing_trace()));
        for i in 0..4 {
            tee.lost(i, 1).unwrap();
        }
        let error = tee.take_raw_error();
        let (trace, raw, trace_error) = tee.into_parts();
        assert_eq!(trace.seen, 4, "the trace took everything");
        assert_eq!(
            raw.unwrap().seen,
            2,
            "the raw capture is left alone once it failed"
        );
        assert_eq!(error.unwrap().to_string(), "no space left");
        assert!(trace_error.is_none());
    }

    #[test]
    fn the_capture_stops_when_both_outputs_failed() {
        let mut tee = Tee::new(failing_trace(), Some(failing_trace()));
        tee.lost(0, 1).unwrap();
        assert!(tee.lost(1, 1).is_err());
        assert!(tee.take_raw_error().is_some());
        assert!(tee.into_parts().2.is_some());
    }
}
