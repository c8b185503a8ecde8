//! Always-on metrics (the daemon): every call of a tracked process is counted per API and
//! device, and synchronisations are timed into a histogram, in per-CPU maps userspace
//! reads when scraped. Nothing goes to the ring. Per call: an array slot per series, and
//! the call's start in its thread's entry (`in_flight`).

use aya_ebpf::{
    bindings::BPF_NOEXIST,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::map,
    maps::{Array, HashMap, LruHashMap, PerCpuArray, PerCpuHashMap},
};
use rocsync_common::{
    AQL_SLOTS, Api, Cookie, EarlyKey, GroupSlot, METRIC_SLOTS, MetricKey, MetricValue, NO_DEVICE,
    OutParam, PendingCall, RECORD_STALL, StallRecord, Switch, TRACE_RECORDING, TRACE_STOPPING,
    UNLABELLED_CAP, UNLABELLED_FULL, WAIT_BUCKETS, aql_slot,
};

use crate::{
    BPF_RB_FORCE_WAKEUP, EVENTS, TARGETS, dependency,
    device::{device_of, read_out, track_devices},
    in_flight,
};

/// The series, each at its `MetricKey::slot`: an index, not a hash lookup, per call.
#[map]
static METRICS: PerCpuArray<MetricValue> = PerCpuArray::with_max_entries(METRIC_SLOTS, 0);
/// The series of the processes the daemon labels (`--metric-labels`), by label group and
/// slot: a hash lookup per call, for those processes only. A series is made at its first
/// call; the daemon sizes the map at load (one entry when nothing is labelled: it is
/// preallocated, per CPU) and removes a group's series when the group has ended.
#[map]
static GROUP_METRICS: PerCpuHashMap<GroupSlot, MetricValue> = PerCpuHashMap::with_max_entries(1, 0);
/// Series each label group (a pod) may have at most, set at load (0: no cap): one pod
/// cannot take every labelled series and leave the others none.
#[unsafe(no_mangle)]
static SERIES_PER_GROUP: u32 = 0;
/// Series made of each label group, for the cap (as many groups as series at most).
#[map]
static GROUP_SERIES: HashMap<u32, u32> = HashMap::with_max_entries(1, 0);
/// Calls of a labelled process counted in `METRICS` instead, by reason
/// (`rocsync_common::UNLABELLED_*`: `GROUP_METRICS` full, or its group at its cap): the
/// totals stay right, the labels say less.
#[map]
static UNLABELLED: PerCpuArray<u64> = PerCpuArray::with_max_entries(2, 0);
/// A series at zero, a new labelled series' first value (too big for the stack).
#[map]
static ZERO_SERIES: Array<MetricValue> = Array::with_max_entries(1, 0);
/// The daemon's stall threshold (ns; 0: none): a synchronisation that takes longer is
/// counted and announced on the ring (`StallRecord`).
#[map]
static STALL_NS: Array<u64> = Array::with_max_entries(1, 0);

/// The APIs whose return probe is not attached now, a bit per id (slot 0; 0 in a
/// capture: every return probed).
#[map]
static RETURNLESS: Array<u64> = Array::with_max_entries(1, 0);

/// AQL packets published by counted processes, per agent and type
/// (`rocsync_common::aql_slot`).
#[map]
static AQL_PACKETS: PerCpuArray<u64> = PerCpuArray::with_max_entries(AQL_SLOTS, 0);

/// One packet of type `header` (its low byte) on the queue's agent `ordinal`.
#[inline(always)]
pub(crate) fn count_packet(ordinal: u64, header: u8) {
    if let Some(c) = AQL_PACKETS.get_ptr_mut(aql_slot(ordinal, header)) {
        // SAFETY: per-CPU slot, no concurrent writer on this CPU while the program runs.
        unsafe { *c += 1 };
    }
}

/// This CPU's counters of one API on one device, in the process's label group (0: the
/// node's series); `entry`: a call's entry, counted once as unlabelled when its group has
/// no series for it (its return reaches the same series, and is not a call).
#[inline(always)]
fn series(group: u32, (api, device): (u32, i32), entry: bool) -> Option<*mut MetricValue> {
    let slot = MetricKey::slot(api, device)?;
    if group != 0 {
        let key = GroupSlot { group, slot };
        if let Some(v) = GROUP_METRICS.get_ptr_mut(key) {
            return Some(v);
        }
        let made = series_made(group);
        if let (Some(zero), Some(made)) = (ZERO_SERIES.get(0), made) {
            // Another CPU may make it meanwhile: either way it is there after, counted once.
            if GROUP_METRICS.insert(key, zero, BPF_NOEXIST as u64).is_ok() {
                // SAFETY: the group's own counter slot, valid for the program's run.
                unsafe { add_u32(made) };
            }
            if let Some(v) = GROUP_METRICS.get_ptr_mut(key) {
                return Some(v);
            }
        }
        let why = match made {
            Some(_) => UNLABELLED_FULL,
            None => UNLABELLED_CAP,
        };
        if let Some(n) = UNLABELLED.get_ptr_mut(why).filter(|_| entry) {
            // SAFETY: per-CPU slot, no concurrent writer on this CPU while the program runs.
            unsafe { *n += 1 };
        }
    }
    METRICS.get_ptr_mut(slot)
}

/// The counter of `group`'s series, unless the group is at its cap. CPUs making series
/// at once may pass the cap by one each: bounded all the same.
#[inline(always)]
fn series_made(group: u32) -> Option<*mut u32> {
    // SAFETY: a read-only global, set at load.
    let cap = unsafe { core::ptr::read_volatile(&SERIES_PER_GROUP) };
    let made = match GROUP_SERIES.get_ptr_mut(group) {
        Some(m) => m,
        None => {
            let _ = GROUP_SERIES.insert(group, 0, BPF_NOEXIST as u64);
            GROUP_SERIES.get_ptr_mut(group)?
        }
    };
    // SAFETY: as above.
    (cap == 0 || unsafe { *made } < cap).then_some(made)
}

/// Calls of a process the daemon has not looked at yet (a new process calls before its
/// library load is announced and read), by process and series: the daemon folds them
/// into the process's series when it tracks it. Those of processes it never tracks are
/// forgotten by the LRU; those it looked at and does not count are `PASSED`.
#[map]
static EARLY: LruHashMap<EarlyKey, u64> = LruHashMap::with_max_entries(4096, 0);
/// Processes the daemon looked at and counts not (its filters): not early.
#[map]
static PASSED: LruHashMap<u32, u8> = LruHashMap::with_max_entries(8192, 0);

/// A call of a process not (yet) tracked: counted as early unless the daemon passed it.
/// Returns whether it is early (not passed).
#[inline(always)]
fn early(cookie: Cookie, args: &[u64; 3], pid_tgid: u64, tgid: u32) -> bool {
    // SAFETY: plain map lookup.
    if unsafe { PASSED.get(tgid) }.is_some() {
        return false;
    }
    if cookie.kind() == Cookie::KIND_GET_DEVICE {
        return true;
    }
    let Some(slot) = MetricKey::slot(cookie.api(), device_of(args, cookie, pid_tgid)) else {
        return true;
    };
    let key = EarlyKey { tgid, slot };
    match EARLY.get_ptr_mut(key) {
        // SAFETY: the entry's value; the process's threads share it, so atomically.
        Some(n) => unsafe {
            core::arch::asm!(
                "lock *(u64 *)({p} + 0) += {v}",
                p = in(reg) n,
                v = in(reg) 1u64,
            );
        },
        None => {
            let _ = EARLY.insert(key, 1, 0);
        }
    }
    true
}

/// A call entered in a process the daemon tracks: counted, and remembered until it
/// returns; `nccl` keeps an NCCL call's communicator state. Returns the settings to
/// record it with when a trace records the process.
#[inline(always)]
pub(crate) fn entered(
    cookie: Cookie,
    args: &[u64; 3],
    nccl: impl FnOnce(&[u64; 3]),
) -> Option<Switch> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    let Some(ptr) = TARGETS.get_ptr_mut(tgid) else {
        // A rank sets its communicator up in its first milliseconds, before the daemon
        // tracks it: its state is kept from then (bounded per process, `nccl.rs`), so the
        // rank is known by its communicator once tracked.
        if early(cookie, args, pid_tgid, tgid) {
            nccl(args);
        }
        return None;
    };
    // SAFETY: the map's value, valid for the program's run; copied out.
    let cfg = unsafe { *ptr };
    if cfg.metrics == 0 {
        return None;
    }
    nccl(args);
    // No return probe ends it (its return not probed now, or none at all).
    let alone = cookie.entry_only() || returnless(cookie.api());
    if cookie.kind() != Cookie::KIND_GET_DEVICE {
        // SAFETY: the value's aligned fields; one atomic add each (the process's threads
        // share them).
        unsafe {
            add_u32(&raw mut (*ptr).calls);
            if Api::id_is_polling(cookie.api()) {
                add_u32(&raw mut (*ptr).polls);
            }
            if alone {
                add_u32(&raw mut (*ptr).alone);
            }
        }
    }
    count(cookie, args, (pid_tgid, tgid), cfg.metric_group, alone);
    (cfg.capture == TRACE_RECORDING).then_some(Switch {
        capture: 1,
        by_process: 1,
        agents: cfg.agents,
        metrics: 1,
        // The *GetDevice modes are read from the global switch, which the daemon sets.
        ..Switch::default()
    })
}

/// Atomically adds one to `*counter` (no fetch: the cheapest atomic BPF has).
#[inline(always)]
unsafe fn add_u32(counter: *mut u32) {
    // SAFETY: the caller passes a valid, aligned u32 map slot.
    unsafe {
        core::arch::asm!(
            "lock *(u32 *)({p} + 0) += {v}",
            p = in(reg) counter,
            v = in(reg) 1u64,
        );
    }
}

#[inline(always)]
fn count(cookie: Cookie, args: &[u64; 3], (pid_tgid, tgid): (u64, u32), group: u32, alone: bool) {
    // `*GetDevice` is probed only briefly, to learn the devices of threads that chose
    // theirs before the daemon saw them: remembered for its return, never counted.
    let learning = cookie.kind() == Cookie::KIND_GET_DEVICE;
    let device = if learning {
        NO_DEVICE
    } else {
        device_of(args, cookie, pid_tgid)
    };
    // SAFETY: helper without preconditions.
    let ns = unsafe { bpf_ktime_get_ns() };
    if !learning {
        let Some(v) = series(group, (cookie.api(), device), true) else {
            return;
        };
        // SAFETY: this CPU's slot of the series, valid for the program's run.
        unsafe { (*v).calls += 1 };
        count_stream_use(cookie, args, (tgid, ns), v);
    }
    // No return comes to end it: it would look in flight for ever (a hang).
    if alone {
        return;
    }
    in_flight::begin(
        pid_tgid,
        PendingCall {
            api: cookie.api(),
            device,
            ns,
            arg0: args[0],
            ..PendingCall::default()
        },
    );
}

/// Whether `api`'s return probe is not attached now (the daemon attaches the returns
/// counting does not need only while something records: `Api::RETURN_OPTIONAL`). A
/// constant false for the other APIs' programs: no lookup.
#[inline(always)]
fn returnless(api: u32) -> bool {
    Api::RETURN_OPTIONAL & (1u64 << (api & 63)) != 0
        && RETURNLESS
            .get(0)
            .is_some_and(|m| m & (1u64 << (api & 63)) != 0)
}

/// Keeps the dependency state of a record or a stream wait (`dependency`), and counts
/// stream waits on an event recorded on another stream.
#[inline(always)]
fn count_stream_use(cookie: Cookie, args: &[u64; 3], (tgid, ns): (u32, u64), v: *mut MetricValue) {
    if cookie.kind() == Cookie::KIND_RECORD {
        dependency::recorded(args, tgid, ns);
    } else if cookie.stream_arg() > 0
        && cookie.event_arg() > 0
        && dependency::waited(args, tgid, ns)
    {
        // SAFETY: this CPU's slot of the series, valid for the program's run.
        unsafe { (*v).cross_stream += 1 };
    }
}

/// A call returned: errors counted, synchronisations timed, devices tracked. Returns
/// whether a trace records the process's returns, and whether the thread's entry of
/// this call was counted (its return pairs with it).
#[inline(always)]
pub(crate) fn returned(cookie: Cookie, ret: i64) -> (bool, bool) {
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: plain map lookup.
    let target = unsafe { TARGETS.get((pid_tgid >> 32) as u32) };
    let recorded =
        target.is_some_and(|c| c.capture == TRACE_RECORDING || c.capture == TRACE_STOPPING);
    // The group is the process's for its whole life: the one its entry was counted in.
    let paired = count_return(cookie, ret, pid_tgid, target.map_or(0, |c| c.metric_group));
    (recorded, paired)
}

/// Counts a return whose entry was counted; returns whether it was.
#[inline(always)]
fn count_return(cookie: Cookie, ret: i64, pid_tgid: u64, group: u32) -> bool {
    let Some(slot) = in_flight::entry(pid_tgid) else {
        return false;
    };
    // SAFETY: the thread's own entry, valid for the program's run; copied out.
    let p = unsafe { *slot };
    if p.api != cookie.api() {
        return false; // a nested call returned; the outer one keeps its start
    }
    // Consumed (no call has this id), rather than removed: the entry lives until the
    // thread exits (`in_flight`).
    // SAFETY: as above.
    unsafe { (*slot).api = u32::MAX };
    let kind = cookie.kind();
    if kind == Cookie::KIND_GET_DEVICE {
        // Learnt, not counted (see `count`).
        if let Some(device) = read_out(cookie, p.arg0).filter(|_| ret == 0) {
            track_devices(pid_tgid, kind, device);
        }
        return true;
    }
    if ret == 0 {
        match kind {
            Cookie::KIND_SET_DEVICE => track_devices(pid_tgid, kind, p.arg0),
            Cookie::KIND_STREAM_CREATE if OutParam::of_api_id(p.api) == OutParam::Handle => {
                if let Some(stream) = read_out(cookie, p.arg0) {
                    track_devices(pid_tgid, kind, stream);
                }
            }
            _ => {}
        }
    }
    let Some(v) = series(group, (p.api, p.device), false) else {
        return true;
    };
    // SAFETY: this CPU's slot of the series, valid for the program's run.
    unsafe {
        if ret != 0 {
            (*v).errors += 1;
        }
        if kind == Cookie::KIND_SYNC {
            let now = bpf_ktime_get_ns();
            let ns = now.saturating_sub(p.ns);
            if ns >= stall_ns() && !Api::id_is_polling(p.api) {
                (*v).stalls += 1;
                stalled(&p, pid_tgid, now, ret);
            }
            let us = ns / 1000;
            let mut i = 0;
            while i < WAIT_BUCKETS - 1 && us > (1u64 << i) {
                i += 1;
            }
            (*v).timed += 1;
            (*v).wait_ns += ns;
            if let Some(b) = (*v).buckets.get_mut(i) {
                *b += 1;
            }
        }
    }
    true
}

/// The stall threshold; `u64::MAX` when none is set.
#[inline(always)]
fn stall_ns() -> u64 {
    match STALL_NS.get(0) {
        Some(&t) if t > 0 => t,
        _ => u64::MAX,
    }
}

/// Announces a stall (a lost announcement is still counted in `stalls`).
#[inline(always)]
fn stalled(p: &PendingCall, pid_tgid: u64, exit_ns: u64, ret: i64) {
    let Some(mut slot) = EVENTS.reserve::<StallRecord>(0) else {
        return;
    };
    slot.write(StallRecord {
        kind: RECORD_STALL,
        api: p.api,
        pid: (pid_tgid >> 32) as u32,
        tid: pid_tgid as u32,
        device: p.device,
        pad: 0,
        entry_ns: p.ns,
        exit_ns,
        arg0: p.arg0,
        ret,
    });
    // The daemon acts on it at once (a stall trace starts now).
    slot.submit(BPF_RB_FORCE_WAKEUP);
}
