//! Releasing what rocsync stopped when its process ends, however it ends (the probes'
//! `release` module): a SIGKILL of its whole cgroup leaves no helper process alive.
//!
//! The kernel functions (kfuncs) that continue another process are written in the probes
//! as calls of helpers with the ids below, which no helper has (helper ids stay under a
//! thousand); userspace rewrites each such call into a call of the kernel function before
//! loading, since aya 0.14 links no kfunc. A kernel without them keeps the placeholders,
//! and the program is then never loaded.

/// `bpf_task_from_pid(pid) -> task or NULL` (Linux ≥ 6.1), a reference to release.
pub const KFUNC_TASK_FROM_PID: u32 = 0x7f00_0001;
/// `bpf_send_signal_task(task, sig, pid_type, value)` (Linux ≥ 6.13).
pub const KFUNC_SEND_SIGNAL_TASK: u32 = 0x7f00_0002;
/// `bpf_task_release(task)`.
pub const KFUNC_TASK_RELEASE: u32 = 0x7f00_0003;

/// Each placeholder with the kernel function it stands for.
pub const KFUNCS: [(u32, &str); 3] = [
    (KFUNC_TASK_FROM_PID, "bpf_task_from_pid"),
    (KFUNC_SEND_SIGNAL_TASK, "bpf_send_signal_task"),
    (KFUNC_TASK_RELEASE, "bpf_task_release"),
];

/// `RELEASE` slot: the tgid of the rocsync process whose exit releases its stops.
pub const RELEASE_HOLDER: u32 = 0;
/// `RELEASE` slot: non-zero once that process has begun to exit (no stop after it).
pub const RELEASE_GONE: u32 = 1;
/// `RELEASE` slots.
pub const RELEASE_SLOTS: u32 = 2;
