//! Finding and probing what a target maps: runtime libraries (HIP, CUDA, HSA), its
//! dynamic loader, and — for `attach` — the devices its threads chose before the capture.

use anyhow::{Result, bail};
use rocsync_common::{GetDeviceMode, Switch};

use super::{Probed, Session};
use crate::calls::{
    backend::Runtime,
    probes::{
        LibraryReport, attach::ld_so, elf::library::OpenedLibrary, maps, seccomp, seccomp::Returns,
    },
};

impl Session {
    /// Starts capturing `pid` and hooks its dynamic loader for library loads.
    pub fn add_target(&mut self, pid: u32, loader: Option<OpenedLibrary>) -> Result<()> {
        self.check_returns(pid)?;
        // Loader stops are armed only once the loop that answers them runs (see `arm`).
        self.targets.push(pid);
        self.learn_process(pid);
        self.update_target(pid)?;
        self.probes.set_switch(self.switch())?;
        let hooked = match &loader {
            Some(l) => self.hook_loader(l, pid)?,
            None => false,
        };
        if !hooked {
            self.say(&format!(
                "rocsync: warning: no dynamic loader with _dl_debug_state found for pid {pid}; \
                 libraries loaded later are found by periodic rescans only"
            ));
        }
        Ok(())
    }

    /// Refuses a target that a probed return would kill: one under a seccomp filter, on a
    /// kernel whose filters see a uretprobe's system call (`probes::seccomp`).
    fn check_returns(&mut self, pid: u32) -> Result<()> {
        match self.probes.returns_under_seccomp() {
            Ok(Returns::Pass) => Ok(()),
            Ok(Returns::Kill) if seccomp::filtered(pid) => bail!(
                "pid {pid} runs under a seccomp filter, and on this kernel a probed return \
                 kills such a process (its filter sees the uretprobe system call; Linux 6.14 \
                 lets it through): rocsync does not probe it"
            ),
            Ok(Returns::Kill) => Ok(()),
            Err(e) => {
                self.say(&format!(
                    "rocsync: warning: could not tell whether a probed return is safe under \
                     seccomp here: {e:#}"
                ));
                Ok(())
            }
        }
    }

    /// The capture's global settings. File-wide probes run in every process mapping the
    /// file: they filter by the targets, as `attach`'s probes do until its targets are
    /// recorded (see `recording`).
    pub(super) fn switch(&self) -> Switch {
        let mut s = Switch {
            capture: 1,
            by_process: u32::from(self.probes.file_wide() || !self.from_start),
            agents: self.agents.mask(),
            stops_off: u32::from(self.suspended),
            ..Switch::default()
        };
        let mode = if self.temporary_removed {
            GetDeviceMode::Off
        } else {
            GetDeviceMode::Learning
        };
        for &api in &self.choice.temporary {
            s.set_get_device(api, mode);
        }
        s
    }

    /// Hooks a dynamic loader file for `pid`, once per file (a file-wide hook serves every
    /// process of the tree). Returns whether the file has the hook.
    fn hook_loader(&mut self, loader: &OpenedLibrary, pid: u32) -> Result<bool> {
        if !self
            .probed_files
            .insert((loader.dev, loader.ino, Probed::Loader))
        {
            return Ok(true);
        }
        let hooked = self.probes.attach_loader(&loader.path(), pid);
        if !matches!(hooked, Ok(true)) {
            self.probed_files
                .remove(&(loader.dev, loader.ino, Probed::Loader));
        }
        hooked
    }

    /// Probes a runtime library file for `pid`, once per file. Returns whether it was new.
    pub fn attach_library(
        &mut self,
        runtime: &Runtime,
        lib: &OpenedLibrary,
        pid: u32,
        carried: bool,
    ) -> Result<bool> {
        let choice = self.choice.clone();
        let Some(report) =
            self.probe_once(lib, Probed::Runtime(runtime.backend), |probes, path| {
                probes.attach_runtime(runtime, &choice, path, Some(pid), carried)
            })?
        else {
            return Ok(false);
        };
        if report.probed.is_empty() {
            // Named none: carried but stripped (its calls then go unseen), or not carried.
            if report.stripped {
                self.say(&format!(
                    "rocsync: warning: {} may carry its own {} but is stripped (no symbol \
                     table names its functions): calls into it are not traced",
                    report.path.display(),
                    runtime.library
                ));
            } else if self.verbose {
                self.say(&format!(
                    "rocsync: {} carries no {} of its own (its symbol table names none of \
                     its functions)",
                    report.path.display(),
                    runtime.library
                ));
            }
            return Ok(true);
        }

        self.say(&format!(
            "rocsync: attached to {} (pid {pid}): {} functions{}",
            report.path.display(),
            report.probed.len(),
            if carried {
                format!(" of the {} it carries (linked statically)", runtime.library)
            } else {
                String::new()
            }
        ));
        self.note_bystanders(lib);
        if self.verbose {
            for (p, names) in &report.probed {
                self.say(&format!(
                    "rocsync:   {:#x} {}: probe on {}",
                    p.offset,
                    names.join(" = "),
                    p.shown()
                ));
            }
        }
        if !report.missing.is_empty() {
            self.say(&format!(
                "rocsync: warning: {} does not export {}; skipped",
                report.path.display(),
                report.missing.join(", ")
            ));
        }
        self.libraries.push(report);
        Ok(true)
    }

    /// File-wide probes trap in every process mapping the file: say which ones outside
    /// the traced tree do now (bench/process-tree.md measures what it costs them).
    fn note_bystanders(&self, lib: &OpenedLibrary) {
        if !self.probes.file_wide() {
            return;
        }
        let others = maps::processes_mapping(lib.dev_pair(), lib.ino, &self.targets);
        if others.is_empty() {
            return;
        }
        let shown: Vec<String> = others.iter().take(8).map(u32::to_string).collect();
        self.say(&format!(
            "rocsync: note: {} process(es) outside the traced tree map {} (pid {}{}): while \
             this capture runs, each hooked call they make takes a uprobe trap (about 1.5 µs); \
             --no-follow keeps the probes in the target alone",
            others.len(),
            lib.shown.display(),
            shown.join(", "),
            if others.len() > 8 { ", …" } else { "" }
        ));
    }

    /// Runs `attach` on a library file not probed yet (one file seen through two paths is
    /// probed once); a failure leaves it unprobed, for a later scan. The report names the
    /// file as the target sees it.
    fn probe_once(
        &mut self,
        lib: &OpenedLibrary,
        what: Probed,
        attach: impl FnOnce(
            &mut crate::calls::probes::Probes,
            &std::path::Path,
        ) -> Result<LibraryReport>,
    ) -> Result<Option<LibraryReport>> {
        if !self.probed_files.insert((lib.dev, lib.ino, what)) {
            return Ok(None);
        }
        match attach(&mut self.probes, &lib.path()) {
            Ok(mut report) => {
                report.path = lib.shown.clone();
                Ok(Some(report))
            }
            Err(e) => {
                self.probed_files.remove(&(lib.dev, lib.ino, what));
                Err(e.context(format!("probing {}", lib.shown.display())))
            }
        }
    }

    /// Probes an HSA runtime file for `pid`, once per file.
    fn attach_hsa(&mut self, lib: &OpenedLibrary, pid: u32) -> Result<()> {
        let Some(report) = self.probe_once(lib, Probed::Hsa, |probes, path| {
            probes.attach_hsa(path, pid)
        })?
        else {
            return Ok(());
        };
        self.say(&format!(
            "rocsync: attached to {} (pid {pid}): HSA queues and doorbells",
            report.path.display()
        ));
        self.note_bystanders(lib);
        self.libraries.push(report);
        Ok(())
    }

    /// Scans every target again (see [`Session::scan`]); returns how many runtime
    /// libraries were probed anew.
    pub(super) fn rescan(&mut self) -> usize {
        let before = self.libraries.len();
        for pid in self.targets.clone() {
            let _ = self.scan(pid);
        }
        self.libraries.len() - before
    }

    /// Reads `pid`'s maps and probes every runtime library (HIP, CUDA, HSA) not yet
    /// probed, each opened through the kernel's link to the mapped file. Returns how many
    /// such libraries the process maps in all.
    pub fn scan(&mut self, pid: u32) -> Result<usize> {
        let text = match crate::os::procfs::maps(pid) {
            Ok(t) => t,
            // The process is gone; its exit ends the capture elsewhere.
            Err(_) => return Ok(0),
        };
        let mappings = maps::parse(&text);
        // A followed child may run under another loader (an exec into a container).
        if self.follow
            && let Some(loader) = ld_so::of_process(pid, &mappings)
        {
            let _ = self.hook_loader(&loader, pid);
        }
        // A process that put itself under a seccomp filter since (a container's entry
        // point, a sandbox) gets none of its runtimes probed where that would kill it
        // (the HSA runtime's queue probes have returns too): said once.
        if let Err(e) = self.check_returns(pid) {
            if self.seccomp_refused.insert(pid) {
                self.say(&format!("rocsync: warning: {e:#}"));
            }
            return Ok(0);
        }
        let mut n = 0;
        for m in maps::libraries(&mappings, maps::is_hsa_runtime) {
            n += 1;
            if let Err(e) =
                OpenedLibrary::of_mapping(pid, m).and_then(|lib| self.attach_hsa(&lib, pid))
            {
                self.say(&format!("rocsync: warning: {e:#}"));
            }
        }
        self.note_excluded(&mappings);
        for runtime in self.runtimes.clone() {
            // The driver, unless one of its functions was asked for.
            if !runtime.apis().any(|a| self.choice.probes(a)) {
                continue;
            }
            let copies = maps::libraries(&mappings, |n| runtime.matches_library(n))
                .map(|m| (m, false))
                .chain(maps::libraries(&mappings, |n| runtime.carried_by(n)).map(|m| (m, true)));
            for (m, carried) in copies {
                n += usize::from(!carried);
                let attached = OpenedLibrary::of_mapping(pid, m)
                    .and_then(|lib| self.attach_library(runtime, &lib, pid, carried));
                if let Err(e) = attached {
                    self.say(&format!("rocsync: warning: {e:#}"));
                }
            }
        }
        Ok(n)
    }

    /// Remembers the runtimes `--backend` left out that `mappings` hold: a capture of
    /// nothing then says it mapped one, rather than none.
    fn note_excluded(&mut self, mappings: &[maps::Mapping]) {
        let chosen = |r: &Runtime| self.runtimes.iter().any(|c| c.backend == r.backend);
        for r in crate::calls::backend::RUNTIMES.iter() {
            if r.probed_by_default()
                && !chosen(r)
                && maps::libraries(mappings, |n| r.matches_library(n))
                    .next()
                    .is_some()
            {
                self.excluded.insert(r.name);
            }
        }
    }

    /// While temporary `*GetDevice` probes are attached: removes them once every live
    /// thread of the targets has a known device, or after `--learn-devices`.
    pub(super) fn learn_devices(&mut self) {
        if let Some(t) = self.temporary_detaching.take_if(|t| t.is_finished()) {
            let _ = t.join();
            let learned = self
                .pipeline
                .stats
                .thread_devices
                .values()
                .filter(|(_, l)| *l)
                .count();
            self.say(&format!(
                "rocsync: learned the device of {learned} thread(s) from *GetDevice; \
                 its probes are removed (they cost a trap per call)"
            ));
        }
        if !self.probes.has_temporary() {
            return;
        }
        let since = *self
            .learning_since
            .get_or_insert_with(std::time::Instant::now);
        let known = &self.pipeline.stats.thread_devices;
        let all_known = self.targets.iter().all(|&pid| {
            crate::os::procfs::threads(pid)
                .iter()
                .all(|&tid| known.contains_key(&(pid, tid)))
        });
        if all_known || since.elapsed() >= self.learn_for {
            // Their entries go before their returns: from here on their calls are not
            // recorded, so that a return still probed is not counted as a lost entry.
            self.temporary_removed = true;
            if let Err(e) = self.probes.set_switch(self.switch()) {
                self.say(&format!("rocsync: warning: {e:#}"));
            }
            self.temporary_detaching = Some(self.probes.detach_temporary());
        }
    }
}
