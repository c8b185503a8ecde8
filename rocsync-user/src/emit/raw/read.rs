//! Reading a raw capture back, one line at a time: memory stays bounded by one line
//! (capped, so a hostile file cannot make rocsync allocate its size), whatever the file's.

use std::io::BufRead;

use anyhow::{Context as _, Result, anyhow, bail};
use rocsync_common::Api;
use serde_json::Value;

use super::{Header, Trailer};
use crate::{
    ingest::{
        Call, Packet, Queue,
        model::{ArgKind, arg_kind},
        sequence::Exit,
    },
    stats::KernelDrops,
};

/// The longest line accepted (a packet line is ~400 bytes).
pub const MAX_LINE: usize = 64 << 10;

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
}

impl<R: BufRead> Reader<R> {
    /// Reads the header line.
    pub fn new(input: R) -> Result<Self> {
        let mut r = Self {
            input,
            line: Vec::new(),
            n: 0,
            header: Header::default(),
        };
        let v = r.next_value()?.ok_or_else(|| anyhow!("empty file"))?;
        let h = v
            .get("rocsync_raw")
            .ok_or_else(|| anyhow!("line 1: no rocsync_raw header"))?;
        r.header = parse_header(h).context("line 1: bad header")?;
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
            let v = serde_json::from_slice(&self.line)
                .with_context(|| format!("line {n}: not valid JSON"))?;
            return Ok(Some(v));
        }
    }

    /// The next item, `None` at the end. Every malformed line is an error naming it.
    pub fn next_item(&mut self) -> Result<Option<Item>> {
        let Some(v) = self.next_value()? else {
            return Ok(None);
        };
        let n = self.n;
        parse_item(&v)
            .map(Some)
            .with_context(|| format!("line {n}"))
    }
}

fn parse_item(v: &Value) -> Result<Item> {
    if v.get("rocsync_raw").is_some() {
        bail!("a header may only be the first line");
    }
    if let Some(t) = v.get("rocsync_raw_end") {
        return Ok(Item::Trailer(parse_trailer(t)?));
    }
    if let Some(c) = v.get("completion") {
        let exit = Exit {
            exit_ns: uint(c, "exit_ns")?,
            ret: int(c, "ret")?,
            out: None,
        };
        return Ok(Item::Completion(uint(c, "correlation")?, exit));
    }
    if let Some(l) = v.get("lost") {
        let first = l.as_u64().ok_or_else(|| anyhow!("\"lost\" is not an id"))?;
        let count = match v.get("count") {
            Some(c) => c
                .as_u64()
                .ok_or_else(|| anyhow!("\"count\" is not a number"))?,
            None => 1,
        };
        return Ok(Item::Lost(first, count));
    }
    if let Some(q) = v.get("queue") {
        return Ok(Item::Queue(Queue {
            pid: uint32(q, "pid")?,
            tid: uint32(q, "tid")?,
            created: q["created"].as_bool().unwrap_or(false),
            discovered: q["discovered"].as_bool().unwrap_or(false),
            queue: handle(q, "queue")?,
            agent: handle(q, "agent")?,
            base: handle(q, "base")?,
            doorbell: handle(q, "doorbell")?,
            id: uint(q, "id")?,
            size: uint32(q, "size")?,
            ordinal: uint32(q, "ordinal")?,
            ns: uint(q, "ns")?,
        }));
    }
    if let Some(p) = v.get("packet") {
        let text = p["bytes"]
            .as_str()
            .filter(|s| s.len() == 128 && s.is_ascii())
            .ok_or_else(|| anyhow!("\"bytes\" is not 64 bytes of hex"))?;
        let mut bytes = [0u8; 64];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = u8::from_str_radix(&text[2 * i..2 * i + 2], 16)
                .map_err(|_| anyhow!("\"bytes\" is not hex"))?;
        }
        return Ok(Item::Packet(Packet {
            pid: uint32(p, "pid")?,
            tid: uint32(p, "tid")?,
            ordinal: uint32(p, "ordinal")?,
            queue: handle(p, "queue")?,
            agent: handle(p, "agent")?,
            index: uint(p, "index")?,
            ns: uint(p, "ns")?,
            bytes,
        }));
    }
    let call = parse_call(v).context("not a rocsync call")?;
    let flag = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
    Ok(Item::Call {
        call: Call {
            filtered: flag("filtered"),
            ..call
        },
        deferred: flag("deferred"),
        late: flag("late"),
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

fn parse_header(h: &Value) -> Result<Header> {
    Ok(Header {
        clock_offset_ns: h["clock_offset_ns"]
            .as_i64()
            .ok_or_else(|| anyhow!("clock_offset_ns"))?,
        start_ns: h["start_ns"].as_u64().unwrap_or(0),
        command: h["command"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default(),
        from_start: h["from_start"].as_bool().unwrap_or(false),
    })
}

fn parse_trailer(t: &Value) -> Result<Trailer> {
    // Every count is written; one that is not a count is an error, never taken as none
    // lost. (An absent one reads as 0.)
    let n = |k: &str| match t.get(k) {
        None => Ok(0),
        Some(x) => x
            .as_u64()
            .ok_or_else(|| anyhow!("trailer: \"{k}\" is not a count")),
    };
    Ok(Trailer {
        kernel: KernelDrops {
            entries: n("entry_records")?,
            exits: n("exit_records")?,
            library_loads: n("library_loads")?,
            queues: n("queue_records")?,
            packets: n("packet_records")?,
            packets_truncated: n("packets_truncated")?,
            out_params: n("out_params")?,
            packets_unread: n("packets_unread")?,
            get_device_unrecorded: n("get_device_calls_not_recorded")?,
        },
        unpaired_entries: n("unpaired_entries")?,
        unpaired_exits: n("unpaired_exits")?,
        undecodable: n("undecodable")?,
        processes: processes(t.get("processes"))?,
    })
}

/// What the traced processes said of themselves, as written:
/// `{"<pid>": {"name": "…", "distributedInfo": {…} or null}}`, or null.
fn processes(v: Option<&Value>) -> Result<Value> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(Value::Null);
    };
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
        });
        if !known {
            bail!(
                "trailer: process {pid} is not {{\"name\": string, \"distributedInfo\": object}}"
            );
        }
    }
    Ok(v.clone())
}

fn field<'a>(v: &'a Value, k: &str) -> Result<&'a Value> {
    v.get(k).ok_or_else(|| anyhow!("missing \"{k}\""))
}

fn uint(v: &Value, k: &str) -> Result<u64> {
    field(v, k)?
        .as_u64()
        .ok_or_else(|| anyhow!("\"{k}\" is not an unsigned integer"))
}

fn uint32(v: &Value, k: &str) -> Result<u32> {
    u32::try_from(uint(v, k)?).map_err(|_| anyhow!("\"{k}\" is past 32 bits"))
}

fn int(v: &Value, k: &str) -> Result<i64> {
    field(v, k)?
        .as_i64()
        .ok_or_else(|| anyhow!("\"{k}\" is not an integer"))
}

fn handle(v: &Value, k: &str) -> Result<u64> {
    field(v, k)?
        .as_str()
        .and_then(|s| s.strip_prefix("0x"))
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .ok_or_else(|| anyhow!("\"{k}\" is not a \"0x…\" handle"))
}

fn parse_call(v: &Value) -> Result<Call> {
    let name = field(v, "api")?
        .as_str()
        .ok_or_else(|| anyhow!("\"api\" is not a string"))?;
    let api = *Api::ALL
        .iter()
        .find(|a| a.symbol() == name)
        .ok_or_else(|| anyhow!("unknown API {name:?}"))?;
    let opt = |k: &str| -> Result<Option<&Value>> {
        let x = field(v, k)?;
        Ok((!x.is_null()).then_some(x))
    };
    let exit_ns = opt("exit_ns")?
        .map(|x| {
            x.as_u64()
                .ok_or_else(|| anyhow!("\"exit_ns\" is not an integer"))
        })
        .transpose()?;
    let ret = opt("ret")?
        .map(|x| {
            x.as_i64()
                .ok_or_else(|| anyhow!("\"ret\" is not an integer"))
        })
        .transpose()?;
    let args_v = field(v, "args")?;
    let mut args = [0u64; 3];
    for (i, name) in api.arg_names().iter().enumerate() {
        let a = args_v
            .get(name)
            .ok_or_else(|| anyhow!("missing argument \"{name}\""))?;
        args[i] = match arg_kind(name) {
            ArgKind::Handle => a
                .as_str()
                .and_then(|s| s.strip_prefix("0x"))
                .and_then(|h| u64::from_str_radix(h, 16).ok())
                .ok_or_else(|| anyhow!("argument \"{name}\" is not a \"0x…\" handle"))?,
            ArgKind::Unsigned => a
                .as_u64()
                .filter(|&x| x <= u32::MAX as u64)
                .ok_or_else(|| anyhow!("argument \"{name}\" is not an unsigned int"))?,
            ArgKind::Signed => a
                .as_i64()
                .and_then(|x| i32::try_from(x).ok())
                .map(|x| x as u64)
                .ok_or_else(|| anyhow!("argument \"{name}\" is not an int"))?,
        };
    }
    let enter_ns = uint(v, "enter_ns")?;
    if exit_ns.is_some_and(|x| x < enter_ns) {
        bail!("\"exit_ns\" is before \"enter_ns\"");
    }
    Ok(Call {
        api,
        pid: uint32(v, "pid")?,
        tid: uint32(v, "tid")?,
        correlation: uint(v, "correlation")?,
        enter_ns,
        exit_ns,
        ret,
        args,
        filtered: false,
    })
}
