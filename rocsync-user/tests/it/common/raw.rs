//! The tests' own reading of a raw capture (README: "Raw JSON Lines"), with plain JSON
//! and the tests' own argument table: what rocsync wrote is never read back through
//! rocsync's reader, so a field both its writer and its reader get wrong still shows.

use std::path::Path;

use serde_json::Value;

use super::apis::{is_handle, params};

/// One call line of a raw capture, its deferred return applied.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RawCall {
    pub api: String,
    pub pid: u32,
    pub tid: u32,
    pub correlation: u64,
    pub enter_ns: u64,
    pub exit_ns: Option<u64>,
    pub ret: Option<i64>,
    /// In call order (`apis::params`); handles whole, integers as their 32 bits.
    pub args: [u64; 3],
}

impl RawCall {
    pub(crate) fn ok(&self) -> bool {
        self.ret == Some(0)
    }
}

/// The header object and the calls (filtered ones left out), in file order.
pub(crate) fn read_raw(path: &Path) -> (Value, Vec<RawCall>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let first: Value = serde_json::from_str(lines.next().expect("a header line")).unwrap();
    let header = first["rocsync_raw"].clone();
    assert!(header.is_object(), "first line {first}");
    let mut calls: Vec<RawCall> = Vec::new();
    for (n, l) in lines.enumerate() {
        let v: Value =
            serde_json::from_str(l).unwrap_or_else(|e| panic!("line {}: {e}: {l}", n + 2));
        if let Some(c) = v.get("completion") {
            let corr = c["correlation"].as_u64().unwrap();
            if let Some(call) = calls.iter_mut().rev().find(|k| k.correlation == corr) {
                call.exit_ns = Some(c["exit_ns"].as_u64().unwrap());
                call.ret = Some(c["ret"].as_i64().unwrap());
            }
        } else if v.get("api").is_some() && v.get("filtered") != Some(&Value::Bool(true)) {
            calls.push(call(&v));
        }
    }
    (header, calls)
}

fn call(v: &Value) -> RawCall {
    let api = v["api"].as_str().expect("api is a string").to_string();
    let mut args = [0u64; 3];
    let given = v["args"].as_object().expect("args is an object");
    assert_eq!(given.len(), params(&api).len(), "{v}: arguments");
    for (i, name) in params(&api).iter().enumerate() {
        let a = &given
            .get(*name)
            .unwrap_or_else(|| panic!("{v}: no argument {name}"));
        args[i] = if is_handle(name) {
            handle(a)
        } else {
            a.as_i64().unwrap_or_else(|| panic!("{v}: {name}")) as u64 & 0xffff_ffff
        };
    }
    RawCall {
        api,
        pid: v["pid"].as_u64().unwrap() as u32,
        tid: v["tid"].as_u64().unwrap() as u32,
        correlation: v["correlation"].as_u64().unwrap(),
        enter_ns: v["enter_ns"].as_u64().unwrap(),
        exit_ns: v["exit_ns"].as_u64(),
        ret: v["ret"].as_i64(),
        args,
    }
}

/// A `"0x…"` handle.
pub(crate) fn handle(v: &Value) -> u64 {
    let s = v
        .as_str()
        .unwrap_or_else(|| panic!("handle {v} is not a string"));
    u64::from_str_radix(s.strip_prefix("0x").expect("0x handle"), 16).unwrap()
}

/// A queue or packet line of a raw capture: its agent (queues only), the HIP device it
/// is numbered as, and the thread that made or published it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RawHsa {
    pub agent: Option<u64>,
    pub ordinal: u32,
    pub tid: u32,
}

/// The queues created (not discovered) and the packets of a raw capture, read as plain
/// JSON.
pub(crate) fn read_hsa(path: &Path) -> (Vec<RawHsa>, Vec<RawHsa>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (mut queues, mut packets) = (Vec::new(), Vec::new());
    for l in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(l).unwrap();
        let item = |o: &Value, agent: bool| RawHsa {
            agent: agent.then(|| handle(&o["agent"])),
            ordinal: o["ordinal"].as_u64().unwrap() as u32,
            tid: o["tid"].as_u64().unwrap() as u32,
        };
        if v["queue"]["created"] == true {
            queues.push(item(&v["queue"], true));
        } else if v["packet"].is_object() {
            packets.push(item(&v["packet"], false));
        }
    }
    (queues, packets)
}
