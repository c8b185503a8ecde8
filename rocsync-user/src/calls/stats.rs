//! One account of a capture, filled by every stage: what was captured, what was resolved,
//! and every record lost, dropped, unpaired or filtered, by kind. The summary and the
//! trace's `rocsync` object are both rendered from it.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use rocsync_common::Op;

use crate::calls::resolve::{Row, Unresolved};

/// Calls of one API as written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ApiCount {
    pub calls: u64,
    /// Returned an error code.
    pub failed: u64,
    /// Written without a return: in flight at stop, or their exit record was lost.
    pub no_return: u64,
}

/// Failed ring reservations in the probes, by record kind, summed over CPUs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelDrops {
    pub entries: u64,
    pub exits: u64,
    pub library_loads: u64,
    pub queues: u64,
    pub packets: u64,
    /// Packets a doorbell published beyond what one probe run reads.
    pub packets_truncated: u64,
    /// Out-parameters whose value at return could not be read.
    pub out_params: u64,
    /// Packets the packet processor consumed before the doorbell probe read them.
    pub packets_unread: u64,
    /// Not a loss: `*GetDevice` calls `attach`'s temporary probes trapped but did not
    /// record — a thread's calls once its device was learned, and calls made while the
    /// probes were being removed.
    pub get_device_unrecorded: u64,
    /// Communicator or stream state a process was refused past its quota.
    pub comm_state: u64,
    /// Exiting threads' names the ring buffer had no room for.
    pub thread_names: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CaptureStats {
    pub per_api: BTreeMap<&'static str, ApiCount>,
    /// Calls dropped in the kernel by `--agents`, per API.
    pub filtered: BTreeMap<&'static str, u64>,
    pub packets: BTreeMap<&'static str, u64>,
    /// Packets of a queue created before the capture (no track to put them on).
    pub packets_unknown_queue: u64,
    pub queues: u64,
    /// Queues created before the capture, found at their first doorbell (agent unknown).
    pub queues_discovered: u64,
    pub waits_resolved: u64,
    pub unresolved: BTreeMap<Unresolved, u64>,
    pub kernel: KernelDrops,
    /// Correlation ids that never arrived.
    pub lost_ids: u64,
    /// Records delivered after their place in the order was given up.
    pub late: u64,
    /// Entries whose exit record never came (the call is written without a return).
    pub unpaired_entries: u64,
    /// Exit records with no entry to pair with (the entry was lost).
    pub unpaired_exits: u64,
    /// In a daemon trace or flight dump, unmatched exit records with no entry of their
    /// thread before them: calls begun before the records (in flight when recording
    /// began, or entered before a flight recorder's span). Not a loss of its own: an
    /// entry lost in the ring is also counted as a lost id.
    pub calls_begun_before: u64,
    pub undecodable: u64,
    /// Calls the budget's duty cycle kept from a daemon trace or flight recorder dump:
    /// made while their probes were off, estimated (`rocsync.parameters.not_recorded`
    /// says the spans, per API).
    pub duty_cycled: u64,
    /// Times the probes woke the reader (at most once per drain; each an interrupt on
    /// their CPU). Said with `-v`.
    pub wakes: u64,
    /// Times rocsync was suspended (Ctrl-Z), and for how long in all: the targets were not
    /// held at library loads meanwhile, so a runtime loaded then is traced from the resume.
    pub suspensions: u64,
    pub suspended_ms: u64,
    /// Processes that made a written call.
    pub pids: std::collections::BTreeSet<u32>,
    /// Threads whose current device is known: (pid, tid) → (device, learned from a
    /// `*GetDevice` call rather than `*SetDevice`).
    pub thread_devices: BTreeMap<(u32, u32), (i32, bool)>,
    /// A converted raw capture had no trailer (cut short): where it ended. What followed,
    /// and the losses the trailer counts, are unknown.
    pub truncated: Option<String>,
    /// A live capture: when its targets' calls were recorded from and until (µs since
    /// the epoch), said in its summary (its trace's parameters hold them).
    pub recorded: Option<(u64, u64)>,
}

impl CaptureStats {
    /// Counts a row as it is written (or, filtered, dropped).
    pub fn row(&mut self, row: &Row) {
        let c = &row.call;
        if c.filtered {
            *self.filtered.entry(c.api.symbol()).or_default() += 1;
            return;
        }
        self.pids.insert(c.pid);
        if c.ok() {
            match c.api.op() {
                Op::SetDevice => {
                    self.thread_devices
                        .insert((c.pid, c.tid), (c.args[0] as i32, false));
                }
                Op::GetDevice => {
                    self.thread_devices
                        .entry((c.pid, c.tid))
                        .or_insert((c.args[0] as i32, true));
                }
                _ => {}
            }
        }
        let n = self.per_api.entry(c.api.symbol()).or_default();
        n.calls += 1;
        match c.ret {
            // Entry only: no return probed, `ret` holds its number.
            _ if c.api.entry_only() => {}
            None => n.no_return += 1,
            Some(0) => {}
            Some(_) => n.failed += 1,
        }
        if row.producer.is_some() {
            self.waits_resolved += 1;
        }
        if let Some(why) = row.unresolved {
            *self.unresolved.entry(why).or_default() += 1;
        }
    }

    pub fn calls(&self) -> u64 {
        self.per_api.values().map(|n| n.calls).sum()
    }

    pub fn waits_unresolved(&self) -> u64 {
        self.unresolved.values().sum()
    }

    /// Every count of something lost, by name (the trace's `drops` object).
    pub fn drops(&self) -> Vec<(&'static str, u64)> {
        let k = &self.kernel;
        vec![
            ("entry_records", k.entries),
            ("exit_records", k.exits),
            ("queue_records", k.queues),
            ("packet_records", k.packets),
            ("library_loads", k.library_loads),
            ("packets_truncated", k.packets_truncated),
            ("packets_unread", k.packets_unread),
            ("packets_unknown_queue", self.packets_unknown_queue),
            ("out_params", k.out_params),
            ("comm_state", k.comm_state),
            ("thread_names", k.thread_names),
            ("lost_ids", self.lost_ids),
            ("late_records", self.late),
            ("unpaired_entries", self.unpaired_entries),
            ("unpaired_exits", self.unpaired_exits),
            ("undecodable", self.undecodable),
            ("duty_cycled_calls", self.duty_cycled),
        ]
    }

    /// The counts part of the trace's `rocsync` object.
    pub fn to_json(&self) -> Value {
        let unresolved: serde_json::Map<String, Value> = Unresolved::ALL
            .iter()
            .map(|u| {
                let n = self.unresolved.get(u).copied().unwrap_or(0);
                (u.name().to_string(), n.into())
            })
            .collect();
        let drops: serde_json::Map<String, Value> = self
            .drops()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.into()))
            .collect();
        let mut v = json!({
            "calls": self.calls(),
            "calls_per_api": self.per_api.iter()
                .map(|(k, n)| (k.to_string(), json!({
                    "calls": n.calls, "failed": n.failed, "no_return": n.no_return,
                })))
                .collect::<serde_json::Map<_, _>>(),
            "waits_resolved": self.waits_resolved,
            "waits_unresolved": self.waits_unresolved(),
            "unresolved_reasons": unresolved,
            "filtered_by_agents": self.filtered,
            // Threads that chose their device before the capture, learned from *GetDevice.
            "devices_learned_from_get_device": self.thread_devices.iter()
                .filter(|(_, (_, learned))| *learned)
                .map(|((pid, tid), (d, _))| json!({ "pid": pid, "tid": tid, "device": d }))
                .collect::<Vec<_>>(),
            "get_device_calls_not_recorded": self.kernel.get_device_unrecorded,
            "calls_begun_before": self.calls_begun_before,
            "queues": self.queues,
            // Created before the capture; their packets sit on "GPU (agent unknown)".
            "queues_discovered": self.queues_discovered,
            "packets": self.packets,
            "suspended": { "times": self.suspensions, "ms": self.suspended_ms },
            "drops": drops,
        });
        if let Some(t) = &self.truncated {
            v["truncated"] = t.as_str().into();
        }
        v
    }

    /// Records lost in any way (what the closing warning names).
    pub fn lost_total(&self) -> u64 {
        self.drops()
            .iter()
            .filter(|(k, _)| *k != "packets_truncated")
            .map(|(_, v)| v)
            .sum()
    }
}
