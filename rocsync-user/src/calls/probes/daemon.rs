//! The probes in the daemon's always-on mode: discovery announcements (every exec, every
//! library load) and the kernel's metrics maps.

use anyhow::{Context as _, Result};
use aya::{
    maps::{MapData, PerCpuArray, PerCpuHashMap},
    programs::RawTracePoint,
};
use rocsync_common::{
    AQL_SLOTS, AqlAgent, EarlyKey, GroupSlot, HandleKey, METRIC_SLOTS, MetricKey, MetricValue,
    WAIT_BUCKETS, aql_series,
};

use super::Probes;

impl Probes {
    /// System-wide discovery: the exec tracepoint announces every new image, and library
    /// probes go file-wide (one set per file, counting only the tracked processes).
    pub fn discover_system_wide(&mut self) -> Result<()> {
        let p: &mut RawTracePoint = self
            .ebpf
            .program_mut("process_exec")
            .context("program process_exec missing from the eBPF object")?
            .try_into()?;
        p.load().context("loading program process_exec")?;
        // Owned by the program: detached when the probes are dropped.
        p.attach("sched_process_exec")
            .context("attaching to the sched_process_exec tracepoint")?;
        // Each thread's call in flight is forgotten at its exit (the map is bounded by
        // user, not by recency).
        let p: &mut RawTracePoint = self
            .ebpf
            .program_mut("thread_exit")
            .context("program thread_exit missing from the eBPF object")?
            .try_into()?;
        p.load().context("loading program thread_exit")?;
        p.attach("sched_process_exit")
            .context("attaching to the sched_process_exit tracepoint")?;
        self.links.set_file_wide();
        Ok(())
    }

    /// Synchronisations longer than `threshold` are counted as stalls and announced on
    /// the ring (`None`: never).
    /// Says which return probes are not attached now ([`Api::return_optional`]'s, or
    /// none): their entries then leave nothing in flight for a return to end.
    pub fn set_returnless(&mut self, returnless: bool) -> Result<()> {
        let mask = if returnless {
            rocsync_common::Api::RETURN_OPTIONAL
        } else {
            0
        };
        let mut a: aya::maps::Array<_, u64> = aya::maps::Array::try_from(
            self.ebpf
                .map_mut("RETURNLESS")
                .context("RETURNLESS map missing")?,
        )?;
        a.set(0, mask, 0).context("updating RETURNLESS")?;
        Ok(())
    }

    pub fn set_stall_threshold(&mut self, threshold: Option<std::time::Duration>) -> Result<()> {
        let mut map: aya::maps::Array<_, u64> = aya::maps::Array::try_from(
            self.ebpf
                .map_mut("STALL_NS")
                .context("STALL_NS map missing")?,
        )?;
        let ns = threshold.map_or(0, |t| t.as_nanos().clamp(1, u64::MAX as u128) as u64);
        map.set(0, ns, 0).context("setting the stall threshold")?;
        Ok(())
    }

    /// The calls in flight now, of every counted thread: (pid, tid, the call). A thread's
    /// entry outlives its calls (rewritten in place) until the thread exits; a returned
    /// call's api is `u32::MAX`.
    pub fn calls_in_flight(&self) -> Result<Vec<(u32, u32, rocsync_common::PendingCall)>> {
        let map: aya::maps::HashMap<_, u64, rocsync_common::PendingCall> =
            aya::maps::HashMap::try_from(self.ebpf.map("PENDING").context("PENDING map missing")?)?;
        Ok(map
            .iter()
            .filter_map(Result::ok)
            .filter(|(_, c)| c.api != u32::MAX)
            .map(|(k, c)| ((k >> 32) as u32, k as u32, c))
            .collect())
    }

    /// Where `pid`'s `event` was last recorded: (stream, ns), if the probes saw it.
    pub fn last_record(&self, pid: u32, event: u64) -> Option<rocsync_common::Dependency> {
        self.in_lanes("EVENT_STREAM", pid, event)
    }

    /// The event `pid`'s `stream` last waited on: (event, ns), if the probes saw it.
    pub fn last_wait(&self, pid: u32, stream: u64) -> Option<rocsync_common::Dependency> {
        self.in_lanes("STREAM_WAIT", pid, stream)
    }

    /// `pid`'s `handle` in the dependency state's lanes (`map_<lane>`, one per user): the
    /// newest (a process that changed its user may be in two).
    fn in_lanes(&self, map: &str, pid: u32, handle: u64) -> Option<rocsync_common::Dependency> {
        (0..rocsync_common::DEPENDENCY_LANES)
            .filter_map(|lane| self.of_handle(&format!("{map}_{lane}"), pid, handle))
            .max_by_key(|d: &rocsync_common::Dependency| d.ns)
    }

    /// Handles the dependency state pushed out for room, each by a newer one of the same
    /// user (its lane full): (events' records, streams' waits).
    pub fn dependency_evicted(&self) -> Result<(u64, u64)> {
        use rocsync_common::{DEPENDENCY_LANE_ENTRIES, DEPENDENCY_LANES, DEPENDENCY_MADE_SLOTS};
        let slots: [u32; DEPENDENCY_MADE_SLOTS as usize] = std::array::from_fn(|i| i as u32);
        let made = self.counted("DEPENDENCY_MADE", slots)?;
        let over = |m: &[u64]| {
            m.iter()
                .map(|n| n.saturating_sub(u64::from(DEPENDENCY_LANE_ENTRIES)))
                .sum()
        };
        let (events, streams) = made.split_at(DEPENDENCY_LANES as usize);
        Ok((over(events), over(streams)))
    }

    /// Users whose dependency state shares the last lane with another's (the 8th user
    /// other than root on): their floods push out each other's handles. 0 while the
    /// last lane has one user or none. Read from the probes' own `LANE_OF`, which holds
    /// 1 024 users: past them, a lower bound.
    pub fn dependency_shared_lane_users(&self) -> Result<u64> {
        let map: aya::maps::HashMap<_, u32, u32> =
            aya::maps::HashMap::try_from(self.ebpf.map("LANE_OF").context("LANE_OF map missing")?)?;
        let last = rocsync_common::DEPENDENCY_LANES - 1;
        let users = (map.iter().filter_map(Result::ok))
            .filter(|&(_, lane)| lane == last)
            .count() as u64;
        Ok(if users > 1 { users } else { 0 })
    }

    /// The last collective enqueued on `pid`'s `stream`, if the probes saw one.
    pub fn last_collective(&self, pid: u32, stream: u64) -> Option<rocsync_common::LastCollective> {
        self.of_handle("STREAM_COLLECTIVE", pid, stream)
    }

    /// `pid`'s communicator `handle`, as the probes keep it.
    pub fn comm(&self, pid: u32, handle: u64) -> Option<rocsync_common::CommState> {
        self.of_handle("COMMS", pid, handle)
    }

    /// Every communicator of the tracked processes: (pid, handle, its state).
    pub fn comms(&self) -> Vec<(u32, u64, rocsync_common::CommState)> {
        let Some(Ok(map)) = self
            .ebpf
            .map("COMMS")
            .map(aya::maps::HashMap::<_, HandleKey, rocsync_common::CommState>::try_from)
        else {
            return Vec::new();
        };
        map.iter()
            .filter_map(Result::ok)
            .map(|(k, c)| (k.tgid as u32, k.handle, c))
            .collect()
    }

    /// The communicator state of processes gone: their entries removed, and their share
    /// given back to their users (`USER_FREED`, which only this side writes).
    pub fn forget_comms(&mut self, gone: &[u32]) -> Result<()> {
        if gone.is_empty() {
            return Ok(());
        }
        remove_of::<rocsync_common::CommState>(self.ebpf.map_mut("COMMS"), gone)?;
        remove_of::<rocsync_common::LastCollective>(self.ebpf.map_mut("STREAM_COLLECTIVE"), gone)?;
        let mut quotas: aya::maps::HashMap<_, u64, rocsync_common::CommQuota> =
            aya::maps::HashMap::try_from(
                self.ebpf.map_mut("QUOTAS").context("QUOTAS map missing")?,
            )?;
        let mut freed: Vec<(u32, u64)> = Vec::new();
        for &pid in gone {
            if let Ok(q) = quotas.get(&u64::from(pid), 0) {
                let _ = quotas.remove(&u64::from(pid));
                freed.push((q.uid, u64::from(q.comms) + u64::from(q.streams)));
            }
        }
        let mut users: aya::maps::HashMap<_, u32, u64> = aya::maps::HashMap::try_from(
            (self.ebpf.map_mut("USER_FREED")).context("USER_FREED map missing")?,
        )?;
        for (uid, n) in freed.into_iter().filter(|(_, n)| *n > 0) {
            let before = users.get(&uid, 0).unwrap_or(0);
            users.insert(uid, before + n, 0)?;
        }
        Ok(())
    }

    /// `pid`'s entry for `handle` in the per-process handle map `map`.
    fn of_handle<V: aya::Pod>(&self, map: &str, pid: u32, handle: u64) -> Option<V> {
        let map: aya::maps::HashMap<_, HandleKey, V> =
            aya::maps::HashMap::try_from(self.ebpf.map(map)?).ok()?;
        let key = HandleKey {
            tgid: u64::from(pid),
            handle,
        };
        map.get(&key, 0).ok()
    }

    /// Takes `pid`'s calls counted before it was tracked out of the kernel: (series
    /// slot, calls).
    pub fn take_early(&mut self, pid: u32) -> Result<Vec<(u32, u64)>> {
        let mut map: aya::maps::HashMap<_, EarlyKey, u64> =
            aya::maps::HashMap::try_from(self.ebpf.map_mut("EARLY").context("EARLY map missing")?)?;
        let keys: Vec<EarlyKey> = map
            .keys()
            .filter_map(Result::ok)
            .filter(|k| k.tgid == pid)
            .collect();
        let mut out = Vec::new();
        for k in keys {
            if let Ok(n) = map.get(&k, 0) {
                out.push((k.slot, n));
            }
            let _ = map.remove(&k);
        }
        Ok(out)
    }

    /// `pid` was looked at and is not counted (the daemon's filters): its calls are not
    /// early ones.
    pub fn pass(&mut self, pid: u32) -> Result<()> {
        let mut map: aya::maps::HashMap<_, u32, u8> = aya::maps::HashMap::try_from(
            self.ebpf.map_mut("PASSED").context("PASSED map missing")?,
        )?;
        map.insert(pid, 1, 0)?;
        Ok(())
    }

    /// Every series the kernel counted, summed over CPUs (the node's: of processes in no
    /// label group).
    pub fn metrics(&self) -> Result<Vec<(MetricKey, MetricValue)>> {
        let map: PerCpuArray<_, MetricValue> =
            PerCpuArray::try_from(self.ebpf.map("METRICS").context("METRICS map missing")?)?;
        let mut out = Vec::new();
        for slot in 0..METRIC_SLOTS {
            let sum = summed(map.get(&slot, 0)?.iter());
            // Series no call reached are not series.
            if sum.calls > 0 {
                out.push((MetricKey::of_slot(slot), sum));
            }
        }
        out.sort_by_key(|(k, _)| *k);
        Ok(out)
    }

    /// The labelled series (`--metric-labels`), summed over CPUs: (label group, series,
    /// counts), by group and series.
    pub fn group_metrics(&self) -> Result<Vec<(u32, MetricKey, MetricValue)>> {
        let map = self.group_map()?;
        let mut out = Vec::new();
        for entry in map.iter() {
            let (key, per_cpu) = entry?;
            let sum = summed(per_cpu.iter());
            if sum.calls > 0 {
                out.push((key.group, MetricKey::of_slot(key.slot), sum));
            }
        }
        out.sort_by_key(|(g, k, _)| (*g, *k));
        Ok(out)
    }

    /// Removes an ended label group's series (its number may then be given again).
    pub fn forget_group(&mut self, group: u32) -> Result<()> {
        let mut map: PerCpuHashMap<_, GroupSlot, MetricValue> = PerCpuHashMap::try_from(
            self.ebpf
                .map_mut("GROUP_METRICS")
                .context("GROUP_METRICS map missing")?,
        )?;
        let keys: Vec<GroupSlot> = map.keys().filter_map(Result::ok).collect();
        for k in keys.into_iter().filter(|k| k.group == group) {
            let _ = map.remove(&k);
        }
        let mut made: aya::maps::HashMap<_, u32, u32> = aya::maps::HashMap::try_from(
            (self.ebpf.map_mut("GROUP_SERIES")).context("GROUP_SERIES map missing")?,
        )?;
        let _ = made.remove(&group);
        Ok(())
    }

    /// Calls of labelled processes counted without their labels: (the labelled series
    /// were as many as the kernel holds, their pod had its cap of series).
    pub fn unlabelled_calls(&self) -> Result<(u64, u64)> {
        let [full, cap] = self.counted(
            "UNLABELLED",
            [
                rocsync_common::UNLABELLED_FULL,
                rocsync_common::UNLABELLED_CAP,
            ],
        )?;
        Ok((full, cap))
    }

    /// Call starts the kernel could not keep (their calls untimed): (their user's live
    /// threads held their share, the map was full).
    pub fn untimed_calls(&self) -> Result<(u64, u64)> {
        let [share, full] = self.counted(
            "IN_FLIGHT_REFUSED",
            [
                rocsync_common::IN_FLIGHT_USER_SHARE,
                rocsync_common::IN_FLIGHT_FULL,
            ],
        )?;
        Ok((share, full))
    }

    /// The counters at `slots` of per-CPU array `name`, each summed over the CPUs.
    fn counted<const N: usize>(&self, name: &str, slots: [u32; N]) -> Result<[u64; N]> {
        let map: PerCpuArray<_, u64> = PerCpuArray::try_from(
            self.ebpf
                .map(name)
                .with_context(|| format!("{name} map missing"))?,
        )?;
        let mut out = [0; N];
        for (o, slot) in out.iter_mut().zip(slots) {
            *o = map.get(&slot, 0)?.iter().sum();
        }
        Ok(out)
    }

    fn group_map(&self) -> Result<PerCpuHashMap<&MapData, GroupSlot, MetricValue>> {
        Ok(PerCpuHashMap::try_from(
            self.ebpf
                .map("GROUP_METRICS")
                .context("GROUP_METRICS map missing")?,
        )?)
    }

    /// AQL packets counted, per agent and kind, summed over CPUs (series at zero left
    /// out).
    pub fn aql_packets(&self) -> Result<Vec<(AqlAgent, &'static str, u64)>> {
        let map: PerCpuArray<_, u64> = PerCpuArray::try_from(
            self.ebpf
                .map("AQL_PACKETS")
                .context("AQL_PACKETS map missing")?,
        )?;
        let mut out = Vec::new();
        for slot in 0..AQL_SLOTS {
            let n: u64 = map.get(&slot, 0)?.iter().sum();
            if n > 0 {
                let (agent, kind) = aql_series(slot);
                out.push((agent, kind, n));
            }
        }
        out.sort();
        Ok(out)
    }
}

/// One series' per-CPU counts, summed.
fn summed<'a>(per_cpu: impl Iterator<Item = &'a MetricValue>) -> MetricValue {
    let mut sum = MetricValue::default();
    for v in per_cpu {
        sum.calls += v.calls;
        sum.errors += v.errors;
        sum.cross_stream += v.cross_stream;
        sum.stalls += v.stalls;
        sum.timed += v.timed;
        sum.wait_ns += v.wait_ns;
        for i in 0..WAIT_BUCKETS {
            sum.buckets[i] += v.buckets[i];
        }
    }
    sum
}

/// Removes the entries of processes `gone` from a map by (tgid, handle).
fn remove_of<V: aya::Pod>(map: Option<&mut aya::maps::Map>, gone: &[u32]) -> Result<()> {
    let map = map.context("communicator map missing")?;
    let mut map: aya::maps::HashMap<_, HandleKey, V> = aya::maps::HashMap::try_from(map)?;
    let keys: Vec<HandleKey> = (map.keys().filter_map(Result::ok))
        .filter(|k| gone.contains(&(k.tgid as u32)))
        .collect();
    for k in keys {
        let _ = map.remove(&k);
    }
    Ok(())
}
