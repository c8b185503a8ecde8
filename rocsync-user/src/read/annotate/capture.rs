//! rocsync's side: a raw capture read back (as `convert` reads it) and resolved by the
//! same wait rule as a live capture, per process.

use std::{collections::HashMap, path::Path};

use anyhow::{Context as _, Result, bail};

use crate::{
    calls::{
        emit::raw::{Item, Reader},
        ingest::Call,
        resolve::{Resolver, Row},
    },
    read::input::{Sniffed, decompressed, open_regular, sniff},
};

pub(super) struct Capture {
    /// CLOCK_REALTIME − CLOCK_MONOTONIC at capture start: rocsync's times on the epoch.
    pub clock_offset_ns: i64,
    /// Resolved rows by pid, in correlation order (filtered calls left out).
    pub rows: HashMap<u32, Vec<Row>>,
}

impl Capture {
    pub(super) fn read(path: &Path) -> Result<Capture> {
        let file = open_regular(path, "annotate reads a raw capture file")?;
        let mut input = decompressed(file)?;
        if sniff(input.as_mut())? == Sniffed::Trace {
            bail!(
                "{} is a Kineto trace, not a raw capture: --capture takes the JSON Lines \
                 rocsync's --raw writes (`rocsync run --raw calls.jsonl …`)",
                path.display()
            );
        }
        let mut reader = Reader::new(input)
            .with_context(|| format!("{} is not a rocsync raw capture", path.display()))?;
        let header = reader.header.clone();
        let mut calls: Vec<Call> = Vec::new();
        let mut lost: Vec<u64> = Vec::new();
        let mut at: HashMap<u64, usize> = HashMap::new();
        while let Some(item) = reader
            .next_item()
            .with_context(|| format!("reading {}", path.display()))?
        {
            match item {
                Item::Call { call, .. } => {
                    at.insert(call.correlation, calls.len());
                    calls.push(call);
                }
                Item::Completion(corr, exit) => {
                    if let Some(&i) = at.get(&corr) {
                        exit.apply(&mut calls[i]);
                    }
                }
                Item::Lost(first, count) => {
                    lost.push(first.saturating_add(count.saturating_sub(1)));
                }
                _ => {}
            }
        }
        Ok(Capture {
            clock_offset_ns: header.clock_offset_ns,
            rows: resolve(calls, lost, header.from_start),
        })
    }

    pub(super) fn pids(&self) -> Vec<u32> {
        let mut p: Vec<u32> = self.rows.keys().copied().collect();
        p.sort_unstable();
        p
    }

    /// The epoch time of a rocsync (CLOCK_MONOTONIC) time.
    pub(super) fn epoch_ns(&self, mono_ns: u64) -> i64 {
        (mono_ns as i64).saturating_add(self.clock_offset_ns)
    }
}

/// The wait rule over every call in correlation order, losses in their place.
fn resolve(mut calls: Vec<Call>, mut lost: Vec<u64>, from_start: bool) -> HashMap<u32, Vec<Row>> {
    calls.sort_by_key(|c| c.correlation);
    lost.sort_unstable();
    let mut resolver = Resolver::new(from_start);
    let mut rows: HashMap<u32, Vec<Row>> = HashMap::new();
    let mut lost = lost.into_iter().peekable();
    for c in &calls {
        while let Some(l) = lost.next_if(|&l| l < c.correlation) {
            resolver.lost(l);
        }
        let row = resolver.push(c);
        if !c.filtered {
            rows.entry(c.pid).or_default().push(row);
        }
    }
    rows
}
