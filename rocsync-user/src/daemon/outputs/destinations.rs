//! The destinations in effect, as the configuration sets them: each written trace is
//! handed to every one in turn (`destination.rs`).

use std::{path::Path, sync::Arc};

use anyhow::Result;

use crate::daemon::{
    outputs::{
        destination::{Destination, Trace},
        retention::Retention,
        statedir::{self, StateDir},
        upload::{self, StoreSettings, UploadView, Uploads},
    },
    untrusted,
};

/// The settings the destinations follow (the configuration's `upload*`, `node_name`,
/// `state_dir` and `retention*`).
#[derive(Clone, Copy)]
pub(crate) struct Settings<'a> {
    pub upload: Option<&'a StoreSettings>,
    pub node_name: Option<&'a str>,
    pub state_dir: &'a Path,
    pub retention: Retention,
}

/// The destinations in effect: the settings' upload, if any, and the state directory.
pub(crate) struct Destinations {
    uploads: Option<Uploads>,
    kept: StateDir,
    /// The uploads' totals since the daemon started (kept across reloads), and the
    /// traces lost before their upload.
    totals: Arc<upload::Totals>,
}

impl Destinations {
    /// The destinations `c` asks for; an upload that cannot start is an error.
    pub(crate) fn start(c: Settings<'_>) -> Result<Self> {
        let totals = Arc::default();
        Ok(Self {
            uploads: uploads_of(c, &totals)?,
            kept: StateDir::of(c.state_dir, c.retention),
            totals,
        })
    }

    /// Each in turn: the upload first, so that the trace's marker says it waits before
    /// retention looks (a waiting trace is spared by age, and counted lost when removed).
    fn all(&mut self) -> [Option<&mut dyn Destination>; 2] {
        let uploads = self.uploads.as_mut().map(|u| u as &mut dyn Destination);
        [uploads, Some(&mut self.kept)]
    }

    /// Hands `trace` to every destination; what one removed that waited for another is
    /// counted lost once, and each told.
    pub(crate) fn written(&mut self, trace: &Trace<'_>) {
        let lost: u64 = self
            .all()
            .into_iter()
            .flatten()
            .map(|d| d.take(trace))
            .sum();
        if lost > 0 {
            (self.totals.lost).fetch_add(lost, std::sync::atomic::Ordering::Relaxed);
            self.all().into_iter().flatten().for_each(|d| d.lost(lost));
        }
    }

    /// Each says what its log held back.
    pub(crate) fn flush(&mut self) {
        self.all().into_iter().flatten().for_each(|d| d.flush());
    }

    /// Each says all its log held back: the daemon stops.
    pub(crate) fn say_held(&mut self) {
        self.all().into_iter().flatten().for_each(|d| d.say_held());
    }

    /// The destinations a reloaded configuration asks for (`new`; `old` in effect until
    /// now): a new uploader where its settings changed (the old one stops; what waits on
    /// disk is the new one's). Returns false where it cannot start: said, and the old
    /// upload settings kept.
    pub(crate) fn reload(&mut self, new: Settings<'_>, old: Settings<'_>) -> bool {
        self.kept.renew(new.state_dir, new.retention);
        if (new.upload, new.node_name, new.state_dir) == (old.upload, old.node_name, old.state_dir)
        {
            return true;
        }
        self.uploads = None;
        match uploads_of(new, &self.totals) {
            Ok(u) => self.uploads = u,
            Err(e) => {
                crate::say!(
                    "rocsync daemon: warning: keeping the upload settings: {}",
                    untrusted::shown(&format!("{e:#}"))
                );
                let kept = Settings {
                    upload: old.upload,
                    node_name: old.node_name,
                    ..new
                };
                self.uploads = uploads_of(kept, &self.totals).ok().flatten();
                return false;
            }
        }
        true
    }

    /// Uploads as `/metrics` shows them (absent with uploads off).
    pub(crate) fn upload_view(&self) -> Option<UploadView> {
        use std::sync::atomic::Ordering::Relaxed;
        let t = &self.totals;
        self.uploads.as_ref().map(|u| UploadView {
            uploaded: t.uploaded.load(Relaxed),
            bytes: t.bytes.load(Relaxed),
            failures: t.failures.load(Relaxed),
            refused: t.refused.load(Relaxed),
            pending: u.waiting(),
            lost: t.lost.load(Relaxed),
        })
    }
}

/// The uploader `c` asks for, if any, of the traces in its state directory; it first
/// takes what already waits there (from before a restart or a reload).
fn uploads_of(c: Settings<'_>, totals: &Arc<upload::Totals>) -> Result<Option<Uploads>> {
    let Some(settings) = c.upload else {
        return Ok(None);
    };
    let node = upload::node_name(c.node_name);
    let dirs = statedir::trace_dirs(c.state_dir);
    let uploads = Uploads::start(settings.clone(), node, &dirs, totals.clone())?;
    crate::say!(
        "rocsync daemon: traces are uploaded to {} ({} waiting)",
        settings.destination,
        uploads.waiting()
    );
    Ok(Some(uploads))
}
