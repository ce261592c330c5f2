//! Per-replica clocks (docs/PROTOCOL.md §6.4 S-CLK). The simulator keeps one global virtual time
//! (µs from 0); a node reads `LOCAL_EPOCH + global × (1 + drift) + offset`: a constant skew
//! plus a rate error (drift, in parts per million; quartz clocks are within ±100 ppm, a
//! faulty one may be off by percents). The epoch keeps negative offsets representable.
//! Deadlines a node returns (`poll_timeout`) are converted back to global time.

use byzfs_bft::Time;

/// Where local clocks start (≈ 11.6 days of µs), so an offset of minus seconds stays positive.
pub const LOCAL_EPOCH_US: u64 = 1_000_000_000_000;

/// Parts per million.
const PPM: i128 = 1_000_000;

/// One node's clock: an offset and a rate error relative to the global virtual time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Clock {
    /// Skew in µs (may be negative).
    pub offset_us: i64,
    /// Rate error in ppm (positive: runs fast). Greater than -1,000,000.
    pub drift_ppm: i64,
}

impl Clock {
    /// A clock `offset_us` ahead of (negative: behind) true time, running at the true rate.
    pub fn new(offset_us: i64) -> Clock {
        Clock::drifting(offset_us, 0)
    }

    /// A clock `offset_us` ahead of true time whose rate is off by `drift_ppm`.
    pub fn drifting(offset_us: i64, drift_ppm: i64) -> Clock {
        assert!(drift_ppm > -(PPM as i64), "a clock must move forward");
        Clock {
            offset_us,
            drift_ppm,
        }
    }

    fn rate(&self) -> i128 {
        PPM + self.drift_ppm as i128
    }

    /// The node's reading at global time `global`.
    pub fn local(&self, global: Time) -> Time {
        let elapsed = global.as_micros() as i128 * self.rate() / PPM;
        let t = LOCAL_EPOCH_US as i128 + elapsed + self.offset_us as i128;
        // Offsets are bounded far below the epoch by the scenarios, so this stays in range.
        Time(t.clamp(0, u64::MAX as i128) as u64)
    }

    /// The earliest global time at which the node's clock reads at least `local`.
    pub fn global(&self, local: Time) -> Time {
        let elapsed = local.as_micros() as i128 - self.offset_us as i128 - LOCAL_EPOCH_US as i128;
        if elapsed <= 0 {
            return Time(0);
        }
        // Smallest g with g × rate / PPM ≥ elapsed (rounding up, so `local(global(l)) ≥ l`).
        let g = (elapsed * PPM + self.rate() - 1) / self.rate();
        Time(g.clamp(0, u64::MAX as i128) as u64)
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
        // Drifting clocks: the inverse is the earliest such time, in both directions.
        for drift in [-200_000i64, -150, -1, 1, 250, 50_000] {
            let c = Clock::drifting(-3_000, drift);
            for g in [0u64, 1, 999, 10_000_000, 123_456_789] {
                let l = c.local(Time(g));
                let back = c.global(l);
                assert!(back <= Time(g) && c.local(back) == l, "{drift} {g}");
                assert!(back.as_micros() == 0 || c.local(Time(back.as_micros() - 1)) < l);
            }
        }
        let fast = Clock::drifting(0, 100_000); // 10% fast
        assert_eq!(
            fast.local(Time(1_000_000)),
            Time(LOCAL_EPOCH_US + 1_100_000)
        );
        // A deadline already in the past maps to global time 0 at the latest.
        assert_eq!(Clock::new(0).global(Time(3)), Time(0));
    }
}
