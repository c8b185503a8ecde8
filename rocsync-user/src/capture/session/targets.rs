//! A session's targets: what each says of itself (name, rank, visible devices) and the
//! settings the kernel keeps for it, armed for loader stops once the loop runs.

use anyhow::{Context as _, Result};
use rocsync_common::Config;

use super::{RESCAN_EVERY, Session};
use crate::{
    calls::probes::{attach::ld_so, maps},
    os::{environ, procfs, procfs::Stat},
};

impl Session {
    /// Reads what `pid` says of itself (name, rank), keeping the last reading when it is
    /// gone.
    pub(super) fn learn_process(&mut self, pid: u32) {
        let Some(mut id) = environ::read(pid) else {
            return;
        };
        // The names its threads had when first seen stay theirs.
        if let Some(old) = self.processes.remove(&pid) {
            id.info.threads = old.threads;
        }
        self.processes.insert(pid, id.info);
        let changed = match id.visible {
            Some(v) => self.visible.insert(pid, v.clone()) != Some(v),
            None => self.visible.remove(&pid).is_some(),
        };
        if changed && self.targets.contains(&pid) {
            // Before its first queue: its agents are numbered as its HIP devices.
            if let Err(e) = self.update_target(pid) {
                self.say(&format!("rocsync: warning: pid {pid}: {e:#}"));
            }
        }
    }

    /// Adds a running process and, when `follow`, the processes it started already (a
    /// launcher's ranks; later ones the kernel adds), each claimed; returns how many
    /// runtime libraries they map.
    pub fn add_running(&mut self, pid: u32, follow: bool) -> Result<usize> {
        let text = procfs::maps(pid).with_context(|| format!("cannot read /proc/{pid}/maps"))?;
        // Hook the loader before the scan, so a library loaded in between is not missed.
        self.add_target(pid, ld_so::of_process(pid, &maps::parse(&text)))?;
        let mut tree = vec![pid];
        for child in procfs::descendants(pid).into_iter().filter(|_| follow) {
            let Ok(text) = procfs::maps(child) else {
                continue; // gone already
            };
            self.claim(child)
                .context("--no-follow traces the process alone")?;
            self.add_target(child, ld_so::of_process(child, &maps::parse(&text)))?;
            tree.push(child);
        }
        let mut mapped = 0;
        for p in tree {
            mapped += self.scan(p)?;
        }
        Ok(mapped)
    }

    /// A child its parent forked: the parent's name, rank and visible devices (a fork
    /// copies the environment) until its own are read — it may be gone by then.
    pub(super) fn learn_child(&mut self, parent: u32, child: u32) {
        if let Some(info) = self.processes.get(&parent).cloned() {
            self.processes.entry(child).or_insert(info);
        }
        if let Some(v) = self.visible.get(&parent).cloned() {
            self.visible.entry(child).or_insert(v);
        }
        self.learn_process(child);
    }

    /// A target's settings: capturing; its loader stop once armed; the agent filter;
    /// following; and its GPU agents numbered as its HIP devices.
    pub(super) fn config(&self, pid: u32) -> Config {
        let mut c = Config {
            capture: 1,
            stop_on_link_map: u32::from(self.armed && !self.not_stopped.contains(&pid)),
            agents: self.agents.mask(),
            follow: u32::from(self.follow),
            ..Config::INACTIVE
        };
        if let Some(visible) = self.visible.get(&pid) {
            environ::number_agents(&mut c, visible);
        }
        c
    }

    /// Arms the loader stop of every target: from now on each link-map change that adds
    /// objects stops the target until the loop has probed what it mapped. Call right
    /// before [`Session::run`]; should anything fail in between, dropping the session
    /// continues whatever was stopped.
    ///
    /// A process attached to that is a terminal's foreground job is not stopped: its
    /// shell would see the stop (bash prints "Stopped" and takes the terminal back).
    /// Libraries it loads later are then found by the rescans, so their first calls may
    /// be missed; rocsync says so. (Under `run`, rocsync is the parent: no shell sees.)
    pub fn arm(&mut self) -> Result<()> {
        self.armed = true;
        for pid in self.targets.clone() {
            let foreground = !self.from_start && Stat::of(pid).is_some_and(|s| s.in_foreground());
            if foreground {
                self.say(&format!(
                    "rocsync: warning: pid {pid} is the foreground job of a terminal; it is not \
                     held at library loads (its shell would see it stopped), so a runtime it \
                     loads later is found within {}s and its first calls may be missed",
                    RESCAN_EVERY.as_secs()
                ));
                self.not_stopped.insert(pid);
            }
            self.update_target(pid)?;
        }
        Ok(())
    }
}
