//! The program `rocsync demo` traces, on the simulated runtime ([`super::runtime`]): a
//! training loop's shape. A loader thread copies each batch on a copy stream and records
//! an event after it; the main thread makes its compute stream wait on that event,
//! computes (a longer copy stands for the kernels), records the step's end, and every
//! fourth step polls it once and blocks on it; a stream and a device synchronize end it.

use std::{ffi::c_void, ptr::null_mut, sync::mpsc, time::Duration};

use super::runtime::{
    hipDeviceSynchronize, hipEventCreate, hipEventDestroy, hipEventQuery, hipEventRecord,
    hipEventRecord_spt, hipEventRecordWithFlags, hipEventSynchronize, hipGetDevice, hipMemcpyAsync,
    hipSetDevice, hipStreamCreate, hipStreamCreateWithFlags, hipStreamCreateWithPriority,
    hipStreamDestroy, hipStreamSynchronize, hipStreamSynchronize_spt, hipStreamWaitEvent,
    hipStreamWaitEvent_spt,
};

const STEPS: usize = 40;
/// A batch's copy: 16 MiB (1.6 ms simulated); a step's compute: 48 MiB (4.8 ms).
const BATCH: usize = 16 << 20;
const COMPUTE: usize = 48 << 20;
/// The host's own work between two batches.
const HOST_WORK: Duration = Duration::from_millis(2);

/// A handle the runtime writes (`hipStreamCreate`, `hipEventCreate`).
type Handle = *mut c_void;

fn created(create: unsafe extern "C" fn(*mut Handle) -> i32) -> Handle {
    let mut h: Handle = null_mut();
    // SAFETY: `h` is a writable handle for the runtime to fill.
    unsafe { create(&mut h) };
    h
}

/// A handle crossing to the loader thread (the runtime's handles are numbers).
#[derive(Clone, Copy)]
struct Sent(usize);

/// Runs the program; its exit code.
pub(crate) fn run() -> i32 {
    // The runtime's functions this program does not call, kept in the binary (the linker
    // drops what nothing refers to): the probes find every function they look for.
    std::hint::black_box([
        hipGetDevice as *const (),
        hipEventRecord_spt as *const (),
        hipEventRecordWithFlags as *const (),
        hipStreamWaitEvent_spt as *const (),
        hipStreamSynchronize_spt as *const (),
        hipStreamCreateWithFlags as *const (),
        hipStreamCreateWithPriority as *const (),
    ]);
    name_main_thread(c"demo-train");
    hipSetDevice(0);
    let (copy, compute) = (created(hipStreamCreate), created(hipStreamCreate));
    let ready: Vec<Sent> = (0..STEPS)
        .map(|_| Sent(created(hipEventCreate) as usize))
        .collect();
    let step_done = created(hipEventCreate);
    let (tx, rx) = mpsc::channel::<Sent>();
    let copy_stream = Sent(copy as usize);
    let loader = std::thread::Builder::new()
        .name("demo-loader".into())
        .spawn(move || {
            let (copy, mut buffer) = (copy_stream.0 as Handle, vec![0u8; 64]);
            for ev in ready {
                let dst = buffer.as_mut_ptr().cast();
                hipMemcpyAsync(dst, dst, BATCH, 1, copy);
                hipEventRecord(ev.0 as Handle, copy);
                if tx.send(ev).is_err() {
                    return;
                }
                std::thread::sleep(HOST_WORK);
            }
        });
    let Ok(loader) = loader else {
        return 1;
    };
    let mut buffer = vec![0u8; 64];
    for (i, ev) in rx.iter().enumerate() {
        hipStreamWaitEvent(compute, ev.0 as Handle, 0);
        let dst = buffer.as_mut_ptr().cast();
        hipMemcpyAsync(dst, dst, COMPUTE, 3, compute);
        hipEventRecord(step_done, compute);
        if i % 4 == 3 {
            hipEventQuery(step_done);
            hipEventSynchronize(step_done);
        }
        hipEventDestroy(ev.0 as Handle);
    }
    let _ = loader.join();
    hipStreamSynchronize(compute);
    hipDeviceSynchronize();
    hipEventDestroy(step_done);
    hipStreamDestroy(copy);
    hipStreamDestroy(compute);
    0
}

/// The main thread's name (the process's, as the kernel shows it).
fn name_main_thread(name: &std::ffi::CStr) {
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
}
