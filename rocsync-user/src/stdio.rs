//! Whether standard output was usable when rocsync was started. Rust's runtime fills a
//! closed standard descriptor with `/dev/null` before `main`, so `-o -` with standard
//! output closed wrote nowhere and said `trace: -`; the binary runs [`check_at_load`]
//! earlier, from `.init_array`, to see it as it was.

use std::sync::atomic::{AtomicBool, Ordering};

static STDOUT_UNWRITABLE: AtomicBool = AtomicBool::new(false);

/// Notes whether standard output is closed or read-only. Runs before Rust's runtime (a
/// constructor of the binary): only a system call and an atomic store.
pub extern "C" fn check_at_load() {
    // SAFETY: F_GETFL on a descriptor number reads its flags, nothing else.
    let flags = unsafe { libc::fcntl(1, libc::F_GETFL) };
    if flags < 0 || flags & libc::O_ACCMODE == libc::O_RDONLY {
        STDOUT_UNWRITABLE.store(true, Ordering::Relaxed);
    }
}

/// Whether standard output was closed (or read-only) when rocsync started.
pub fn stdout_unwritable() -> bool {
    STDOUT_UNWRITABLE.load(Ordering::Relaxed)
}
