//! How much write-back may be in flight: what the links drain within [`DRAIN_WITHIN`] at
//! the rate measured, between [`MIN_BYTES`] and [`MAX_BYTES`] (`inflight.rs`).
//!
//! The replicas run a client's requests in order, so everything the mount sends after the
//! write-back in flight waits for it: a lease renewal too. A fixed 64 MiB took over a
//! minute to cross 5 Mb/s site links, and the mount's 30 s lease on the directories it
//! held lapsed behind it (`byzfs bench andrew --sites slow-5`). Bounded by time at the
//! measured rate, what is sent after waits at most about [`DRAIN_WITHIN`] more.
//!
//! The rate is measured from the answers: a batch answered while the links were busy with
//! the write-back (it was sent before the previous answer came) took the time since that
//! answer to cross; one sent into an idle pipe, the time since it was sent. Each sample
//! moves the estimate a quarter of the way.

use std::time::{Duration, Instant};

/// How long the write-back in flight may take to drain at the measured rate.
pub(crate) const DRAIN_WITHIN: Duration = Duration::from_secs(4);

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
}

impl DrainRate {
    /// A batch of `bytes` sent at `sent` was answered at `now`.
    pub(crate) fn answered(&mut self, bytes: usize, sent: Instant, now: Instant) {
        let from = match self.last {
            Some(last) if last > sent => last,
            _ => sent,
        };
        self.last = Some(now);
        let took = now.saturating_duration_since(from).as_secs_f64();
        if took <= 0.0 {
            return;
        }
        let sample = bytes as f64 / took;
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
        // 1 MB answered 100 ms after it was sent into an idle pipe: 10 MB/s, 40 MB.
        d.answered(1_000_000, at(0), at(100));
        assert_eq!(d.bound(), 40_000_000);
        // Back to back: the next one, sent before that answer, took the 100 ms since it.
        d.answered(1_000_000, at(50), at(200));
        assert_eq!(d.bound(), 40_000_000);
        // A slow link: 100 KB per second moves the estimate a quarter of the way each
        // time, down to the floor.
        let mut now = 200;
        for _ in 0..40 {
            d.answered(100_000, at(now - 10), at(now + 1000));
            now += 1000;
        }
        assert_eq!(d.bound(), MIN_BYTES);
        // A fast one: up to the cap.
        for _ in 0..40 {
            d.answered(10_000_000, at(now + 1), at(now + 2));
            now += 2;
        }
        assert_eq!(d.bound(), MAX_BYTES);
    }
}
