//! How much write-back may be in flight: what the links drain within [`DRAIN_WITHIN`] at
//! the rate measured, between [`MIN_BYTES`] and [`MAX_BYTES`] (`inflight.rs`).
//!
//! The replicas run a client's requests in order, so everything the mount sends after the
//! write-back in flight waits for it: a lease renewal too. A fixed 64 MiB took over a
//! minute to cross 5 Mb/s site links, and the mount's 30 s lease on the directories it
//! held lapsed behind it (`byzfs bench andrew --sites slow-5`). Bounded by time at the
//! measured rate, what is sent after waits at most about [`DRAIN_WITHIN`] more.
//!
//! The rate is measured from the answers, over spans of at least [`SAMPLE_MIN`]: the
//! bytes answered in a span over its length, where a span starts at the previous sample,
//! or when a batch was sent into an idle pipe (sent after the last answer). Several
//! batches ordered together are answered together: measured one by one, the second of two
//! 1 MB batches answered 1 ms apart counted as 1 GB/s, and at `slow-5` the mount put 4.9 MB
//! in flight (16 s of the primary's link, which carries each body twice), behind which the
//! PRE-PREPAREs arrived past the replicas' clock tolerance (BENCHMARKS.md "A body on its
//! way"). Each sample moves the estimate a quarter of the way.

use std::time::{Duration, Instant};

/// How long the write-back in flight may take to drain at the measured rate.
pub(crate) const DRAIN_WITHIN: Duration = Duration::from_secs(4);

/// Shortest span one sample of the rate is measured over.
pub(crate) const SAMPLE_MIN: Duration = Duration::from_millis(500);

/// Least bytes in flight allowed, whatever the rate (about three write-back batches).
pub(crate) const MIN_BYTES: usize = 1 << 20;

/// Most bytes in flight: what a mount that dies loses at most, beside what it holds
/// (README "Write-back").
pub(crate) const MAX_BYTES: usize = 64 << 20;

/// The measured drain rate of the write-back in flight.
#[derive(Debug, Default)]
pub(crate) struct DrainRate {
    /// Bytes per second, once measured.
    rate: Option<f64>,
    /// When the last answer came.
    last: Option<Instant>,
    /// The span being measured: since when the links have been busy, and the bytes
    /// answered in it so far.
    span: Option<(Instant, usize)>,
}

impl DrainRate {
    /// A batch of `bytes` sent at `sent` was answered at `now`.
    pub(crate) fn answered(&mut self, bytes: usize, sent: Instant, now: Instant) {
        // Sent before the last answer: the links were busy all along, the span goes on.
        // Sent after it: they were idle until then, a new span starts.
        let busy = self.last.is_some_and(|last| last > sent);
        let (start, acc) = match self.span {
            Some(span) if busy => span,
            _ => (sent, 0),
        };
        let acc = acc.saturating_add(bytes);
        self.last = Some(now);
        let took = now.saturating_duration_since(start);
        if took < SAMPLE_MIN {
            self.span = Some((start, acc));
            return;
        }
        self.span = Some((now, 0));
        let sample = acc as f64 / took.as_secs_f64();
        self.rate = Some(match self.rate {
            Some(r) => r + (sample - r) / 4.0,
            None => sample,
        });
    }

    /// How many bytes may be in flight now.
    pub(crate) fn bound(&self) -> usize {
        match self.rate {
            Some(r) => {
                let b = r * DRAIN_WITHIN.as_secs_f64();
                (b.min(MAX_BYTES as f64) as usize).max(MIN_BYTES)
            }
            None => MIN_BYTES,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_follows_the_rate_between_its_limits() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut d = DrainRate::default();
        assert_eq!(d.bound(), MIN_BYTES);
        // 1 MB answered 100 ms after it was sent into an idle pipe: too short a span.
        d.answered(1_000_000, at(0), at(100));
        assert_eq!(d.bound(), MIN_BYTES);
        // Back to back: four more by 500 ms, 5 MB in the span: 10 MB/s, 40 MB.
        for k in 1..=4 {
            d.answered(1_000_000, at(50), at(100 + k * 100));
        }
        assert_eq!(d.bound(), 40_000_000);
        // A slow link: 100 KB per second moves the estimate a quarter of the way each
        // time, down to the floor.
        let mut now = 500;
        for _ in 0..40 {
            d.answered(100_000, at(now - 10), at(now + 1000));
            now += 1000;
        }
        assert_eq!(d.bound(), MIN_BYTES);
        // A fast one: up to the cap.
        for _ in 0..40 {
            d.answered(10_000_000, at(now - 1), at(now + 500));
            now += 500;
        }
        assert_eq!(d.bound(), MAX_BYTES);
    }

    /// Batches ordered together are answered together: two 1 MB batches answered 1 ms
    /// apart after 3 s on a slow link are 2 MB in 3 s, not 1 GB/s.
    #[test]
    fn batches_answered_together_are_measured_over_their_span() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut d = DrainRate::default();
        d.answered(1_000_000, at(0), at(3_000));
        d.answered(1_000_000, at(10), at(3_001));
        // The first sample: 1 MB over 3 s (333 KB/s, 1.33 MB); the second waits for its span.
        assert_eq!(d.bound(), 1_333_333);
        d.answered(1_000_000, at(20), at(3_600));
        // 2 MB over the 600 ms since: 3.33 MB/s, a quarter of the way from 333 KB/s.
        assert_eq!(d.bound(), 4_333_333);
    }
}
