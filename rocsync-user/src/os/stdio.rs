//! Whether standard output was usable when rocsync was started. Rust's runtime fills a
//! closed standard descriptor with `/dev/null` before `main`, so `-o -` with standard
//! output closed wrote nowhere and said `trace: -`; the binary runs [`check_at_load`]
//! earlier, from `.init_array`, to see it as it was. And what the commands print, where
//! a reader gone (`| head -1`) is an error `main` ends quietly on ([`closed_pipe`]).

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

/// Writes `text` to standard output (an error, not a panic, when its reader is gone).
pub fn print(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(anyhow::Error::from)
        .map_err(|e| e.context("writing to standard output"))
}

/// Whether `e` is a write to a pipe whose reader is gone (`rocsync report X | head -1`):
/// the command ends there quietly, as other tools do.
pub fn closed_pipe(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<std::io::Error>())
        .any(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}
