//! The rows of a trace besides its runtime and device sync rows: NCCL/RCCL calls
//! (`cpu_op`), HSA packets (`hsa_packet`) and the arrows between them, thread names;
//! and every other event counted by kind, as the report's "not used".

use std::{collections::BTreeMap, mem::size_of, rc::Rc};

use super::event::{Args, Event, hex, ns};
use crate::read::report::{
    capture::{Capture, NcclCall},
    load::{
        fields::{Scalar, api_name},
        held::{Held, Refused},
    },
};

/// Kinds of unused events named apart: past them, one "other events" count.
const MAX_KINDS: usize = 64;

const NCCL_COST: usize = size_of::<NcclCall>() + 32;

/// Thread names, by (pid, tid): the trace's `thread_name` rows.
pub(super) type Names = BTreeMap<(u64, u64), Rc<str>>;

/// Takes `e`, an event other than a runtime or device sync row: what it costs is taken
/// from `held`; `Err` past the report's bounds, with the kind of row refused.
pub(super) fn take(
    e: &Event,
    held: &mut Held,
    c: &mut Capture,
    names: &mut Names,
) -> Result<(), (&'static str, Refused)> {
    let (ph, cat) = (e.ph.as_str().unwrap_or(""), e.cat.as_str().unwrap_or(""));
    let unused = match (ph, cat) {
        ("X", "cpu_op") => return nccl(e, held, c).map_err(|r| ("cpu_op rows", r)),
        ("X", "hsa_packet") => return packet(e, held, c).map_err(|r| ("hsa_packet rows", r)),
        ("M", _) if e.name == "thread_name" => return thread_name(e, held, names),
        ("s", "hsa_dep") => {
            c.packets.barrier_dependencies += 1;
            return Ok(());
        }
        ("s", "hip_barrier") => {
            c.packets.call_barriers += 1;
            return Ok(());
        }
        // The other end of an arrow counted by its start.
        ("f", "hsa_dep" | "hip_barrier") => return Ok(()),
        ("s" | "f", "ac2g") => "ac2g arrows (the correlation links the same rows)".to_string(),
        ("s" | "f", "hip_sync_dep") => {
            "hip_sync_dep arrows (a wait's fields name its record)".to_string()
        }
        ("M", _) => "track metadata (Perfetto's process names, labels, order)".to_string(),
        _ => format!("{} events of category {}", show(ph), show(cat)),
    };
    not_used(c, &unused);
    Ok(())
}

fn show(s: &str) -> String {
    match s {
        "" => "(none)".into(),
        s => crate::read::report::job::shown(s),
    }
}

fn not_used(c: &mut Capture, kind: &str) {
    match c.not_used.len() < MAX_KINDS || c.not_used.contains_key(kind) {
        true => c.not_used(kind),
        false => c.not_used("other events"),
    }
}

/// A thread's name, kept where it says more than `thread N`.
fn thread_name(
    e: &Event,
    held: &mut Held,
    names: &mut Names,
) -> Result<(), (&'static str, Refused)> {
    let a = e.args.0.as_ref();
    let (Some(pid), Some(tid)) = (e.pid.as_u64(), e.tid.as_u64()) else {
        return Ok(());
    };
    let Some(name) = a.and_then(|a| a.name.as_str()) else {
        return Ok(());
    };
    if name == format!("thread {tid}") {
        return Ok(());
    }
    let name = held.name(name).map_err(|r| ("thread names", r))?;
    names.insert((pid, tid), name);
    Ok(())
}

fn nccl(e: &Event, held: &mut Held, c: &mut Capture) -> Result<(), Refused> {
    let a = e.args.0.as_ref();
    let field = |f: fn(&Args) -> &Scalar| a.map_or(&Scalar::Absent, f);
    let (Some(api), Some(pid), Some(ts)) = (api_name(&e.name), e.pid.as_u64(), e.ts.as_f64())
    else {
        c.unusable("cpu_op row without a known NCCL/RCCL name, pid or ts");
        return Ok(());
    };
    let api = held.name(&api)?;
    held.take(NCCL_COST)?;
    let small = |v: &Scalar| v.as_u64().filter(|&n| n <= 1 << 32);
    c.nccl.push(NcclCall {
        pid: pid as u32,
        api,
        start_ns: ns(ts),
        comm: hex(field(|a| &a.comm)),
        id: hex(field(|a| &a.comms_id)),
        rank: small(field(|a| &a.rank)),
        nranks: small(field(|a| &a.group_size)),
        seq: field(|a| &a.seq).as_u64().filter(|&s| s <= 1 << 40),
        stream: hex(field(|a| &a.stream)),
    });
    Ok(())
}

fn packet(e: &Event, held: &mut Held, c: &mut Capture) -> Result<(), Refused> {
    let a = e.args.0.as_ref();
    let (Some(queue), Some(kind)) = (a.and_then(|a| a.queue.as_str()), e.name.as_str()) else {
        c.unusable("hsa_packet row without queue or name");
        return Ok(());
    };
    let agent = a.and_then(|a| a.agent.as_i64());
    let (queue, kind) = (held.name(queue)?, held.name(kind)?);
    c.packets.add(agent, queue, kind);
    Ok(())
}
