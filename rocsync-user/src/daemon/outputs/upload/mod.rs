//! Traces leave the node (`--upload s3://BUCKET/PREFIX`): each trace the daemon writes
//! is queued here and put in the store by a thread of its own, off the probes' path and
//! off the daemon's loop. A failed upload is retried with a growing pause and counted;
//! the trace waits on disk meanwhile (its state beside it, so a restart resumes it), and
//! retention removes a waiting trace only under size pressure, counted as lost.
//!
//! Object keys: `PREFIX/NODE/NAMESPACE/POD/FILE` for a process of a Kubernetes pod,
//! `PREFIX/NODE/FILE` otherwise.

mod credentials;
mod keys;
mod pending;
mod store;

use keys::key;

use crate::daemon::outputs::destination::{Destination, Trace};
pub(crate) use keys::node_name;

use std::{
    collections::VecDeque,
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering::Relaxed},
    },
    time::Duration,
};

use anyhow::{Context as _, Result};

use object_store::{ObjectStore, buffered::BufWriter};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    sync::mpsc,
};

pub(crate) use pending::{forget, waiting};
pub(crate) use store::{S3Url, StoreSettings, check_endpoint, redacted};

/// The pause after a first failure, doubled after each up to the last.
const FIRST_PAUSE: Duration = Duration::from_secs(1);
const LAST_PAUSE: Duration = Duration::from_secs(60);

/// The uploads' totals since the daemon started (kept across reloads).
#[derive(Debug, Default)]
pub(crate) struct Totals {
    pub uploaded: AtomicU64,
    pub bytes: AtomicU64,
    pub failures: AtomicU64,
    /// Traces the store refused for good (403, 401, …), set aside until a restart.
    pub refused: AtomicU64,
    /// Traces retention removed before they were uploaded.
    pub lost: AtomicU64,
}

/// Uploads as `/metrics` shows them (absent with uploads off).
#[derive(Clone, Debug, Default)]
pub(crate) struct UploadView {
    pub uploaded: u64,
    pub bytes: u64,
    pub failures: u64,
    pub refused: u64,
    pub pending: u64,
    pub lost: u64,
}

/// One trace to put in the store.
struct Job {
    trace: PathBuf,
    key: String,
}

/// A job, when it may be tried next, and the pause after its next failure.
struct Retry {
    job: Job,
    at: tokio::time::Instant,
    pause: Duration,
}

impl Retry {
    fn new(job: Job) -> Self {
        Self {
            job,
            at: tokio::time::Instant::now(),
            pause: FIRST_PAUSE,
        }
    }
}

/// Whether the store's answer holds for this object whatever the retries: access denied
/// (403), not authenticated (401), a precondition, or an operation it does not have.
fn refused_for_good(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        let store = cause.downcast_ref::<object_store::Error>().or_else(|| {
            cause
                .downcast_ref::<std::io::Error>()?
                .get_ref()?
                .downcast_ref::<object_store::Error>()
        });
        matches!(
            store,
            Some(
                object_store::Error::PermissionDenied { .. }
                    | object_store::Error::Unauthenticated { .. }
                    | object_store::Error::Precondition { .. }
                    | object_store::Error::NotSupported { .. }
            )
        )
    })
}

/// The uploader of the settings in effect; a reload with other settings replaces it
/// (the old thread stops at its next pause; the new one resumes what waits on disk).
pub(crate) struct Uploads {
    jobs: mpsc::UnboundedSender<Job>,
    destination: S3Url,
    node: String,
    /// Traces queued and not yet in the store.
    waiting: Arc<Queued>,
    stop: Arc<AtomicBool>,
}

/// Traces queued and not yet in the store, shared with the upload thread.
#[derive(Default)]
struct Queued {
    count: AtomicU64,
    /// Removed by retention (uncounted at once, as lost) and not yet met by the thread.
    lost_unmet: AtomicU64,
}

impl Queued {
    fn add(&self) {
        self.count.fetch_add(1, Relaxed);
    }

    fn sub(&self) {
        let _ = (self.count).fetch_update(Relaxed, Relaxed, |n| Some(n.saturating_sub(1)));
    }

    /// The thread found a queued trace gone: uncounted, unless retention did already.
    fn gone(&self) {
        let met = (self.lost_unmet).fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1));
        if met.is_err() {
            self.sub();
        }
    }
}

impl Drop for Uploads {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
    }
}

impl Uploads {
    /// Opens the store and starts the thread, which first takes what already waits in
    /// `dirs` (from before a restart or a reload).
    pub(crate) fn start(
        settings: StoreSettings,
        node: String,
        dirs: &[PathBuf],
        totals: Arc<Totals>,
    ) -> Result<Self> {
        let store = store::open(&settings)?;
        let (jobs, queue) = mpsc::unbounded_channel();
        let waiting = Arc::new(Queued::default());
        let stop = Arc::new(AtomicBool::new(false));
        let worker = Worker {
            store,
            destination: settings.destination.clone(),
            totals,
            waiting: waiting.clone(),
            stop: stop.clone(),
        };
        std::thread::Builder::new()
            .name("rocsync-upload".into())
            .spawn(move || worker.run(queue))
            .context("starting the upload thread")?;
        let uploads = Self {
            jobs,
            destination: settings.destination.clone(),
            node,
            waiting,
            stop,
        };
        for (trace, key) in pending::all_waiting(dirs) {
            uploads.queue(trace, key);
        }
        Ok(uploads)
    }
}

impl Uploads {
    /// Queues `trace`, of a process of `pod` (namespace, name) and `job` (its world
    /// communicator's id) where known.
    fn submit(&self, trace: &Path, pod: Option<(&str, &str)>, job: Option<&str>) {
        let Some(file) = trace.file_name().and_then(|f| f.to_str()) else {
            return;
        };
        let key = key(&self.destination.prefix, &self.node, (pod, job), file);
        if let Err(e) = pending::wait(trace, &key) {
            // The upload goes on; only a restart before it ends would forget it.
            crate::say!(
                "rocsync daemon: warning: recording {}'s upload: {e}",
                trace.display()
            );
        }
        self.queue(trace.to_path_buf(), key);
    }

    fn queue(&self, trace: PathBuf, key: String) {
        self.waiting.add();
        let _ = self.jobs.send(Job { trace, key });
    }

    /// Traces queued and not yet in the store.
    pub(crate) fn waiting(&self) -> u64 {
        self.waiting.count.load(Relaxed)
    }
}

impl Destination for Uploads {
    /// Each file queued, keyed by its process's pod and job.
    fn take(&mut self, trace: &Trace<'_>) -> u64 {
        for (file, pid) in trace.files.iter().zip(trace.pids) {
            let pod = pid.and_then(|p| trace.pods.get(&p));
            let pod = pod.map(|(ns, n)| (ns.as_str(), n.as_str()));
            let job = pid.and_then(|p| trace.jobs.get(&p)).map(String::as_str);
            self.submit(Path::new(file), pod, job);
        }
        0
    }

    /// Retention removed `n` waiting traces (counted lost): no longer waiting, though the
    /// thread meets them only at their turn.
    fn lost(&mut self, n: u64) {
        for _ in 0..n {
            self.waiting.sub();
            self.waiting.lost_unmet.fetch_add(1, Relaxed);
        }
    }
}

/// The upload thread's side.
struct Worker {
    store: Arc<dyn ObjectStore>,
    destination: S3Url,
    totals: Arc<Totals>,
    waiting: Arc<Queued>,
    stop: Arc<AtomicBool>,
}

impl Worker {
    fn run(self, queue: mpsc::UnboundedReceiver<Job>) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build();
        match runtime {
            Ok(rt) => rt.block_on(self.serve(queue)),
            Err(e) => crate::say!("rocsync daemon: error: the upload thread cannot run: {e}"),
        }
    }

    /// Uploads the queue in order. A failure pauses that trace alone (1 s, doubled up to
    /// a minute): the others go on meanwhile, so one key the store rejects cannot hold
    /// the node's traces. A refusal that retrying cannot change (denied, not
    /// authenticated, a precondition) sets the trace aside, counted; its marker stays, so
    /// a restart (new credentials, a new policy) tries it again.
    async fn serve(self, mut queue: mpsc::UnboundedReceiver<Job>) {
        let mut jobs: VecDeque<Retry> = VecDeque::new();
        let mut open = true;
        loop {
            if self.stop.load(Relaxed) {
                return;
            }
            while let Ok(job) = queue.try_recv() {
                jobs.push_back(Retry::new(job));
            }
            let now = tokio::time::Instant::now();
            let Some(i) = jobs.iter().position(|r| r.at <= now) else {
                let next = jobs.iter().map(|r| r.at).min();
                if !open && next.is_none() {
                    return;
                }
                let far = now + LAST_PAUSE;
                tokio::select! {
                    job = queue.recv(), if open => match job {
                        Some(job) => jobs.push_back(Retry::new(job)),
                        None => open = false,
                    },
                    _ = tokio::time::sleep_until(next.unwrap_or(far)) => {}
                }
                continue;
            };
            let mut retry = jobs.remove(i).expect("found");
            match self.put(&retry.job).await {
                Ok(Some(bytes)) => self.uploaded(&retry.job, bytes),
                // Retention removed it meanwhile (and counted it).
                Ok(None) => self.waiting.gone(),
                Err(e) if refused_for_good(&e) => {
                    self.waiting.sub();
                    self.totals.refused.fetch_add(1, Relaxed);
                    crate::say!(
                        "rocsync daemon: warning: the store refused {} as {}: set aside (retried at the next start): {e}: {}",
                        retry.job.trace.display(),
                        retry.job.key,
                        e.root_cause()
                    );
                }
                Err(e) => {
                    self.totals.failures.fetch_add(1, Relaxed);
                    crate::say!(
                        "rocsync daemon: warning: uploading {} (retried in {} s): {e}: {}",
                        retry.job.trace.display(),
                        retry.pause.as_secs(),
                        e.root_cause()
                    );
                    retry.at = tokio::time::Instant::now() + retry.pause;
                    retry.pause = (retry.pause * 2).min(LAST_PAUSE);
                    jobs.push_back(retry);
                }
            }
        }
    }

    fn uploaded(&self, job: &Job, bytes: u64) {
        if let Err(e) = pending::done(&job.trace) {
            crate::say!(
                "rocsync daemon: warning: recording {}'s upload: {e}",
                job.trace.display()
            );
        }
        // No longer waiting before it is counted uploaded: a reader that sees the count
        // sees the waiting one gone.
        self.waiting.sub();
        self.totals.uploaded.fetch_add(1, Relaxed);
        self.totals.bytes.fetch_add(bytes, Relaxed);
        crate::say!(
            "rocsync daemon: uploaded {} to {}/{}",
            job.trace.display(),
            self.destination_root(),
            job.key
        );
    }

    fn destination_root(&self) -> String {
        format!("s3://{}", self.destination.bucket)
    }

    /// Streams the trace into the store (a multipart upload when it is large); `None`
    /// when the trace is gone.
    async fn put(&self, job: &Job) -> Result<Option<u64>> {
        // Never through a link (one planted where a trace was would upload its target).
        let mut file = match tokio::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&job.trace)
            .await
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).context("reading the trace"),
        };
        let mut writer = BufWriter::new(self.store.clone(), job.key.as_str().into());
        let mut chunk = vec![0; 1 << 20];
        let mut bytes = 0u64;
        loop {
            let n = file.read(&mut chunk).await.context("reading the trace")?;
            if n == 0 {
                break;
            }
            if let Err(e) = writer.write_all(&chunk[..n]).await {
                let _ = writer.abort().await;
                return Err(e).context("writing to the store");
            }
            bytes += n as u64;
        }
        // A failed shutdown has already aborted a multipart upload (and `abort` after
        // it would panic).
        writer.shutdown().await.context("completing the object")?;
        Ok(Some(bytes))
    }
}
