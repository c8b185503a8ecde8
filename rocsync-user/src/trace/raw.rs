//! Raw JSON Lines: one object per call, the debugging and replay format.
//!
//! The first line is a header object (`{"rocsync_raw": {...}}`) carrying what a later
//! conversion needs (the clock offset); every other line is one call.

use std::io::{self, BufRead, Write};

use anyhow::{Context as _, Result, anyhow, bail};
use rocsync_common::Api;
use serde_json::Value;

use super::call::{ArgKind, Call, arg_kind};

/// Capture facts a conversion needs besides the calls.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Header {
    /// CLOCK_REALTIME − CLOCK_MONOTONIC at capture start, ns.
    pub clock_offset_ns: i64,
    pub command: Vec<String>,
    pub drops: u64,
}

pub fn write_header(out: &mut (impl Write + ?Sized), h: &Header) -> io::Result<()> {
    let v = serde_json::json!({ "rocsync_raw": {
        "version": env!("CARGO_PKG_VERSION"),
        "clock_offset_ns": h.clock_offset_ns,
        "command": h.command,
        "drops": h.drops,
    }});
    writeln!(out, "{v}")
}

/// The last line of a raw capture: what is known only at its end.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trailer {
    pub drops: u64,
}

pub fn write_trailer(out: &mut (impl Write + ?Sized), t: &Trailer) -> io::Result<()> {
    writeln!(
        out,
        "{}",
        serde_json::json!({ "rocsync_raw_end": { "drops": t.drops } })
    )
}

pub fn write_call(out: &mut (impl Write + ?Sized), c: &Call) -> io::Result<()> {
    write!(
        out,
        "{{\"api\":\"{}\",\"pid\":{},\"tid\":{},\"correlation\":{},\"enter_ns\":{},",
        c.api.symbol(),
        c.pid,
        c.tid,
        c.correlation,
        c.enter_ns
    )?;
    match c.exit_ns {
        Some(ns) => write!(out, "\"exit_ns\":{ns},")?,
        None => write!(out, "\"exit_ns\":null,")?,
    }
    match c.ret {
        Some(r) => write!(out, "\"ret\":{r},\"args\":{{")?,
        None => write!(out, "\"ret\":null,\"args\":{{")?,
    }
    for (i, name) in c.api.arg_names().iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        let v = c.args[i];
        match arg_kind(name) {
            ArgKind::Handle => write!(out, "{sep}\"{name}\":\"{v:#x}\"")?,
            ArgKind::Unsigned => write!(out, "{sep}\"{name}\":{}", v as u32)?,
            ArgKind::Signed => write!(out, "{sep}\"{name}\":{}", v as i32)?,
        }
    }
    writeln!(out, "}}}}")
}

/// Reads a raw capture. Every malformed line is an error naming its line number.
pub fn read(input: impl BufRead) -> Result<(Header, Vec<Call>)> {
    let mut header = Header::default();
    let mut calls = Vec::new();
    for (i, line) in input.lines().enumerate() {
        let n = i + 1;
        let line = line.with_context(|| format!("reading line {n}"))?;
        if line.trim().is_empty() {
            continue;
        }
        let v: Value =
            serde_json::from_str(&line).with_context(|| format!("line {n}: not valid JSON"))?;
        if let Some(t) = v.get("rocsync_raw_end") {
            header.drops += t["drops"].as_u64().unwrap_or(0);
            continue;
        }
        if let Some(h) = v.get("rocsync_raw") {
            if n != 1 {
                bail!("line {n}: a header may only be the first line");
            }
            header = parse_header(h).with_context(|| format!("line {n}: bad header"))?;
            continue;
        }
        calls.push(parse_call(&v).with_context(|| format!("line {n}: not a rocsync call"))?);
    }
    Ok((header, calls))
}

fn parse_header(h: &Value) -> Result<Header> {
    Ok(Header {
        clock_offset_ns: h["clock_offset_ns"]
            .as_i64()
            .ok_or_else(|| anyhow!("clock_offset_ns"))?,
        command: h["command"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default(),
        drops: h["drops"].as_u64().unwrap_or(0),
    })
}

fn parse_call(v: &Value) -> Result<Call> {
    let field = |k: &str| v.get(k).ok_or_else(|| anyhow!("missing \"{k}\""));
    let uint = |k: &str| -> Result<u64> {
        field(k)?
            .as_u64()
            .ok_or_else(|| anyhow!("\"{k}\" is not an unsigned integer"))
    };
    let name = field("api")?
        .as_str()
        .ok_or_else(|| anyhow!("\"api\" is not a string"))?;
    let api = *Api::ALL
        .iter()
        .find(|a| a.symbol() == name)
        .ok_or_else(|| anyhow!("unknown API {name:?}"))?;
    let opt = |k: &str| -> Result<Option<&Value>> {
        let x = field(k)?;
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
    let args_v = field("args")?;
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
            ArgKind::Unsigned | ArgKind::Signed => a
                .as_i64()
                .map(|x| x as u64)
                .ok_or_else(|| anyhow!("argument \"{name}\" is not an integer"))?,
        };
        if arg_kind(name) == ArgKind::Signed {
            args[i] = args[i] as i32 as u64;
        }
    }
    Ok(Call {
        api,
        pid: u32::try_from(uint("pid")?)?,
        tid: u32::try_from(uint("tid")?)?,
        correlation: uint("correlation")?,
        enter_ns: uint("enter_ns")?,
        exit_ns,
        ret,
        args,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Call> {
        vec![
            Call {
                api: Api::HipStreamWaitEventSpt,
                pid: 7,
                tid: 8,
                correlation: 3,
                enter_ns: 100,
                exit_ns: Some(150),
                ret: Some(101),
                args: [0x2, 0x55d0c0a01000, 0],
            },
            Call {
                api: Api::HipGetDevice,
                pid: 7,
                tid: 9,
                correlation: 4,
                enter_ns: 200,
                exit_ns: None,
                ret: None,
                args: [(-1i32) as u32 as u64 | 0xffff_ffff_0000_0000, 0, 0],
            },
        ]
    }

    #[test]
    fn writes_the_documented_shape() {
        let mut out = Vec::new();
        write_call(&mut out, &sample()[0]).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["api"], "hipStreamWaitEvent_spt");
        assert_eq!(v["ret"], 101);
        assert_eq!(v["args"]["stream"], "0x2");
        assert_eq!(v["args"]["event"], "0x55d0c0a01000");
        assert_eq!(v["args"]["flags"], 0);
    }

    #[test]
    fn round_trips_through_text() {
        let mut out = Vec::new();
        let h = Header {
            clock_offset_ns: 1_700_000_000_000_000_000,
            command: vec!["x".into()],
            drops: 2,
        };
        write_header(&mut out, &h).unwrap();
        for c in sample() {
            write_call(&mut out, &c).unwrap();
        }
        let (h2, calls) = read(&out[..]).unwrap();
        assert_eq!(h2, h);
        assert_eq!(calls, sample());
        assert_eq!(calls[1].args[0] as i64, -1);
    }

    #[test]
    fn malformed_lines_name_their_line_number() {
        let text = "{\"api\":\"hipDeviceSynchronize\",\"pid\":1,\"tid\":1,\"correlation\":1,\"enter_ns\":1,\"exit_ns\":2,\"ret\":0,\"args\":{}}\n{oops\n";
        let err = format!("{:#}", read(text.as_bytes()).unwrap_err());
        assert!(err.contains("line 2"), "{err}");
        let text = "{\"api\":\"hipNope\",\"pid\":1}\n";
        let err = format!("{:#}", read(text.as_bytes()).unwrap_err());
        assert!(err.contains("line 1") && err.contains("hipNope"), "{err}");
    }
}
