//! rocsync's streams (a handle's lifetime: device and per-device index, as resolution
//! numbers them) in the profiler's numbering (CUPTI stream ids; Kineto ROCm's per-device
//! indices). Neither side writes the other's: the map is learned from calls both sides
//! saw whose profiler row names a stream — a matched call with a stream argument whose
//! correlation also has a device row on a stream: CUPTI's Stream Wait Event (the waiting
//! stream) and Stream Sync rows, `cuda_event` rows (the recording stream), and the
//! kernel, copy and set rows of launches when the capture has launch calls.

use std::collections::HashMap;

use super::{matching::Matches, profile::Profile};
use crate::calls::resolve::Row;

/// A stream as rocsync's resolution tells them apart: (device, index).
pub(super) type Stream = (i32, i64);

/// A stream in the profiler's trace: (device pid, stream id).
pub(super) type ProfilerStream = (i64, i64);

#[derive(Default)]
pub(super) struct StreamMap {
    map: HashMap<Stream, ProfilerStream>,
    /// Calls that named a stream on both sides.
    pub evidence: usize,
    /// rocsync streams seen on more than one profiler stream (the most seen kept).
    pub conflicts: usize,
}

impl StreamMap {
    pub(super) fn learn(
        profile: &Profile,
        matches: &Matches,
        rows: &HashMap<u64, &Row>,
    ) -> StreamMap {
        let device_rows = profile.device_by_correlation();
        let mut votes: HashMap<Stream, HashMap<ProfilerStream, usize>> = HashMap::new();
        let mut evidence = 0;
        for (pc, rc) in &matches.to_rocsync {
            let Some(row) = rows.get(rc) else { continue };
            let Some(index) = row.stream_index else {
                continue;
            };
            // An event sync's device is the producer's; the call's stream is its own.
            if row.call.stream().is_none() {
                continue;
            }
            for d in device_rows.get(pc).into_iter().flatten() {
                if d.stream < 0 {
                    continue;
                }
                evidence += 1;
                *votes
                    .entry((row.device, index))
                    .or_default()
                    .entry((d.device, d.stream))
                    .or_default() += 1;
            }
        }
        let mut map = HashMap::new();
        let mut conflicts = 0;
        for (s, v) in votes {
            conflicts += usize::from(v.len() > 1);
            if let Some((p, _)) = v
                .into_iter()
                .max_by_key(|&(p, n)| (n, std::cmp::Reverse(p)))
            {
                map.insert(s, p);
            }
        }
        StreamMap {
            map,
            evidence,
            conflicts,
        }
    }

    pub(super) fn get(&self, s: Stream) -> Option<ProfilerStream> {
        self.map.get(&s).copied()
    }

    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    /// The map, for the summary: `device:index → device:stream`, sorted.
    pub(super) fn pairs(&self) -> Vec<(Stream, ProfilerStream)> {
        let mut v: Vec<_> = self.map.iter().map(|(a, b)| (*a, *b)).collect();
        v.sort_unstable();
        v
    }

    /// Numbers a stream the profiler never showed after the profiler's own on its device
    /// (ROCm, where Kineto numbers streams 1.. by first appearance): never one of its ids.
    pub(super) fn number_new(
        &mut self,
        s: Stream,
        profiler_max: &HashMap<i64, i64>,
    ) -> ProfilerStream {
        if let Some(p) = self.get(s) {
            return p;
        }
        let dev = s.0 as i64;
        let used = self
            .map
            .values()
            .filter(|p| p.0 == dev)
            .map(|p| p.1)
            .max()
            .unwrap_or(0);
        let next = (used.max(profiler_max.get(&dev).copied().unwrap_or(0))) + 1;
        self.map.insert(s, (dev, next));
        (dev, next)
    }
}
