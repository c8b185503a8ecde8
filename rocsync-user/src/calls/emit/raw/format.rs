//! The lines of a raw capture as serde types: the writer and the reader use these same
//! definitions, so the two cannot drift. Field order is the bytes' order: the lines once
//! built with `json!` (header, trailer, queue, packet) have their keys sorted, as
//! serde_json's map (no `preserve_order`) sorted them; the others keep their written order.

use anyhow::{Result, anyhow, bail};
use rocsync_common::Api;
use serde::{Deserialize, Deserializer, Serialize, Serializer, de, ser::SerializeMap as _};
use serde_json::Value;

use super::fields::{
    Bytes, Hex, count, id, int, lenient, nullable_int, nullable_uint, number, parse_handle,
    strings, uint, uint32,
};
use crate::calls::ingest::{
    Call, Packet, Queue,
    model::{ArgKind, arg_kind},
};

/// The keys of the lines that are one object under one key.
pub(super) const HEADER: &str = "rocsync_raw";
pub(super) const TRAILER: &str = "rocsync_raw_end";
pub(super) const COMPLETION: &str = "completion";
pub(super) const QUEUE: &str = "queue";
pub(super) const PACKET: &str = "packet";
/// A losses line is flat: `{"lost": FIRST, "count": N}` (its first field).
pub(super) const LOST: &str = "lost";

/// A line that is `{"<key>": value}`.
pub(super) struct Tagged<'a, T>(pub &'static str, pub &'a T);

impl<T: Serialize> Serialize for Tagged<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry(self.0, self.1)?;
        m.end()
    }
}

#[derive(Serialize, Deserialize)]
pub(super) struct HeaderBody {
    #[serde(deserialize_with = "int")]
    pub clock_offset_ns: i64,
    #[serde(default, deserialize_with = "strings")]
    pub command: Vec<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub from_start: bool,
    #[serde(default, deserialize_with = "lenient")]
    pub start_ns: u64,
    /// rocsync's version; not read.
    #[serde(default, deserialize_with = "lenient")]
    pub version: String,
}

/// Losses counted before resolution; an absent count reads as 0.
#[derive(Serialize, Deserialize)]
pub(super) struct TrailerBody {
    #[serde(default, deserialize_with = "count")]
    pub entry_records: u64,
    #[serde(default, deserialize_with = "count")]
    pub exit_records: u64,
    #[serde(default, deserialize_with = "count")]
    pub get_device_calls_not_recorded: u64,
    #[serde(default, deserialize_with = "count")]
    pub library_loads: u64,
    #[serde(default, deserialize_with = "count")]
    pub out_params: u64,
    /// Written only when some were dropped: a capture of the runtimes alone is written
    /// as before communicators were probed.
    #[serde(default, deserialize_with = "count", skip_serializing_if = "none")]
    pub comm_state: u64,
    /// Written only when some were dropped, as `comm_state`.
    #[serde(default, deserialize_with = "count", skip_serializing_if = "none")]
    pub thread_names: u64,
    #[serde(default, deserialize_with = "count")]
    pub packet_records: u64,
    #[serde(default, deserialize_with = "count")]
    pub packets_truncated: u64,
    #[serde(default, deserialize_with = "count")]
    pub packets_unread: u64,
    /// Checked apart (see `read::processes`): its errors name the process.
    #[serde(default)]
    pub processes: Value,
    #[serde(default, deserialize_with = "count")]
    pub queue_records: u64,
    #[serde(default, deserialize_with = "count")]
    pub undecodable: u64,
    #[serde(default, deserialize_with = "count")]
    pub unpaired_entries: u64,
    #[serde(default, deserialize_with = "count")]
    pub unpaired_exits: u64,
    /// Written only when some: older captures read as none.
    #[serde(default, deserialize_with = "count", skip_serializing_if = "none")]
    pub calls_begun_before: u64,
}

/// A deferred call's return.
#[derive(Serialize, Deserialize)]
pub(super) struct CompletionBody {
    #[serde(deserialize_with = "uint")]
    pub correlation: u64,
    #[serde(deserialize_with = "uint")]
    pub exit_ns: u64,
    #[serde(deserialize_with = "int")]
    pub ret: i64,
}

#[derive(Serialize, Deserialize)]
pub(super) struct LostLine {
    #[serde(deserialize_with = "id")]
    pub lost: u64,
    #[serde(default = "one", deserialize_with = "number")]
    pub count: u64,
}

fn one() -> u64 {
    1
}

#[derive(Serialize, Deserialize)]
pub struct QueueBody {
    agent: Hex,
    base: Hex,
    #[serde(default, deserialize_with = "lenient")]
    created: bool,
    #[serde(default, deserialize_with = "lenient")]
    discovered: bool,
    doorbell: Hex,
    #[serde(deserialize_with = "uint")]
    id: u64,
    #[serde(deserialize_with = "uint")]
    ns: u64,
    #[serde(deserialize_with = "uint32")]
    ordinal: u32,
    #[serde(deserialize_with = "uint32")]
    pid: u32,
    queue: Hex,
    #[serde(deserialize_with = "uint32")]
    size: u32,
    #[serde(deserialize_with = "uint32")]
    tid: u32,
}

impl From<&Queue> for QueueBody {
    fn from(q: &Queue) -> Self {
        Self {
            agent: Hex(q.agent),
            base: Hex(q.base),
            created: q.created,
            discovered: q.discovered,
            doorbell: Hex(q.doorbell),
            id: q.id,
            ns: q.ns,
            ordinal: q.ordinal,
            pid: q.pid,
            queue: Hex(q.queue),
            size: q.size,
            tid: q.tid,
        }
    }
}

impl From<QueueBody> for Queue {
    fn from(q: QueueBody) -> Self {
        Self {
            pid: q.pid,
            tid: q.tid,
            created: q.created,
            discovered: q.discovered,
            queue: q.queue.0,
            agent: q.agent.0,
            base: q.base.0,
            doorbell: q.doorbell.0,
            id: q.id,
            size: q.size,
            ordinal: q.ordinal,
            ns: q.ns,
        }
    }
}

#[derive(Serialize, Deserialize)]
pub struct PacketBody {
    agent: Hex,
    bytes: Bytes,
    #[serde(deserialize_with = "uint")]
    index: u64,
    #[serde(deserialize_with = "uint")]
    ns: u64,
    #[serde(deserialize_with = "uint32")]
    ordinal: u32,
    #[serde(deserialize_with = "uint32")]
    pid: u32,
    queue: Hex,
    #[serde(deserialize_with = "uint32")]
    tid: u32,
}

impl From<&Packet> for PacketBody {
    fn from(p: &Packet) -> Self {
        Self {
            agent: Hex(p.agent),
            bytes: Bytes(p.bytes),
            index: p.index,
            ns: p.ns,
            ordinal: p.ordinal,
            pid: p.pid,
            queue: Hex(p.queue),
            tid: p.tid,
        }
    }
}

impl From<PacketBody> for Packet {
    fn from(p: PacketBody) -> Self {
        Self {
            pid: p.pid,
            tid: p.tid,
            ordinal: p.ordinal,
            queue: p.queue.0,
            agent: p.agent.0,
            index: p.index,
            ns: p.ns,
            bytes: p.bytes.0,
        }
    }
}

/// A call: `exit_ns`/`ret` present, null in flight; the flags only when set.
#[derive(Serialize, Deserialize)]
pub(super) struct CallLine {
    api: ApiName,
    #[serde(deserialize_with = "uint32")]
    pid: u32,
    #[serde(deserialize_with = "uint32")]
    tid: u32,
    #[serde(deserialize_with = "uint")]
    correlation: u64,
    #[serde(deserialize_with = "uint")]
    enter_ns: u64,
    #[serde(deserialize_with = "nullable_uint")]
    exit_ns: Option<u64>,
    #[serde(deserialize_with = "nullable_int")]
    ret: Option<i64>,
    args: Args,
    #[serde(default, deserialize_with = "lenient", skip_serializing_if = "no")]
    filtered: bool,
    #[serde(default, deserialize_with = "lenient", skip_serializing_if = "no")]
    late: bool,
    #[serde(default, deserialize_with = "lenient", skip_serializing_if = "no")]
    deferred: bool,
}

fn no(b: &bool) -> bool {
    !b
}

impl CallLine {
    /// The line of a call; a filtered call is never marked late, a late one never
    /// deferred.
    pub(super) fn new(c: &Call, late: bool, deferred: bool) -> Self {
        Self {
            api: ApiName(c.api),
            pid: c.pid,
            tid: c.tid,
            correlation: c.correlation,
            enter_ns: c.enter_ns,
            exit_ns: c.exit_ns,
            ret: c.ret,
            args: Args::Of(c.api, c.args),
            filtered: c.filtered,
            late: late && !c.filtered,
            deferred: deferred && (c.filtered || !late),
        }
    }

    /// The call, and whether it was deferred and late.
    pub(super) fn call(self) -> Result<(Call, bool, bool)> {
        let api = self.api.0;
        let args = match self.args {
            Args::Of(_, args) => args,
            Args::Read(v) => read_args(api, &v)?,
        };
        if self.exit_ns.is_some_and(|x| x < self.enter_ns) {
            bail!("\"exit_ns\" is before \"enter_ns\"");
        }
        let call = Call {
            api,
            pid: self.pid,
            tid: self.tid,
            correlation: self.correlation,
            enter_ns: self.enter_ns,
            exit_ns: self.exit_ns,
            ret: self.ret,
            args,
            filtered: self.filtered,
        };
        Ok((call, self.deferred, self.late))
    }
}

/// An API by its exported symbol.
struct ApiName(Api);

impl Serialize for ApiName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.symbol())
    }
}

impl<'de> Deserialize<'de> for ApiName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        let name = v
            .as_str()
            .ok_or_else(|| de::Error::custom("is not a string"))?;
        Api::ALL
            .iter()
            .find(|a| a.symbol() == name)
            .map(|&a| ApiName(a))
            .ok_or_else(|| de::Error::custom(format_args!("unknown API {name:?}")))
    }
}

/// A call's arguments, named and typed by its API ([`arg_kind`]): written from the
/// call, read as they are until the API is known.
enum Args {
    Of(Api, [u64; 3]),
    Read(Value),
}

impl Serialize for Args {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (api, args) = match self {
            Args::Of(api, args) => (*api, args),
            Args::Read(v) => return v.serialize(s),
        };
        let names = api.arg_names();
        let mut m = s.serialize_map(Some(names.len()))?;
        for (name, &v) in names.iter().zip(args) {
            match arg_kind(name) {
                ArgKind::Handle => m.serialize_entry(name, &Hex(v))?,
                ArgKind::Unsigned => m.serialize_entry(name, &(v as u32))?,
                ArgKind::Signed => m.serialize_entry(name, &(v as i32))?,
            }
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Args {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(Args::Read)
    }
}

fn read_args(api: Api, read: &Value) -> Result<[u64; 3]> {
    let mut args = [0u64; 3];
    for (i, name) in api.arg_names().iter().enumerate() {
        let a = read
            .get(name)
            .ok_or_else(|| anyhow!("missing argument \"{name}\""))?;
        args[i] = match arg_kind(name) {
            ArgKind::Handle => parse_handle(a)
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
    Ok(args)
}

fn none(n: &u64) -> bool {
    *n == 0
}
