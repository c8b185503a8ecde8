//! Driving the one pipeline from tests, without a kernel: calls in, rows or a trace out.

use std::{collections::BTreeMap, io};

use rocsync::calls::{
    emit::{
        Sink, Tee,
        kineto::{KinetoWriter, TraceInfo},
        raw::RawWriter,
    },
    ingest::{Call, Packet, Queue},
    pipeline::Pipeline,
    resolve::Row,
};
use rocsync_common::{Api, EntryRecord, ExitRecord, RECORD_ENTRY, RECORD_EXIT};
use serde_json::Value;

pub(crate) fn call_in(
    pid: u32,
    tid: u32,
    correlation: u64,
    api: Api,
    args: [u64; 3],
    ret: i64,
) -> Call {
    Call {
        api,
        pid,
        tid,
        correlation,
        enter_ns: 1_000_000 + correlation * 1000,
        exit_ns: Some(1_000_000 + correlation * 1000 + 500),
        ret: Some(ret),
        args,
        filtered: false,
    }
}

/// Every row the pipeline writes, in the order it writes them.
#[derive(Default)]
pub(crate) struct Rows(pub Vec<Row>);

impl Sink for Rows {
    fn row(&mut self, row: &Row) -> io::Result<()> {
        self.0.push(*row);
        Ok(())
    }
    fn deferred(&mut self, _: &Row) -> io::Result<()> {
        Ok(())
    }
    fn completed(&mut self, row: &Row) -> io::Result<()> {
        self.0.push(*row);
        Ok(())
    }
    fn lost(&mut self, _: u64, _: u64) -> io::Result<()> {
        Ok(())
    }
    fn queue(&mut self, _: &Queue) -> io::Result<()> {
        Ok(())
    }
    fn packet(&mut self, _: &Packet) -> io::Result<()> {
        Ok(())
    }
}

/// Rows for complete calls delivered in any order with dense correlation ids (a missing
/// id is a lost record).
pub(crate) fn rows_in_any_order(calls: &[Call]) -> Vec<Row> {
    let mut p = Pipeline::new(Rows::default(), true);
    for c in calls {
        p.call(*c);
    }
    p.finish().expect("in memory").0.0
}

/// The trace of complete calls delivered in any order (a missing correlation id is a
/// lost record), parsed back.
pub(crate) fn trace(calls: &[Call]) -> Value {
    let mut p = Pipeline::new(writer(), true);
    for c in calls {
        p.call(*c);
    }
    finish(p)
}

pub(crate) type TestSink = Tee<KinetoWriter<Vec<u8>>, RawWriter<io::Sink>>;

pub(crate) fn writer() -> TestSink {
    Tee::new(
        KinetoWriter::new(Vec::new(), 1_700_000_000_000_000_000, 0).unwrap(),
        None,
    )
}

/// Closes a test pipeline's trace and parses it.
pub(crate) fn finish(p: Pipeline<TestSink>) -> Value {
    let (sink, stats) = p.finish().unwrap();
    let (w, _, _) = sink.into_parts();
    let names = BTreeMap::new();
    let info = TraceInfo {
        process_names: &names,
        rocsync: stats.to_json(),
        distributed: serde_json::json!({ "rank": 0 }),
        trace_name: "t.json",
    };
    let out = w.finish(&info).unwrap();
    serde_json::from_slice(&out).expect("valid JSON")
}

/// The process of the records below.
pub(crate) const PID: u32 = 77;

/// An entry record of `PID`, entered at `1 000 × corr` ns.
pub(crate) fn entry(corr: u64, tid: u32, api: Api, args: [u64; 3]) -> EntryRecord {
    EntryRecord {
        kind: RECORD_ENTRY,
        pid: PID,
        tid,
        api: api as u16,
        correlation: corr,
        enter_ns: 1_000 * corr,
        args,
        ..Default::default()
    }
}

/// An exit record of `PID`.
pub(crate) fn exit(tid: u32, api: Api, ns: u64, ret: i64) -> ExitRecord {
    ExitRecord {
        kind: RECORD_EXIT,
        pid: PID,
        tid,
        api: api as u32,
        exit_ns: ns,
        ret,
        ..Default::default()
    }
}

/// A call that enters and returns at once, through both records.
pub(crate) fn both<S: rocsync::calls::emit::Sink>(
    p: &mut Pipeline<S>,
    corr: u64,
    tid: u32,
    api: Api,
    args: [u64; 3],
) {
    p.entry(&entry(corr, tid, api, args));
    p.exit(&exit(tid, api, 1_000 * corr + 500, 0));
}
