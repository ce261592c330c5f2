//! The runtime's clock: [`Time`] as UNIX microseconds, advancing monotonically.
//!
//! The wall clock is read once, at construction; afterwards time advances with the monotonic
//! clock, so a wall-clock step never makes the core's time go backwards. Deadlines convert
//! back to [`Instant`]s exactly, and the event loops compare `now()` with the deadline on
//! every turn rather than trusting the timer (as quinn does).

use byzfs_bft::Time;
use core::time::Duration;
use tokio::time::Instant;

/// Longest sleep the runtime arms: far deadlines are re-checked at least this often.
const SLEEP_MAX: Duration = Duration::from_secs(3600);

/// A clock anchored at UNIX time.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    unix_at_start_us: u64,
    start: Instant,
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

impl Clock {
    /// A clock reading the wall clock now.
    pub fn new() -> Clock {
        let unix_at_start_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
        Clock {
            unix_at_start_us,
            start: Instant::now(),
        }
    }

    /// The current time.
    pub fn now(&self) -> Time {
        let elapsed = u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX);
        Time::from_micros(self.unix_at_start_us.saturating_add(elapsed))
    }

    /// The instant of deadline `t`, capped an hour ahead of `now`.
    pub fn instant_of(&self, t: Time) -> Instant {
        let now = Instant::now();
        let since_start =
            Duration::from_micros(t.as_micros().saturating_sub(self.unix_at_start_us));
        let cap = now + SLEEP_MAX;
        self.start
            .checked_add(since_start)
            .map_or(cap, |i| i.min(cap))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_and_round_trips() {
        let c = Clock::new();
        let a = c.now();
        let b = c.now();
        assert!(b >= a);
        assert!(a.as_micros() > 1_700_000_000_000_000, "UNIX microseconds");
        let i = c.instant_of(a.plus(Duration::from_millis(5)));
        let d = i.saturating_duration_since(Instant::now());
        assert!(d <= Duration::from_millis(5));
        let far = c.instant_of(Time::from_micros(u64::MAX));
        assert!(far <= Instant::now() + SLEEP_MAX);
    }
}
