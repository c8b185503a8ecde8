//! Handing freed memory back to the system: glibc keeps what a thread's arena freed (the
//! daemon's heap stayed at its peak after a load) until asked to trim.

/// Releases the free memory of every malloc arena (a no-op on other C libraries).
pub(crate) fn give_back() {
    #[cfg(target_env = "gnu")]
    // SAFETY: no preconditions; it only releases free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}
