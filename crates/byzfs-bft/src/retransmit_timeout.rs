//! A client's first retransmission timeout for each request, scaled to what it measured
//! (docs/PROTOCOL.md §1.6; ARCHITECTURE.md Deviation 33).
//!
//! A retransmission goes to every replica, and a big request's or a read's goes with its
//! body or asks every replica for the full result: on a slow link one sent too early adds
//! three copies of the bytes still crossing it, which delays every later request, which
//! is retransmitted in turn (measured at 5 Mb/s between sites: 184 retransmissions in the
//! first minute of Andrew-Tcl, a new view every few seconds, the copy never finished). So
//! the first timeout is `client_retransmit` unless the client has seen that requests of
//! that kind take longer:
//!
//! - a small read-write request: always `client_retransmit`. Backups hold a client's small
//!   request only when it is retransmitted to them, and judge the primary's throughput
//!   only on requests they hold (`replica/monitor.rs`): a timeout that followed the
//!   primary's latency would let a slow primary teach its clients never to complain.
//! - a big read-write request: twice its size times the *fastest* recent rate per KiB of
//!   requests of its size class (a power of two of KiB; for a class not seen yet, the
//!   slowest class's). A faster completion lowers the rate at once; a slower one raises it
//!   by at most 1/16, so a primary that delays big requests cannot stretch its clients'
//!   patience either.
//! - a read-only request: twice the slowest recent read, which decays by 1/16 for each
//!   faster one; a read that needed a retransmission raises it by 1/16 at most. Reads are
//!   not ordered, so the primary gains nothing by them, and a read's size (the result's) is
//!   unknown until it arrives.
//!
//! Any request's first timeout also waits for the bytes of the big requests this client
//! sent before it to cross, at the same fastest rate: a request sent behind them queues
//! behind them on the first receiver's links (its PRE-PREPARE follows the relayed bodies),
//! and at 5 Mb/s a small request sent after a 300 KB file took 1.6 s, was retransmitted to
//! every backup after 150 ms and got the primary voted out. The client counts only what it
//! sent itself, at the best rate it saw, so this too is no room for a slow primary.
//!
//! When the operator stated the links' rate ([`Config::link_rate_kbps`]), neither can be
//! shorter than what that rate allows, measured or not: a big request's first timeout is
//! at least the time `2 + k` copies of it take at that rate (the client's to the primary,
//! the primary's to the `k` backups of its fan-out one after another, one more hop), and
//! each big request sent adds at least the time of `1 + k` copies to the backlog: the
//! primary orders what comes after it only once its relayed copies are nearly across. Unmeasured, a
//! client sent 8 KiB bodies 130 ms apart to every replica of a 40 KB/s cluster, and each
//! backup's view-change timer started on the copy it got (simulator, `thin-links` 7). The
//! floor comes from the cluster file, so no replica can move it (Deviation 39).
//!
//! Retransmissions after the first back off as before, up to `client_retransmit_max` or
//! the first timeout if that is longer. No first timeout exceeds
//! `view_change_timeout_max`.

use crate::config::Config;
use crate::time::Time;
use std::collections::BTreeMap;

/// What a request is, for its timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RequestKind {
    Small,
    /// A read-write request above `big_request_threshold`, of this many bytes.
    Big(usize),
    ReadOnly,
}

/// A client's measurements for its first retransmission timeouts.
#[derive(Clone, Debug, Default)]
pub(crate) struct RetransmitTimeout {
    /// Microseconds per KiB of a big read-write request, the fastest recent completion, by
    /// size class ([`class`]): a body that fits in the links' bursts crosses faster per KiB
    /// than one that must go at their rate (at 1 Mb/s, requests of tens of KiB took a third
    /// of the time per KiB that 1 MiB needed, which was retransmitted after 18 s of 25).
    big_us_per_kib: BTreeMap<u32, u64>,
    /// Microseconds of the slowest recent read-only completion.
    read_us: Option<u64>,
    /// When the big requests sent so far will have crossed, at `big_us_per_kib`.
    backlog_until: Time,
}

fn micros(d: core::time::Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// KiB of `bytes`, rounded up (at least 1).
fn kib(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(1024).max(1)
}

/// The size class of `bytes`: log2 of its KiB, rounded up.
fn class(bytes: usize) -> u32 {
    kib(bytes).next_power_of_two().trailing_zeros()
}

/// Microseconds one copy of `bytes` takes at the links' stated rate (0 when not stated).
fn stated_crossing_us(config: &Config, bytes: usize) -> u64 {
    if !config.link_rate_stated() {
        return 0;
    }
    (bytes as u64)
        .saturating_mul(1_000_000)
        .checked_div(config.link_bytes_per_s())
        .unwrap_or(0)
}

impl RetransmitTimeout {
    /// The first retransmission timeout of a request of `kind` sent at `now`, in
    /// microseconds (at least 1); a big one is then counted in the backlog.
    pub fn sent(&mut self, config: &Config, kind: RequestKind, now: Time) -> u64 {
        let backlog = self
            .backlog_until
            .as_micros()
            .saturating_sub(now.as_micros());
        let alone = self.first_us(config, kind);
        let cap = micros(config.view_change_timeout_max).max(alone);
        let first = alone.saturating_add(backlog).min(cap);
        if let RequestKind::Big(bytes) = kind {
            // Its copy to the primary, then the primary's to its fan-out, which the requests
            // sent after it wait behind (`replica/uplink.rs`).
            let copies = 1 + config.relay_fan_out() as u64;
            let own = stated_crossing_us(config, bytes).saturating_mul(copies);
            let measured = self.rate(kind).map_or(0, |r| r.saturating_mul(kib(bytes)));
            let from = self.backlog_until.max(now).as_micros();
            self.backlog_until = Time::from_micros(from.saturating_add(measured.max(own)));
        }
        first
    }

    /// The first retransmission timeout of a request of `kind` with nothing sent before it,
    /// in microseconds (at least 1).
    fn first_us(&self, config: &Config, kind: RequestKind) -> u64 {
        let base =
            micros(config.client_retransmit).clamp(1, micros(config.client_retransmit_max).max(1));
        let measured = match kind {
            RequestKind::Small => None,
            RequestKind::Big(bytes) => self
                .rate(kind)
                .map(|r| r.saturating_mul(kib(bytes)).saturating_mul(2)),
            RequestKind::ReadOnly => self.read_us.map(|r| r.saturating_mul(2)),
        };
        let stated = match kind {
            RequestKind::Big(bytes) => {
                let copies = 2 + config.relay_fan_out() as u64;
                stated_crossing_us(config, bytes).saturating_mul(copies)
            }
            RequestKind::Small | RequestKind::ReadOnly => 0,
        };
        let cap = micros(config.view_change_timeout_max).max(base);
        measured.unwrap_or(0).max(stated).clamp(base, cap)
    }

    /// Microseconds per KiB for a big request: its class's, or for a class not yet seen
    /// the slowest of the others (a later retransmission, not an early one).
    fn rate(&self, kind: RequestKind) -> Option<u64> {
        let RequestKind::Big(bytes) = kind else {
            return None;
        };
        let known = self.big_us_per_kib.get(&class(bytes)).copied();
        known.or_else(|| self.big_us_per_kib.values().copied().max())
    }

    /// A request of `kind` completed `took_us` after it was first sent, `retransmitted` or
    /// not.
    pub fn completed(&mut self, kind: RequestKind, took_us: u64, retransmitted: bool) {
        match kind {
            RequestKind::Small => {}
            RequestKind::Big(bytes) => {
                let sample = (took_us / kib(bytes)).max(1);
                let rate = self.big_us_per_kib.entry(class(bytes)).or_insert(sample);
                *rate = if sample > *rate {
                    rate.saturating_add((sample - *rate).min(*rate / 16 + 1))
                } else {
                    sample
                };
            }
            RequestKind::ReadOnly => {
                let sample = took_us.max(1);
                self.read_us = Some(match self.read_us {
                    Some(r) if sample < r => r - (r - sample).min(r / 16 + 1),
                    // A retransmitted read took at least its timeout, so taking its time
                    // as it is would double the next timeout, read after read, up to the
                    // cap (a lying designated replier makes every read wait for one): it
                    // raises the estimate by 1/16 at most (Karn's rule, softened so that
                    // reads on a link slower than their first timeout still adapt).
                    Some(r) if retransmitted => r.saturating_add((sample - r).min(r / 16 + 1)),
                    _ => sample,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::time::Duration;

    /// A request's first timeout with nothing sent before it.
    fn alone(t: &RetransmitTimeout, c: &Config, kind: RequestKind) -> u64 {
        t.clone().sent(c, kind, Time::from_micros(1 << 40))
    }

    fn config() -> Config {
        Config {
            client_retransmit: Duration::from_millis(150),
            client_retransmit_max: Duration::from_secs(5),
            view_change_timeout_max: Duration::from_secs(60),
            ..Config::new(1)
        }
    }

    /// Unmeasured, and for small requests always, the configured timeout.
    #[test]
    fn the_configured_timeout_until_measured() {
        let c = config();
        let mut t = RetransmitTimeout::default();
        for kind in [
            RequestKind::Small,
            RequestKind::Big(128 << 10),
            RequestKind::ReadOnly,
        ] {
            assert_eq!(alone(&t, &c, kind), 150_000);
        }
        t.completed(RequestKind::Small, 4_000_000, false);
        assert_eq!(alone(&t, &c, RequestKind::Small), 150_000);
    }

    /// A 128 KiB request that took 640 ms (5 Mb/s, three copies across one link) gives
    /// 5,000 µs a KiB: a 64 KiB request waits 640 ms, a 1 KiB one the configured 150 ms.
    #[test]
    fn big_requests_wait_twice_their_size_at_the_measured_rate() {
        let c = config();
        let mut t = RetransmitTimeout::default();
        t.completed(RequestKind::Big(128 << 10), 640_000, false);
        assert_eq!(alone(&t, &c, RequestKind::Big(64 << 10)), 640_000);
        assert_eq!(alone(&t, &c, RequestKind::Big(2 << 10)), 150_000);
        // Never beyond the view-change timeout's cap.
        assert_eq!(alone(&t, &c, RequestKind::Big(1 << 30)), 60_000_000);
    }

    /// A faster completion counts at once; a slower one raises the rate by 1/16 at most.
    #[test]
    fn the_big_rate_falls_at_once_and_rises_slowly() {
        let mut t = RetransmitTimeout::default();
        t.completed(RequestKind::Big(1 << 20), 1_024_000, false); // 1,000 µs a KiB
        t.completed(RequestKind::Big(1 << 20), 10_240_000, false); // ten times slower
        assert_eq!(t.rate(RequestKind::Big(1 << 20)), Some(1_063));
        t.completed(RequestKind::Big(1 << 20), 102_400, false); // ten times faster
        assert_eq!(t.rate(RequestKind::Big(1 << 20)), Some(100));
    }

    /// Each size class learns its own rate; a class not yet seen takes the slowest known:
    /// 40 KiB in 80 ms (2,000 µs a KiB, in the links' burst) says little of 1 MiB.
    #[test]
    fn each_size_class_has_its_rate() {
        let c = config();
        let mut t = RetransmitTimeout::default();
        t.completed(RequestKind::Big(40 << 10), 80_000, false);
        t.completed(RequestKind::Big(3 << 10), 30_000, false); // 10,000 µs a KiB
        assert_eq!(alone(&t, &c, RequestKind::Big(60 << 10)), 240_000);
        assert_eq!(alone(&t, &c, RequestKind::Big(1 << 20)), 20_480_000);
        t.completed(RequestKind::Big(1 << 20), 25_600_000, false); // 25,000 µs a KiB
        assert_eq!(alone(&t, &c, RequestKind::Big(1 << 20)), 51_200_000);
        assert_eq!(alone(&t, &c, RequestKind::Big(60 << 10)), 240_000);
    }

    /// With the links' rate stated (1,000 kbit/s: 125,000 bytes a second, 2f = 2), an
    /// unmeasured 125,000-byte request waits for four copies (4 s), a measured faster rate
    /// does not shorten that, and a request sent behind it waits for its copy and the
    /// primary's two (3 s) too;
    /// small requests and reads keep the configured timeout.
    #[test]
    fn a_stated_link_rate_is_the_floor_of_a_big_request_and_its_backlog() {
        let c = Config {
            link_rate_kbps: 1_000,
            ..config()
        };
        let mut t = RetransmitTimeout::default();
        assert_eq!(alone(&t, &c, RequestKind::Big(125_000)), 4_000_000);
        assert_eq!(alone(&t, &c, RequestKind::Small), 150_000);
        assert_eq!(alone(&t, &c, RequestKind::ReadOnly), 150_000);
        t.completed(RequestKind::Big(125_000), 200_000, false);
        assert_eq!(alone(&t, &c, RequestKind::Big(125_000)), 4_000_000);
        let now = Time::from_micros(1 << 40);
        let firsts = [
            t.sent(&c, RequestKind::Big(125_000), now),
            t.sent(&c, RequestKind::Small, now),
            t.sent(&c, RequestKind::Big(125_000), now),
        ];
        assert_eq!(firsts, [4_000_000, 3_150_000, 7_000_000]);
    }

    /// A slow read counts at once; faster ones bring the estimate down by 1/16 each.
    #[test]
    fn the_read_estimate_rises_at_once_and_falls_slowly() {
        let c = config();
        let mut t = RetransmitTimeout::default();
        t.completed(RequestKind::ReadOnly, 40_000, false);
        assert_eq!(alone(&t, &c, RequestKind::ReadOnly), 150_000);
        t.completed(RequestKind::ReadOnly, 800_000, false);
        assert_eq!(alone(&t, &c, RequestKind::ReadOnly), 1_600_000);
        t.completed(RequestKind::ReadOnly, 40_000, false);
        assert_eq!(t.read_us, Some(800_000 - 50_001));
    }

    /// A read that needed a retransmission took at least its timeout: it raises the
    /// estimate by 1/16 at most, so timeouts do not double read after read (a lying
    /// designated replier made every read wait 60 s in `tests/encryption.rs`).
    #[test]
    fn a_retransmitted_read_raises_the_estimate_by_a_sixteenth_at_most() {
        let c = config();
        let mut t = RetransmitTimeout::default();
        t.completed(RequestKind::ReadOnly, 160_000, false);
        let mut firsts = vec![alone(&t, &c, RequestKind::ReadOnly)];
        for _ in 0..3 {
            // Each took its whole first timeout and then some.
            let took = firsts[firsts.len() - 1] + 10_000;
            t.completed(RequestKind::ReadOnly, took, true);
            firsts.push(alone(&t, &c, RequestKind::ReadOnly));
        }
        assert_eq!(firsts, [320_000, 340_002, 361_254, 383_834]);
        // Faster than the estimate, retransmitted or not, it comes down as before.
        t.completed(RequestKind::ReadOnly, 1_000, true);
        assert_eq!(t.read_us, Some(191_917 - 11_995));
    }

    /// 640 ms for 128 KiB: after two 64 KiB requests sent at 0 (320 ms each to cross), a
    /// small request sent 100 ms later waits the 540 ms left first, then its own 150 ms;
    /// once the bytes have crossed, nothing more.
    #[test]
    fn a_request_also_waits_for_the_bytes_sent_before_it() {
        let c = config();
        let mut t = RetransmitTimeout::default();
        t.completed(RequestKind::Big(128 << 10), 640_000, false);
        let at = |us| Time::from_micros(us);
        assert_eq!(t.sent(&c, RequestKind::Big(64 << 10), at(0)), 640_000);
        assert_eq!(t.sent(&c, RequestKind::Big(64 << 10), at(0)), 960_000);
        assert_eq!(t.sent(&c, RequestKind::Small, at(100_000)), 690_000);
        assert_eq!(t.sent(&c, RequestKind::ReadOnly, at(640_000)), 150_000);
        // Nothing was measured: nothing is counted.
        let mut fresh = RetransmitTimeout::default();
        fresh.sent(&c, RequestKind::Big(1 << 20), at(0));
        assert_eq!(fresh.sent(&c, RequestKind::Small, at(0)), 150_000);
    }
}
