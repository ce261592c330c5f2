//! Reconnection back-off: exponential from a minimum to a maximum, with up to 50% random
//! jitter so replicas restarted together do not reconnect in lock-step.

use core::time::Duration;
use rand_core::{OsRng, RngCore as _};

/// Back-off state of one link.
#[derive(Clone, Debug)]
pub(crate) struct Backoff {
    min: Duration,
    max: Duration,
    current: Duration,
}

impl Backoff {
    pub fn new(min: Duration, max: Duration) -> Backoff {
        let min = min.max(Duration::from_millis(1));
        Backoff {
            min,
            max: max.max(min),
            current: min,
        }
    }

    /// Back to the minimum (after a successful connection).
    pub fn reset(&mut self) {
        self.current = self.min;
    }

    /// The delay before the next attempt; doubles the following one.
    pub fn next_delay(&mut self) -> Duration {
        let base = self.current;
        self.current = (self.current * 2).min(self.max);
        let jitter_us = u64::try_from(base.as_micros() / 2)
            .unwrap_or(u64::MAX)
            .max(1);
        base + Duration::from_micros(OsRng.next_u64() % jitter_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_with_bounded_jitter() {
        let mut b = Backoff::new(Duration::from_millis(10), Duration::from_millis(35));
        let d: Vec<_> = (0..5).map(|_| b.next_delay()).collect();
        let bases = [10, 20, 35, 35, 35];
        for (d, base) in d.iter().zip(bases) {
            let base = Duration::from_millis(base);
            assert!(*d >= base && *d <= base + base / 2, "{d:?} vs {base:?}");
        }
        b.reset();
        assert!(b.next_delay() < Duration::from_millis(16));
    }
}
