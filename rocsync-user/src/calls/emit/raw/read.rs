//! Reading a raw capture back, one line at a time: memory stays bounded by one line
//! (capped, so a hostile file cannot make rocsync allocate its size), whatever the file's.

use std::io::BufRead;

use anyhow::{Context as _, Result, anyhow, bail};
use serde_json::{Map, Value};

use super::{
    ends::{Header, Trailer},
    fields::from_object,
    format::{
        COMPLETION, CallLine, CompletionBody, HEADER, HeaderBody, LOST, LostLine, PACKET,
        PacketBody, QUEUE, QueueBody, TRAILER, TrailerBody,
    },
};
use crate::calls::{
    ingest::{Call, Packet, Queue, sequence::Exit},
    stats::KernelDrops,
};

/// The longest line accepted (a packet line is ~400 bytes).
pub(super) const MAX_LINE: usize = 64 << 10;

/// One line of a raw capture after the header.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// A call at its place in the order; `deferred` when it was released in flight.
    Call {
        call: Call,
        deferred: bool,
        late: bool,
    },
    Completion(u64, Exit),
    /// `count` correlation ids from the first never arrived.
    Lost(u64, u64),
    Queue(Queue),
    Packet(Packet),
    Trailer(Trailer),
}

pub struct Reader<R: BufRead> {
    input: R,
    line: Vec<u8>,
    n: usize,
    pub header: Header,
    /// The file ended inside a line that does not parse: cut short there.
    cut: bool,
}

impl<R: BufRead> Reader<R> {
    /// Reads the header line.
    pub fn new(input: R) -> Result<Self> {
        let mut r = Self {
            input,
            line: Vec::new(),
            n: 0,
            header: Header::default(),
            cut: false,
        };
        let mut v = r.next_value()?.ok_or_else(|| anyhow!("empty file"))?;
        let h = take(&mut v, HEADER).ok_or_else(|| anyhow!("line 1: no rocsync_raw header"))?;
        let h: HeaderBody = from_object(h).context("line 1: bad header")?;
        r.header = Header {
            clock_offset_ns: h.clock_offset_ns,
            start_ns: h.start_ns,
            command: h.command,
            from_start: h.from_start,
        };
        Ok(r)
    }

    fn next_value(&mut self) -> Result<Option<Value>> {
        loop {
            self.line.clear();
            self.n += 1;
            let n = self.n;
            let mut limited = std::io::Read::take(&mut self.input, MAX_LINE as u64 + 1);
            let read = limited
                .read_until(b'\n', &mut self.line)
                .with_context(|| format!("reading line {n}"))?;
            if read == 0 {
                return Ok(None);
            }
            if self.line.len() > MAX_LINE {
                bail!("line {n}: longer than {MAX_LINE} bytes");
            }
            if self.line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let v = serde_json::from_slice(&self.line);
            // A capture cut short (killed, its disk full) may end inside a line: the end.
            if v.is_err() && self.line.last() != Some(&b'\n') && n > 1 {
                self.cut = true;
                return Ok(None);
            }
            return v
                .map(Some)
                .with_context(|| format!("line {n}: not valid JSON"));
        }
    }

    /// The line the file ended in the middle of, if it did (after `None`).
    pub fn cut_at(&self) -> Option<usize> {
        self.cut.then_some(self.n)
    }

    /// The next item, `None` at the end. Every malformed line is an error naming it.
    pub fn next_item(&mut self) -> Result<Option<Item>> {
        let Some(v) = self.next_value()? else {
            return Ok(None);
        };
        let n = self.n;
        let item = parse_item(v).with_context(|| format!("line {n}"))?;
        let times = match &item {
            Item::Call { call, .. } => vec![call.enter_ns, call.exit_ns.unwrap_or(call.enter_ns)],
            Item::Completion(_, exit) => vec![exit.exit_ns],
            _ => Vec::new(),
        };
        for ns in times {
            self.check_time(ns).with_context(|| format!("line {n}"))?;
        }
        Ok(Some(item))
    }

    /// A time the trace can be written at: with the header's clock offset, within 2^62
    /// ns (146 years) of 1970 (a damaged or hand-made file may say anything; beyond,
    /// rows would be written with negative or wrapped durations).
    fn check_time(&self, mono_ns: u64) -> Result<()> {
        let offset = self.header.clock_offset_ns;
        let wall = i128::from(mono_ns) + i128::from(offset);
        if wall.abs() > MAX_WALL_NS {
            bail!(
                "a time of {mono_ns} ns with clock_offset_ns {offset} is no date rocsync can write (more than 146 years from 1970): the file is damaged or hand-made"
            );
        }
        Ok(())
    }
}

/// The farthest wall-clock time (ns from 1970) a trace is written at: 2^62 (2116).
const MAX_WALL_NS: i128 = 1 << 62;

/// The value under `key`, when `v` is an object that has it.
fn take(v: &mut Value, key: &str) -> Option<Value> {
    v.as_object_mut()?.remove(key)
}

/// A line is known by the first of these keys it has, else it is a call.
fn parse_item(mut v: Value) -> Result<Item> {
    if v.get(HEADER).is_some() {
        bail!("a header may only be the first line");
    }
    if let Some(t) = take(&mut v, TRAILER) {
        // As ever: a trailer that is not an object has no counts.
        let t = if t.is_object() {
            t
        } else {
            Value::Object(Map::new())
        };
        return Ok(Item::Trailer(trailer(from_object(t).context("trailer")?)?));
    }
    if let Some(c) = take(&mut v, COMPLETION) {
        let c: CompletionBody = from_object(c)?;
        let exit = Exit {
            exit_ns: c.exit_ns,
            ret: c.ret,
            out: None,
        };
        return Ok(Item::Completion(c.correlation, exit));
    }
    if v.get(LOST).is_some() {
        let l: LostLine = from_object(v)?;
        return Ok(Item::Lost(l.lost, l.count));
    }
    if let Some(q) = take(&mut v, QUEUE) {
        return Ok(Item::Queue(from_object::<QueueBody>(q)?.into()));
    }
    if let Some(p) = take(&mut v, PACKET) {
        return Ok(Item::Packet(from_object::<PacketBody>(p)?.into()));
    }
    let line: CallLine = from_object(v).context("not a rocsync call")?;
    let (call, deferred, late) = line.call().context("not a rocsync call")?;
    Ok(Item::Call {
        call,
        deferred,
        late,
    })
}

/// Reads a whole raw capture as the calls it writes (filtered calls left out), completions
/// merged (tests and small files).
pub fn read_calls(input: impl BufRead) -> Result<(Header, Vec<Call>)> {
    let mut r = Reader::new(input)?;
    let mut calls: Vec<Call> = Vec::new();
    let mut at = std::collections::HashMap::new();
    while let Some(item) = r.next_item()? {
        match item {
            Item::Call { call, .. } if !call.filtered => {
                at.insert(call.correlation, calls.len());
                calls.push(call);
            }
            Item::Completion(corr, exit) => {
                if let Some(&i) = at.get(&corr) {
                    exit.apply(&mut calls[i]);
                }
            }
            _ => {}
        }
    }
    Ok((r.header, calls))
}

fn trailer(t: TrailerBody) -> Result<Trailer> {
    Ok(Trailer {
        kernel: KernelDrops {
            entries: t.entry_records,
            exits: t.exit_records,
            library_loads: t.library_loads,
            queues: t.queue_records,
            packets: t.packet_records,
            packets_truncated: t.packets_truncated,
            out_params: t.out_params,
            packets_unread: t.packets_unread,
            get_device_unrecorded: t.get_device_calls_not_recorded,
            comm_state: t.comm_state,
            thread_names: t.thread_names,
        },
        unpaired_entries: t.unpaired_entries,
        unpaired_exits: t.unpaired_exits,
        calls_begun_before: t.calls_begun_before,
        undecodable: t.undecodable,
        processes: processes(t.processes)?,
    })
}

/// What the traced processes said of themselves, as written:
/// `{"<pid>": {"name": "…", "distributedInfo": {…} or null, "threads": {"<tid>": "…"}}}`
/// (threads only where named), or null.
fn processes(v: Value) -> Result<Value> {
    if v.is_null() {
        return Ok(Value::Null);
    }
    let all = v
        .as_object()
        .ok_or_else(|| anyhow!("trailer: \"processes\" is not an object"))?;
    for (pid, p) in all {
        pid.parse::<u32>()
            .map_err(|_| anyhow!("trailer: process {pid:?} is not a pid"))?;
        let known = p.as_object().is_some_and(|p| {
            p.get("name").is_none_or(Value::is_string)
                && p.get("distributedInfo")
                    .is_none_or(|d| d.is_object() || d.is_null())
                && p.get("threads").is_none_or(|t| {
                    t.as_object().is_some_and(|t| {
                        t.iter()
                            .all(|(tid, n)| tid.parse::<u32>().is_ok() && n.is_string())
                    })
                })
        });
        if !known {
            bail!(
                "trailer: process {pid} is not {{\"name\": string, \"distributedInfo\": object, \"threads\": {{\"TID\": string}}}}"
            );
        }
    }
    Ok(v)
}
