//! rocsync's stderr, written by a thread of its own. A stderr nobody reads (a pipe whose
//! reader is busy, a terminal paused with Ctrl-S, a stalled log collector) blocks the
//! thread that writes to it; were that the capture loop, a target stopped at a library
//! load would stay stopped until stderr moved, and a daemon would stop draining its
//! probes. So messages wait in a bounded queue; past it they are dropped and counted, and
//! the count is said once stderr moves again. At exit rocsync waits for the queue
//! ([`flush`]): what was said is written, in order.

use std::{
    io::Write,
    sync::{
        Mutex, OnceLock,
        atomic::{AtomicU64, Ordering},
        mpsc::{Receiver, SyncSender, TrySendError, sync_channel},
    },
};

/// Messages (and status line frames) that may wait.
const QUEUE: usize = 1024;

enum Item {
    /// A message: counted when dropped.
    Line(String),
    /// A frame of the status line: superseded by the next, dropped uncounted.
    Frame(String),
    /// Messages dropped here, the queue being full.
    Dropped(u64),
    /// Answered once everything before it is written.
    Flush(SyncSender<()>),
}

struct Queue {
    items: SyncSender<Item>,
    /// Messages dropped since the last count was queued.
    dropped: AtomicU64,
}

static STDERR: OnceLock<Queue> = OnceLock::new();

fn queue() -> &'static Queue {
    STDERR.get_or_init(|| start(Box::new(std::io::stderr())))
}

/// A queue written to `out` by a thread of its own.
fn start(out: Box<dyn Write + Send>) -> Queue {
    let (items, rx) = sync_channel(QUEUE);
    // No thread (out of processes or memory): the queue is disconnected and messages
    // are written by whoever says them, as before.
    let _ = std::thread::Builder::new()
        .name("rocsync-stderr".into())
        .spawn(move || write_all(rx, out));
    Queue {
        items,
        dropped: AtomicU64::new(0),
    }
}

fn write_all(rx: Receiver<Item>, mut out: Box<dyn Write + Send>) {
    for item in rx {
        // A stderr that cannot be written (its reader gone) must not end rocsync, as
        // `eprintln!` would by panicking: what cannot be said is dropped.
        let _ = match item {
            Item::Line(s) | Item::Frame(s) => out.write_all(s.as_bytes()),
            Item::Dropped(n) => writeln!(
                out,
                "rocsync: {n} message(s) dropped here: stderr was not being read"
            ),
            Item::Flush(done) => {
                let _ = done.send(());
                Ok(())
            }
        }
        .and_then(|_| out.flush());
    }
}

impl Queue {
    /// Queues a message, after the count of those dropped before it.
    fn line(&self, text: String) {
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 && self.full(Item::Dropped(dropped)) {
            self.dropped.fetch_add(dropped + 1, Ordering::Relaxed);
        } else if self.full(Item::Line(text)) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Queues `item` unless the queue is full; without a writer thread, writes it.
    fn full(&self, item: Item) -> bool {
        match self.items.try_send(item) {
            Err(TrySendError::Full(_)) => true,
            Err(TrySendError::Disconnected(Item::Line(s) | Item::Frame(s))) => {
                let _ = std::io::stderr().write_all(s.as_bytes());
                false
            }
            _ => false,
        }
    }

    fn flush(&self) {
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            let _ = self.items.send(Item::Dropped(dropped));
        }
        let (done, wait) = sync_channel(1);
        if self.items.send(Item::Flush(done)).is_ok() {
            let _ = wait.recv();
        }
    }

    /// As `flush`, giving up after `limit` (or at once if the queue is full).
    fn flush_within(&self, limit: std::time::Duration) {
        let (done, wait) = sync_channel(1);
        if self.items.try_send(Item::Flush(done)).is_ok() {
            let _ = wait.recv_timeout(limit);
        }
    }
}

/// Says one line (the `say!` macro's body).
pub fn line(args: std::fmt::Arguments<'_>) {
    queue().line(format!("{args}\n"));
}

/// Waits until everything said is written (blocking: at exit, with no target stopped).
pub fn flush() {
    if let Some(q) = STDERR.get() {
        q.flush();
    }
}

/// Waits at most `limit` for what was said to be written: before rocsync stops itself
/// (Ctrl-Z), with a stderr that may not be read.
pub fn flush_within(limit: std::time::Duration) {
    if let Some(q) = STDERR.get() {
        q.flush_within(limit);
    }
}

/// The status line's terminal: what indicatif draws goes through the queue, one frame per
/// flush, so a paused terminal blocks no one.
#[derive(Debug, Default)]
pub struct StatusTerm {
    frame: Mutex<String>,
}

impl StatusTerm {
    fn push(&self, s: &str) -> std::io::Result<()> {
        self.frame.lock().map_or(Ok(()), |mut f| {
            f.push_str(s);
            Ok(())
        })
    }

    /// Moves the cursor `n` places in `direction` (ANSI: A up, B down, C right, D left).
    fn cursor(&self, n: usize, direction: char) -> std::io::Result<()> {
        if n == 0 {
            return Ok(());
        }
        self.push(&format!("\x1b[{n}{direction}"))
    }
}

impl indicatif::TermLike for StatusTerm {
    fn width(&self) -> u16 {
        // A terminal that does not say its size (0 columns) is taken as 80 wide.
        match rustix::termios::tcgetwinsize(std::io::stderr()) {
            Ok(w) if w.ws_col > 0 => w.ws_col,
            _ => 80,
        }
    }
    fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
        self.cursor(n, 'A')
    }
    fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
        self.cursor(n, 'B')
    }
    fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
        self.cursor(n, 'C')
    }
    fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
        self.cursor(n, 'D')
    }
    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.push(s)?;
        self.push("\n")
    }
    fn write_str(&self, s: &str) -> std::io::Result<()> {
        self.push(s)
    }
    fn clear_line(&self) -> std::io::Result<()> {
        self.push("\r\x1b[2K")
    }
    fn flush(&self) -> std::io::Result<()> {
        let frame = self
            .frame
            .lock()
            .map(|mut f| std::mem::take(&mut *f))
            .unwrap_or_default();
        if !frame.is_empty() {
            let _ = queue().full(Item::Frame(frame));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Condvar};

    use super::*;

    /// Whether a write began, whether it may end, and what was written.
    type Written = Mutex<(bool, bool, Vec<u8>)>;

    /// A stderr that blocks until opened, then keeps what is written.
    #[derive(Clone, Default)]
    struct Held(Arc<(Written, Condvar)>);

    impl Held {
        fn entered(&self) {
            let (lock, cv) = &*self.0;
            drop(cv.wait_while(lock.lock().unwrap(), |g| !g.0).unwrap());
        }
        fn open(&self) {
            self.0.0.lock().unwrap().1 = true;
            self.0.1.notify_all();
        }
        fn text(&self) -> String {
            String::from_utf8(self.0.0.lock().unwrap().2.clone()).unwrap()
        }
    }

    impl Write for Held {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            let (lock, cv) = &*self.0;
            let mut g = lock.lock().unwrap();
            g.0 = true;
            cv.notify_all();
            let mut g = cv.wait_while(g, |g| !g.1).unwrap();
            g.2.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_blocked_stderr_blocks_no_caller_and_what_was_dropped_is_counted() {
        let held = Held::default();
        let q = start(Box::new(held.clone()));
        // The writer takes the first and blocks in it; QUEUE more wait; the rest drop.
        let n = QUEUE + 100;
        q.line("m0\n".into());
        held.entered();
        for i in 1..n {
            q.line(format!("m{i}\n"));
        }
        held.open();
        // Just after, the queue may still be full: flush (it says the count), then say more.
        q.flush();
        q.line("after\n".into());
        q.flush();
        let text = held.text();
        let lines: Vec<&str> = text.lines().collect();
        let kept = lines.iter().filter(|l| l.starts_with('m')).count();
        let dropped: usize = lines
            .iter()
            .find_map(|l| {
                l.strip_prefix("rocsync: ")?
                    .strip_suffix(" message(s) dropped here: stderr was not being read")
            })
            .expect("the count is said")
            .parse()
            .unwrap();
        assert_eq!(kept + dropped, n, "{text}");
        assert_eq!(dropped, n - 1 - QUEUE, "{text}");
        // In order: the messages kept, then the count, then what came after.
        let kept_in_order: Vec<&str> = lines
            .iter()
            .copied()
            .filter(|l| l.starts_with('m'))
            .collect();
        let expected: Vec<String> = (0..kept).map(|i| format!("m{i}")).collect();
        assert_eq!(kept_in_order, expected);
        // The count where the messages were dropped: after those kept, before "after".
        assert_eq!(lines.len(), kept + 2);
        assert!(lines[kept].contains("dropped here"), "{}", lines[kept]);
        assert_eq!(lines[kept + 1], "after");
    }
}
