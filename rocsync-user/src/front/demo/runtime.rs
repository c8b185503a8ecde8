//! A simulated HIP runtime inside rocsync's own binary, for `rocsync demo`: the same
//! exported names and arguments as `libamdhip64`'s, so that `run --hip-lib` probes them in
//! this file as in the real library. Streams are queues of timed work (copies), events
//! complete when the work before them on their stream does, and the synchronizes block
//! until then: what a trace of a real job shows, with no GPU.

// HIP's names.
#![allow(non_snake_case)]

use std::{
    collections::HashMap,
    ffi::c_void,
    sync::{Mutex, MutexGuard},
    time::{Duration, Instant},
};

const SUCCESS: i32 = 0;
const INVALID_HANDLE: i32 = 400;
const NOT_READY: i32 = 600;
/// A copy's simulated speed: 1 MiB per 100 µs (10 GiB/s).
const BYTES_PER_US: u64 = (1 << 20) / 100;

#[derive(Default)]
struct State {
    /// Each stream's work ends at this instant.
    streams: HashMap<usize, Instant>,
    /// Each event: when the work before its last record ends (`None`: never recorded).
    events: HashMap<usize, Option<Instant>>,
    next: usize,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

fn state() -> MutexGuard<'static, Option<State>> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` on the runtime's state (made at first use).
fn with<T>(f: impl FnOnce(&mut State) -> T) -> T {
    f(state().get_or_insert_default())
}

/// A new handle: distinct, aligned, never 0 (the null stream).
fn handle(s: &mut State) -> usize {
    s.next += 1;
    0x5000_0000 + s.next * 0x40
}

fn sleep_until(at: Instant) {
    let now = Instant::now();
    if at > now {
        std::thread::sleep(at - now);
    }
}

/// The stream's work end (the null stream is the device's: everything before).
fn end_of(s: &State, stream: usize) -> Option<Instant> {
    match stream {
        0 => Some(
            s.streams
                .values()
                .copied()
                .max()
                .unwrap_or_else(Instant::now),
        ),
        _ => s.streams.get(&stream).copied(),
    }
}

#[unsafe(no_mangle)]
#[inline(never)]
pub(super) extern "C" fn hipSetDevice(device: i32) -> i32 {
    if device == 0 { SUCCESS } else { 101 }
}

/// # Safety
/// `device` is null or writable.
#[unsafe(no_mangle)]
#[inline(never)]
pub(super) unsafe extern "C" fn hipGetDevice(device: *mut i32) -> i32 {
    if device.is_null() {
        return 1;
    }
    // SAFETY: non-null, and writable by the caller's contract.
    unsafe { device.write(0) };
    SUCCESS
}

/// Writes a new handle into `out` (null: an error, as HIP's), `made` entering it.
///
/// # Safety
/// `out` is null or writable.
unsafe fn create(out: *mut *mut c_void, made: impl FnOnce(&mut State, usize)) -> i32 {
    if out.is_null() {
        return 1;
    }
    let h = with(|s| {
        let h = handle(s);
        made(s, h);
        h
    });
    // SAFETY: non-null, and writable by the caller's contract.
    unsafe { out.write(h as *mut c_void) };
    SUCCESS
}

/// # Safety
/// `stream` is null or writable.
#[unsafe(no_mangle)]
#[inline(never)]
pub(super) unsafe extern "C" fn hipStreamCreate(stream: *mut *mut c_void) -> i32 {
    // SAFETY: the caller's contract is create's.
    unsafe { create(stream, |s, h| _ = s.streams.insert(h, Instant::now())) }
}

/// Not probed (no HIP API's call changes on it); named as HIP names it.
///
/// # Safety
/// `event` is null or writable.
#[unsafe(no_mangle)]
#[inline(never)]
pub(super) unsafe extern "C" fn hipEventCreate(event: *mut *mut c_void) -> i32 {
    // SAFETY: the caller's contract is create's.
    unsafe { create(event, |s, h| _ = s.events.insert(h, None)) }
}

/// A copy of `size` bytes queued on `stream` (the demo's work: it takes its time there).
#[unsafe(no_mangle)]
#[inline(never)]
pub(super) extern "C" fn hipMemcpyAsync(
    _dst: *mut c_void,
    _src: *const c_void,
    size: usize,
    _kind: i32,
    stream: *mut c_void,
) -> i32 {
    with(|s| {
        let Some(end) = s.streams.get_mut(&(stream as usize)) else {
            return INVALID_HANDLE;
        };
        let work = Duration::from_micros(size as u64 / BYTES_PER_US);
        *end = (*end).max(Instant::now()) + work;
        SUCCESS
    })
}

#[unsafe(no_mangle)]
#[inline(never)]
pub(super) extern "C" fn hipEventRecord(event: *mut c_void, stream: *mut c_void) -> i32 {
    with(|s| {
        let Some(end) = end_of(s, stream as usize) else {
            return INVALID_HANDLE;
        };
        match s.events.get_mut(&(event as usize)) {
            Some(e) => {
                *e = Some(end);
                SUCCESS
            }
            None => INVALID_HANDLE,
        }
    })
}

#[unsafe(no_mangle)]
#[inline(never)]
pub(super) extern "C" fn hipStreamWaitEvent(
    stream: *mut c_void,
    event: *mut c_void,
    _flags: u32,
) -> i32 {
    with(|s| {
        let Some(&done) = s.events.get(&(event as usize)) else {
            return INVALID_HANDLE;
        };
        match s.streams.get_mut(&(stream as usize)) {
            Some(end) => {
                *end = (*end).max(done.unwrap_or(*end));
                SUCCESS
            }
            None => INVALID_HANDLE,
        }
    })
}

#[unsafe(no_mangle)]
#[inline(never)]
pub(super) extern "C" fn hipEventQuery(event: *mut c_void) -> i32 {
    match with(|s| s.events.get(&(event as usize)).copied()) {
        None => INVALID_HANDLE,
        Some(Some(at)) if at > Instant::now() => NOT_READY,
        Some(_) => SUCCESS,
    }
}

#[unsafe(no_mangle)]
#[inline(never)]
pub(super) extern "C" fn hipEventSynchronize(event: *mut c_void) -> i32 {
    match with(|s| s.events.get(&(event as usize)).copied()) {
        None => INVALID_HANDLE,
        Some(at) => {
            if let Some(at) = at {
                sleep_until(at);
            }
            SUCCESS
        }
    }
}

#[unsafe(no_mangle)]
#[inline(never)]
pub(super) extern "C" fn hipStreamSynchronize(stream: *mut c_void) -> i32 {
    match with(|s| end_of(s, stream as usize)) {
        None => INVALID_HANDLE,
        Some(at) => {
            sleep_until(at);
            SUCCESS
        }
    }
}

#[unsafe(no_mangle)]
#[inline(never)]
pub(super) extern "C" fn hipDeviceSynchronize() -> i32 {
    hipStreamSynchronize(std::ptr::null_mut())
}

#[unsafe(no_mangle)]
#[inline(never)]
pub(super) extern "C" fn hipEventDestroy(event: *mut c_void) -> i32 {
    match with(|s| s.events.remove(&(event as usize))) {
        Some(_) => SUCCESS,
        None => INVALID_HANDLE,
    }
}

#[unsafe(no_mangle)]
#[inline(never)]
pub(super) extern "C" fn hipStreamDestroy(stream: *mut c_void) -> i32 {
    match with(|s| s.streams.remove(&(stream as usize))) {
        Some(_) => SUCCESS,
        None => INVALID_HANDLE,
    }
}

// The variants `libamdhip64` exports beside them (per-thread default stream, flags),
// each its plain call, as there: the probes find every function they look for.

#[unsafe(no_mangle)]
#[inline(never)]
pub(super) extern "C" fn hipEventRecord_spt(event: *mut c_void, stream: *mut c_void) -> i32 {
    hipEventRecord(event, stream)
}

#[unsafe(no_mangle)]
#[inline(never)]
pub(super) extern "C" fn hipEventRecordWithFlags(
    event: *mut c_void,
    stream: *mut c_void,
    _flags: u32,
) -> i32 {
    hipEventRecord(event, stream)
}

#[unsafe(no_mangle)]
#[inline(never)]
pub(super) extern "C" fn hipStreamWaitEvent_spt(
    stream: *mut c_void,
    event: *mut c_void,
    flags: u32,
) -> i32 {
    hipStreamWaitEvent(stream, event, flags)
}

#[unsafe(no_mangle)]
#[inline(never)]
pub(super) extern "C" fn hipStreamSynchronize_spt(stream: *mut c_void) -> i32 {
    hipStreamSynchronize(stream)
}

/// # Safety
/// As [`hipStreamCreate`].
#[unsafe(no_mangle)]
#[inline(never)]
pub(super) unsafe extern "C" fn hipStreamCreateWithFlags(
    stream: *mut *mut c_void,
    _flags: u32,
) -> i32 {
    // SAFETY: the caller's contract is hipStreamCreate's.
    unsafe { hipStreamCreate(stream) }
}

/// # Safety
/// As [`hipStreamCreate`].
#[unsafe(no_mangle)]
#[inline(never)]
pub(super) unsafe extern "C" fn hipStreamCreateWithPriority(
    stream: *mut *mut c_void,
    _flags: u32,
    _priority: i32,
) -> i32 {
    // SAFETY: the caller's contract is hipStreamCreate's.
    unsafe { hipStreamCreate(stream) }
}
