//! The flight recorder: every tracked process's calls kept in memory for the last N
//! seconds (and at most `MAX_BYTES`), so `rocsync trace --flight` writes what just
//! happened — the seconds before a hang or a slow step — without having asked in advance.

use std::{collections::VecDeque, time::Duration};

use tokio::time::Instant;

/// Memory the recorder may hold; beyond it the oldest records go first, counted.
pub const MAX_BYTES: usize = 256 << 20;

pub struct FlightRecorder {
    span: Duration,
    records: VecDeque<(Instant, Vec<u8>)>,
    bytes: usize,
    /// Records dropped for memory before their time was up.
    pub evicted: u64,
}

impl FlightRecorder {
    pub fn new(span: Duration) -> Self {
        Self {
            span,
            records: VecDeque::new(),
            bytes: 0,
            evicted: 0,
        }
    }

    /// Keeps a ring record; forgets what is older than the span, or over the memory cap.
    pub fn keep(&mut self, record: &[u8]) {
        let now = Instant::now();
        self.bytes += record.len();
        self.records.push_back((now, record.to_vec()));
        while let Some((t, r)) = self.records.front() {
            let expired = now.duration_since(*t) > self.span;
            let over = self.bytes > MAX_BYTES;
            if !expired && !over {
                break;
            }
            self.bytes -= r.len();
            self.evicted += u64::from(!expired);
            self.records.pop_front();
        }
    }

    /// The records kept, oldest first.
    pub fn records(&self) -> impl Iterator<Item = &[u8]> {
        self.records.iter().map(|(_, r)| r.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn keeps_the_last_span_only() {
        let mut f = FlightRecorder::new(Duration::from_secs(2));
        f.keep(&[1; 8]);
        tokio::time::advance(Duration::from_secs(1)).await;
        f.keep(&[2; 8]);
        tokio::time::advance(Duration::from_millis(1500)).await;
        f.keep(&[3; 8]);
        let kept: Vec<u8> = f.records().map(|r| r[0]).collect();
        assert_eq!(kept, vec![2, 3], "the first is older than 2 s");
        assert_eq!(f.evicted, 0, "expiry is no loss");
    }
}
