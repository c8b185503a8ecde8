//! NCCL and RCCL calls: the communicator state the probes keep per tracked process
//! (each communicator's id and number of collectives, each stream's last collective),
//! read by the daemon's hang chain and `/metrics`, and the arguments that are not in the
//! first three registers ([`Layout`]). Collectives have no return probe: their entry
//! writes the exit record too, with their number in it.

use aya_ebpf::{
    bindings::{BPF_EXIST, BPF_NOEXIST},
    helpers::{
        bpf_get_current_uid_gid, bpf_ktime_get_ns, bpf_probe_read_user, bpf_probe_read_user_buf,
    },
    macros::map,
    maps::{HashMap, LruHashMap, PerCpuArray},
    programs::{ProbeContext, RetProbeContext},
};
use rocsync_common::{
    Api, COMM_STATE_ENTRIES, COMM_STATE_PER_PROCESS, COMM_STATE_PER_USER, CommQuota, CommSetup,
    CommState, Cookie, HandleKey, IN_FLIGHT_USERS, LastCollective, Layout, MAX_RANKS, Numbered,
    UNIQUE_ID_BYTES, comm_id_in, drop_index, split_id_in,
};

use crate::{count_drops, fetch_add_by};

/// Communicators of tracked processes, by (tgid, handle). Not LRU: a user making
/// communicators without end would push the others' out (a hung job's, untouched while
/// it hangs, first); each process and each user has its share instead ([`admit`]), and
/// the daemon removes a process's entries once it has gone.
#[map]
static COMMS: HashMap<HandleKey, CommState> = HashMap::with_max_entries(COMM_STATE_ENTRIES, 0);
/// The last collective enqueued on each stream, by (tgid, stream).
#[map]
static STREAM_COLLECTIVE: HashMap<HandleKey, LastCollective> =
    HashMap::with_max_entries(COMM_STATE_ENTRIES, 0);
/// Each process's share of `COMMS` and `STREAM_COLLECTIVE`, by tgid; removed with its
/// entries by the daemon.
#[map]
static QUOTAS: HashMap<u64, CommQuota> = HashMap::with_max_entries(COMM_STATE_ENTRIES, 0);
/// Entries each user's processes were given (less those ended by a destroy), by uid.
#[map]
static USER_TAKEN: HashMap<u32, u64> = HashMap::with_max_entries(IN_FLIGHT_USERS, 0);
/// Entries of each user's processes the daemon removed when they had gone, by uid: only
/// the daemon writes it, so the two counts need no lock between them.
#[map]
static USER_FREED: HashMap<u32, u64> = HashMap::with_max_entries(IN_FLIGHT_USERS, 0);

/// Whether `tgid` may have one more communicator (`stream` false) or stream entry,
/// within its own share and its user's; a refusal is counted.
#[inline(always)]
fn admit(tgid: u64, stream: bool) -> bool {
    let uid = bpf_get_current_uid_gid() as u32;
    let q = match QUOTAS.get_ptr_mut(tgid) {
        Some(q) => q,
        None => {
            let first = CommQuota {
                uid,
                ..CommQuota::default()
            };
            let _ = QUOTAS.insert(tgid, first, BPF_NOEXIST as u64);
            match QUOTAS.get_ptr_mut(tgid) {
                Some(q) => q,
                None => {
                    count_drops(drop_index::COMM_STATE, 1);
                    return false;
                }
            }
        }
    };
    // SAFETY: the process's own entry, valid for the program's run (one thread of it
    // sets communicators up at a time; a race lets one more in, still bounded).
    let (n, uid) = unsafe {
        let n = if stream {
            &mut (*q).streams
        } else {
            &mut (*q).comms
        };
        (n, (*q).uid)
    };
    if *n >= COMM_STATE_PER_PROCESS || !user_admits(uid) {
        count_drops(drop_index::COMM_STATE, 1);
        return false;
    }
    *n += 1;
    true
}

/// Whether `uid`'s processes may have one more entry: taken if so.
#[inline(always)]
fn user_admits(uid: u32) -> bool {
    let taken = match USER_TAKEN.get_ptr_mut(uid) {
        Some(t) => t,
        None => {
            let _ = USER_TAKEN.insert(uid, 0, BPF_NOEXIST as u64);
            match USER_TAKEN.get_ptr_mut(uid) {
                Some(t) => t,
                None => return false,
            }
        }
    };
    // SAFETY: plain lookup, copied out.
    let freed = unsafe { USER_FREED.get(uid) }.copied().unwrap_or(0);
    // Taken before it is checked: CPUs racing for a user's last entry cannot pass it
    // together.
    if fetch_add_by(taken, 1).wrapping_sub(freed) >= COMM_STATE_PER_USER as u64 {
        fetch_add_by(taken, u64::MAX);
        return false;
    }
    true
}

/// A communicator of `tgid` ended, or an entry admitted was not stored: its share back
/// (the process's, and its user's).
#[inline(always)]
fn release(tgid: u64, stream: bool) {
    if let Some(q) = QUOTAS.get_ptr_mut(tgid) {
        // SAFETY: as in `admit`.
        unsafe {
            let n = if stream {
                &mut (*q).streams
            } else {
                &mut (*q).comms
            };
            *n = n.saturating_sub(1);
            if let Some(t) = USER_TAKEN.get_ptr_mut((*q).uid) {
                fetch_add_by(t, u64::MAX);
            }
        }
    }
}

/// An entry admitted: stored, or (the map full, or a racing CPU's) its share given back
/// and the refusal counted.
#[inline(always)]
fn stored(ok: bool, tgid: u64, stream: bool) {
    if !ok {
        release(tgid, stream);
        count_drops(drop_index::COMM_STATE, 1);
    }
}

/// Each CPU's working space for a communicator id's hash (the id, then BLAKE2b's state):
/// too large for the stack beside the rest of the entry program.
#[map]
static HASHING: PerCpuArray<[u64; 32]> = PerCpuArray::with_max_entries(1, 0);

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
pub(crate) fn args(ctx: &ProbeContext, layout: u64, tgid: u32) -> [u64; 3] {
    let low = |r: u64| r & 0xffff_ffff;
    let r = regs(ctx);
    if layout == Layout::Init as u64 {
        // SAFETY: the probe's pt_regs.
        let sp = unsafe { (*ctx.regs).rsp };
        let id = match HASHING.get_ptr_mut(0) {
            // SAFETY: this CPU's scratch, valid for the program's run; the id's copy on
            // the target's stack read into its first 128 bytes through the checked helper.
            Some(s) => unsafe {
                let block = &mut *(s as *mut [u8; UNIQUE_ID_BYTES]);
                match bpf_probe_read_user_buf((sp + 8) as *const u8, block) {
                    Ok(()) => comm_id_in(&mut *s),
                    Err(_) => 0,
                }
            },
            None => 0,
        };
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
                match HASHING.get_ptr_mut(0) {
                    Some(s) => split_id_in(&mut *s, (*p).id, nth, color),
                    None => 0,
                }
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
pub(crate) fn entered(ctx: &ProbeContext, cookie: Cookie, args: &[u64; 3], pid_tgid: u64) -> i64 {
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
                    release(tgid, false);
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
            stored(
                COMMS.insert(key, state, BPF_NOEXIST as u64).is_ok(),
                tgid,
                false,
            );
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
            let ok = STREAM_COLLECTIVE
                .insert(stream, last, BPF_NOEXIST as u64)
                .is_ok();
            stored(ok, tgid, true);
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
pub(crate) fn set_up(ctx: &RetProbeContext, pid_tgid: u64) -> Option<u64> {
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
        // Set up again on a handle it has (a handle reused): rewritten, counted once.
        let new = COMMS.insert(key, state, BPF_NOEXIST as u64).is_ok();
        if !new && COMMS.insert(key, state, BPF_EXIST as u64).is_ok() {
            release(pid_tgid >> 32, false);
        } else {
            stored(new, pid_tgid >> 32, false);
        }
    }
    Some(handle)
}
