//! NCCL and RCCL calls: the communicator state the probes keep per tracked process
//! (each communicator's id and number of collectives, each stream's last collective),
//! read by the daemon's hang chain and `/metrics`, and the arguments that are not in the
//! first three registers ([`Layout`]). Collectives have no return probe: their entry
//! writes the exit record too, with their number in it.

use aya_ebpf::{
    helpers::{bpf_ktime_get_ns, bpf_probe_read_user},
    macros::map,
    maps::LruHashMap,
    programs::{ProbeContext, RetProbeContext},
};
use rocsync_common::{
    Api, COMM_STATE_PER_PROCESS, CommQuota, CommSetup, CommState, Cookie, HandleKey,
    LastCollective, Layout, MAX_RANKS, Numbered, UNIQUE_ID_BYTES, comm_id, drop_index, split_id,
};

use crate::count_drops;

/// Communicators of tracked processes, by (tgid, handle). LRU: a process that makes
/// communicators without end cannot fill it for the others (its oldest go first).
#[map]
static COMMS: LruHashMap<HandleKey, CommState> = LruHashMap::with_max_entries(8192, 0);
/// The last collective enqueued on each stream, by (tgid, stream).
#[map]
static STREAM_COLLECTIVE: LruHashMap<HandleKey, LastCollective> =
    LruHashMap::with_max_entries(16384, 0);
/// Each process's share of `COMMS` and `STREAM_COLLECTIVE`, by tgid. LRU: a process
/// gone leaves its count behind until pushed out.
#[map]
static QUOTAS: LruHashMap<u64, CommQuota> = LruHashMap::with_max_entries(8192, 0);

/// Whether `tgid` may have one more communicator (`stream` false) or stream entry; a
/// refusal is counted.
#[inline(always)]
fn admit(tgid: u64, stream: bool) -> bool {
    let q = match QUOTAS.get_ptr_mut(tgid) {
        Some(q) => q,
        None => {
            let _ = QUOTAS.insert(tgid, CommQuota::default(), 0);
            match QUOTAS.get_ptr_mut(tgid) {
                Some(q) => q,
                None => return false,
            }
        }
    };
    // SAFETY: the process's own entry, valid for the program's run (one thread of it
    // sets communicators up at a time; a race lets one more in, still bounded).
    unsafe {
        let n = if stream {
            &mut (*q).streams
        } else {
            &mut (*q).comms
        };
        if *n >= COMM_STATE_PER_PROCESS {
            count_drops(drop_index::COMM_STATE, 1);
            return false;
        }
        *n += 1;
    }
    true
}

/// A communicator of `tgid` ended: its share back.
#[inline(always)]
fn release(tgid: u64) {
    if let Some(q) = QUOTAS.get_ptr_mut(tgid) {
        // SAFETY: as in `admit`.
        unsafe { (*q).comms = (*q).comms.saturating_sub(1) };
    }
}

/// Set-up calls between entry and return, by `pid_tgid`.
#[map]
static SETUPS: LruHashMap<u64, CommSetup> = LruHashMap::with_max_entries(4096, 0);

const UNKNOWN: u32 = u32::MAX;

/// The six argument registers, each read at its constant offset before any branch: read
/// in branches, the compiler merges the loads into one at a computed offset, which the
/// verifier refuses for the context.
#[inline(always)]
fn regs(ctx: &ProbeContext) -> [u64; 6] {
    let r = |i| ctx.arg::<u64>(i).unwrap_or(0);
    [r(0), r(1), r(2), r(3), r(4), r(5)]
}

/// The stack argument at `[rsp+off]`: the probe is at the entry, where `[rsp]` is the
/// return address.
#[inline(always)]
fn stack(ctx: &ProbeContext, off: u64) -> u64 {
    // SAFETY: the probe's pt_regs; the stack slot through the checked helper.
    let sp = unsafe { (*ctx.regs).rsp };
    // SAFETY: as above.
    unsafe { bpf_probe_read_user((sp + off) as *const u64) }.unwrap_or(0)
}

/// The entry's three argument words of an NCCL call of `layout`
/// ([`rocsync_common::Op::arg_names`]).
#[inline(always)]
pub fn args(ctx: &ProbeContext, layout: u64, tgid: u32) -> [u64; 3] {
    let low = |r: u64| r & 0xffff_ffff;
    let r = regs(ctx);
    if layout == Layout::Init as u64 {
        // SAFETY: the probe's pt_regs.
        let sp = unsafe { (*ctx.regs).rsp };
        // SAFETY: the id's copy on the target's stack, through the checked helper.
        let id = unsafe { bpf_probe_read_user((sp + 8) as *const [u64; UNIQUE_ID_BYTES / 8]) }
            .map_or(0, |w| comm_id(&w));
        [r[0], id, low(r[1]) | low(r[2]) << 32]
    } else if layout == Layout::Split as u64 {
        let (parent, color) = (r[0], low(r[1]));
        let key = HandleKey {
            tgid: tgid as u64,
            handle: parent,
        };
        let id = match COMMS.get_ptr_mut(key) {
            // SAFETY: the parent's entry, valid for the program's run. Its ranks split it
            // together, in one order, so the count is the same on each.
            Some(p) if unsafe { (*p).id } != 0 => unsafe {
                let nth = (*p).splits as u64;
                (*p).splits += 1;
                split_id((*p).id, nth, color)
            },
            _ => 0,
        };
        [r[3], id, color | low(r[2]) << 32]
    } else if layout == Layout::Seven as u64 {
        [r[5], stack(ctx, 8), r[2]]
    } else if layout == Layout::Eight as u64 {
        [stack(ctx, 8), stack(ctx, 16), r[2]]
    } else if layout == Layout::Six as u64 {
        [r[4], r[5], r[2]]
    } else if layout == Layout::PeerSix as u64 {
        [r[4], r[5], r[1]]
    } else {
        [r[0], r[1], r[2]]
    }
}

/// A tracked process entered an NCCL call: its communicator's state kept; for a
/// collective, its number and the arguments the entry's three words leave out.
#[inline(always)]
pub fn entered(ctx: &ProbeContext, cookie: Cookie, args: &[u64; 3], pid_tgid: u64) -> i64 {
    let tgid = pid_tgid >> 32;
    match cookie.kind() {
        Cookie::KIND_COMM_SETUP => {
            let all = cookie.api() == Api::NcclCommInitAll as u32;
            let (rank, nranks) = if cookie.stream_source() == Layout::Init as u64 {
                let (rank, nranks) = ((args[2] >> 32) as u32, args[2] as u32);
                // Garbage is no size: shown as unknown, never as a rank of billions.
                match nranks > 0 && nranks <= MAX_RANKS && rank < nranks {
                    true => (rank, nranks),
                    false => (UNKNOWN, UNKNOWN),
                }
            } else if all {
                // The first of `ndev` communicators, rank 0 of them.
                (0, args[1] as u32)
            } else {
                (UNKNOWN, UNKNOWN)
            };
            let setup = CommSetup {
                pointer: args[0],
                id: if all { 0 } else { args[1] },
                rank,
                nranks,
                api: cookie.api(),
                pad: 0,
            };
            let _ = SETUPS.insert(pid_tgid, setup, 0);
            0
        }
        Cookie::KIND_COLLECTIVE => {
            // SAFETY: helper without preconditions.
            let now = unsafe { bpf_ktime_get_ns() };
            collective(ctx, cookie, args, tgid, now)
        }
        _ => {
            if cookie.api() == Api::NcclCommDestroy as u32
                || cookie.api() == Api::NcclCommAbort as u32
            {
                let key = HandleKey {
                    tgid,
                    handle: args[0],
                };
                if COMMS.remove(key).is_ok() {
                    release(tgid);
                }
            }
            0
        }
    }
}

#[inline(always)]
pub(crate) fn collective(
    ctx: &ProbeContext,
    cookie: Cookie,
    args: &[u64; 3],
    tgid: u64,
    ns: u64,
) -> i64 {
    let layout = cookie.stream_source();
    let r = regs(ctx);
    let (datatype, extra) = if layout == Layout::PeerSix as u64 {
        (r[2], r[3])
    } else if layout == Layout::Eight as u64 {
        (r[3], r[5])
    } else if layout == Layout::Seven as u64 {
        (r[3], r[4])
    } else {
        (r[3], 0)
    };
    let key = HandleKey {
        tgid,
        handle: args[0],
    };
    let seq = match COMMS.get_ptr_mut(key) {
        // SAFETY: the communicator's entry, valid for the program's run; its collectives
        // are enqueued by one thread at a time (NCCL requires it).
        Some(c) => unsafe {
            (*c).seq += 1;
            (*c).last_ns = ns;
            (*c).last_api = cookie.api();
            (*c).seq
        },
        // Set up before the probes were there: numbered from here, its id unknown.
        None if !admit(tgid, false) => 0,
        None => {
            let state = CommState {
                seq: 1,
                last_ns: ns,
                last_api: cookie.api(),
                rank: UNKNOWN,
                nranks: UNKNOWN,
                ..CommState::default()
            };
            let _ = COMMS.insert(key, state, 0);
            1
        }
    };
    let last = LastCollective {
        comm: args[0],
        seq,
        ns,
        api: cookie.api(),
        pad: 0,
    };
    let stream = HandleKey {
        tgid,
        handle: args[1],
    };
    match STREAM_COLLECTIVE.get_ptr_mut(stream) {
        // SAFETY: the stream's own entry, valid for the program's run.
        Some(l) => unsafe { *l = last },
        None if admit(tgid, true) => {
            let _ = STREAM_COLLECTIVE.insert(stream, last, 0);
        }
        None => {}
    }
    Numbered {
        seq: seq as u32,
        datatype: datatype as u8,
        extra: extra as i32,
    }
    .word()
}

/// A set-up call returned: its communicator's handle read, its state begun. Returns the
/// handle, when the call entered tracked and the handle could be read.
#[inline(always)]
pub fn set_up(ctx: &RetProbeContext, pid_tgid: u64) -> Option<u64> {
    // SAFETY: copied out before removal.
    let s = (unsafe { SETUPS.get(pid_tgid) }).copied()?;
    let _ = SETUPS.remove(pid_tgid);
    // SAFETY: target memory through the checked helper.
    let handle = unsafe { bpf_probe_read_user(s.pointer as *const u64) }.ok()?;
    if ctx.ret::<i32>() != 0 {
        return Some(handle);
    }
    let state = CommState {
        id: s.id,
        rank: s.rank,
        nranks: s.nranks,
        ..CommState::default()
    };
    let key = HandleKey {
        tgid: pid_tgid >> 32,
        handle,
    };
    if admit(pid_tgid >> 32, false) {
        let _ = COMMS.insert(key, state, 0);
    }
    Some(handle)
}
