//! Time as a value. The core never reads a clock: every handler receives `now` (docs/STYLE.md §4).

use core::time::Duration;
use serde::{Deserialize, Serialize};

/// A point in time, in microseconds since an epoch chosen by the driver (the simulator uses
/// virtual time starting at 0; the network runtime uses the Unix epoch).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Time(pub u64);

impl Time {
    /// The epoch.
    pub const ZERO: Time = Time(0);

    /// Microseconds since the epoch.
    pub fn as_micros(self) -> u64 {
        self.0
    }

    /// Builds a time from microseconds since the epoch.
    pub fn from_micros(us: u64) -> Time {
        Time(us)
    }

    /// `self + d`, saturating at the far future.
    pub fn plus(self, d: Duration) -> Time {
        Time(
            self.0
                .saturating_add(u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
        )
    }

    /// `self - earlier`, or zero if `earlier` is later.
    pub fn since(self, earlier: Time) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
    }
}

impl core::ops::Add<Duration> for Time {
    type Output = Time;
    fn add(self, d: Duration) -> Time {
        self.plus(d)
    }
}
