//! Per-replica clocks (PROTOCOL.md §6.4 S-CLK). The simulator keeps one global virtual time
//! (µs from 0); a node reads `LOCAL_EPOCH + global + offset`. The epoch keeps negative offsets
//! representable. Deadlines a node returns (`poll_timeout`) are converted back to global time.

use byzfs_bft::Time;

/// Where local clocks start (≈ 11.6 days of µs), so an offset of minus seconds stays positive.
pub const LOCAL_EPOCH_US: u64 = 1_000_000_000_000;

/// One node's clock: a constant offset from the global virtual time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Clock {
    /// Skew in µs (may be negative).
    pub offset_us: i64,
}

impl Clock {
    /// A clock `offset_us` ahead of (negative: behind) true time.
    pub fn new(offset_us: i64) -> Clock {
        Clock { offset_us }
    }

    /// The node's reading at global time `global`.
    pub fn local(&self, global: Time) -> Time {
        let t = (LOCAL_EPOCH_US + global.as_micros()) as i128 + self.offset_us as i128;
        // Offsets are bounded far below the epoch by the scenarios, so this stays in range.
        Time(t.clamp(0, u64::MAX as i128) as u64)
    }

    /// The earliest global time at which the node's clock reads at least `local`.
    pub fn global(&self, local: Time) -> Time {
        let t = local.as_micros() as i128 - self.offset_us as i128 - LOCAL_EPOCH_US as i128;
        Time(t.clamp(0, u64::MAX as i128) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_with_skew() {
        for off in [-5_000_000i64, -1, 0, 3, 7_000_000] {
            let c = Clock::new(off);
            for g in [0u64, 1, 10_000_000, 123_456_789] {
                let l = c.local(Time(g));
                assert_eq!(c.global(l), Time(g));
                assert!(c.local(c.global(l)) >= l);
            }
        }
        assert_eq!(Clock::new(5).local(Time(0)), Time(LOCAL_EPOCH_US + 5));
        // A deadline already in the past maps to global time 0 at the latest.
        assert_eq!(Clock::new(0).global(Time(3)), Time(0));
    }
}
