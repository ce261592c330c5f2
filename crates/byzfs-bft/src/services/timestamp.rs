//! The agreed timestamp that services built on this library take as non-deterministic input
//! (docs/PROTOCOL.md §1.13): the primary proposes `max(now, last proposed + 1, last agreed + 1)`;
//! a backup accepts exactly 8 bytes, above the last agreed timestamp, within `tolerance_us`
//! of its own clock. Shared by the key-value service and the file service.

use crate::time::Time;

/// The primary's proposal (8 bytes, little-endian); remembers it in `last_proposed`.
pub fn propose(last_proposed: &mut u64, last_agreed: u64, now: Time) -> Vec<u8> {
    let ts = now
        .as_micros()
        .max(last_proposed.saturating_add(1))
        .max(last_agreed.saturating_add(1));
    *last_proposed = ts;
    ts.to_le_bytes().to_vec()
}

/// Whether a backup accepts `nondet` as the next timestamp.
pub fn check(nondet: &[u8], last_agreed: u64, now: Time, tolerance_us: u64) -> bool {
    check_window(nondet, last_agreed, now, tolerance_us, tolerance_us)
}

/// [`check`] with separate bounds: the timestamp may be at most `ahead_us` after the
/// backup's clock and `behind_us` before it. A service whose agreed clock times leases
/// (they expire by it) keeps `ahead_us` tight, since a clock run ahead ends a lease early;
/// it may allow more `behind_us`, since a clock held back ends leases late. A PRE-PREPARE
/// leaves after its primary's step and drain (a stable checkpoint's synced commit took up
/// to 2.4 s with a large file being written), so its timestamp can arrive that much old.
pub fn check_window(
    nondet: &[u8],
    last_agreed: u64,
    now: Time,
    ahead_us: u64,
    behind_us: u64,
) -> bool {
    let Ok(b) = <[u8; 8]>::try_from(nondet) else {
        return false;
    };
    let ts = u64::from_le_bytes(b);
    let local = now.as_micros();
    ts > last_agreed
        && ts <= local.saturating_add(ahead_us)
        && ts >= local.saturating_sub(behind_us)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proposals_increase_and_checks_bound_them() {
        let mut last = 0;
        let a = propose(&mut last, 5, Time(3));
        assert_eq!(a, 6u64.to_le_bytes());
        let b = propose(&mut last, 5, Time(3));
        assert_eq!(b, 7u64.to_le_bytes());
        assert!(check(&b, 6, Time(10), 5));
        assert!(!check(&b, 7, Time(10), 5), "not above the last agreed");
        assert!(!check(&b, 6, Time(100), 5), "outside the tolerance");
        assert!(!check(&b[..7], 6, Time(10), 5), "not 8 bytes");
    }

    #[test]
    fn a_window_bounds_each_side_separately() {
        let ts = 100u64.to_le_bytes();
        let verdicts: Vec<bool> = [90, 95, 100, 130, 150, 151]
            .into_iter()
            .map(|now| check_window(&ts, 1, Time(now), 5, 50))
            .collect();
        // Up to 5 ahead of the local clock, up to 50 behind it.
        assert_eq!(verdicts, [false, true, true, true, true, false]);
        assert!(
            !check_window(&ts, 100, Time(100), 5, 50),
            "not above the last agreed"
        );
    }
}
