//! How long the big bodies this replica has sent still need to cross its own link
//! (docs/PROTOCOL.md §1.10, "A body on its way").
//!
//! A replica that sent a peer a body leaves that peer's asks for it unanswered while the
//! copy may still be on its way (`relay_fan_out.rs`, `status.rs`). How long a copy takes
//! depends on what was sent before it: at `slow-5` the primary relayed a 1.0 MB and a
//! 0.7 MB body to two backups at once (3.4 MB on a 5 Mb/s link, 5.4 s), took each copy to
//! need 2.5 s, and from then on sent the 1 MB body to each backup that still asked, again
//! at each doubling gap: 13 more copies in 2.3 s, 21 s of link time, and the mount's
//! requests behind them waited a minute (BENCHMARKS.md "A body on its way").
//!
//! So every body a replica sends is counted here as if its link carried them one after
//! another at [`crate::Config::link_rate_kbps`]: the time the bodies queued ahead of a new
//! copy still need is added to how long that copy is given. One link per replica (a site's
//! uplink), not one per peer: copies to different peers share it. A copy lost with its
//! connection waits at most [`crate::Config::view_change_timeout_max`] longer than it
//! would have.
//!
//! The primary also orders by it (`normal.rs` `build_batch`): a PRE-PREPARE leaves after
//! the bodies sent before it, on the same link even when on another connection, and
//! carries the time it was made. Eleven bodies relayed at once (4.9 MB, twice) put the
//! next one 16–22 s behind, past the file service's 10 s clock-lag tolerance, at every
//! backup: each refused it (`Nondet`), nobody could vouch for it, and the view was lost.
//! So, when the operator stated the links' rate, the primary remembers when the last copy
//! of each body it relayed will have crossed ([`Uplink::note_crossing`]) and holds that
//! request back while it would still be crossing half a view-change timeout from now; it
//! looks again at each STATUS tick, and its own view-change timer waits while its link is
//! busy (`view_change.rs`). Holding every batch while any body crossed let clients that
//! kept sending bodies hold the primary for ever (simulator, `thin-links`). Unstated, the
//! rate is taken as 3,500 kbit/s for the answers only: a guess far below a fast link's
//! rate would hold every batch of large writes on a LAN for seconds.

use crate::crypto::Digest;
use crate::time::Time;
use core::time::Duration;
use std::collections::BTreeMap;

/// When the bodies sent so far will have crossed this replica's link.
#[derive(Clone, Debug, Default)]
pub(crate) struct Uplink {
    busy_until: Option<Time>,
    /// When the last copy of each body relayed as primary will have crossed, for those
    /// still crossing (entries in the past are dropped at the next relay).
    crossing: BTreeMap<Digest, Time>,
}

impl Uplink {
    /// How long the bodies sent so far still need at `now`.
    pub(crate) fn ahead(&self, now: Time) -> Duration {
        self.busy_until
            .filter(|&t| t > now)
            .map_or(Duration::ZERO, |t| {
                Duration::from_micros(t.as_micros() - now.as_micros())
            })
    }

    /// A body of `len` bytes is sent at `now` over a link carrying `bytes_per_s`: returns
    /// how long the bodies queued ahead of it still need, at most `cap`.
    pub(crate) fn send(
        &mut self,
        now: Time,
        len: usize,
        bytes_per_s: u64,
        cap: Duration,
    ) -> Duration {
        let start = self.busy_until.map_or(now, |t| t.max(now));
        let ahead = Duration::from_micros(start.as_micros() - now.as_micros());
        let cross_us = (len as u64)
            .saturating_mul(1_000_000)
            .checked_div(bytes_per_s)
            .unwrap_or(0);
        // Never more than `cap` ahead of now: a backlog estimated beyond it says nothing
        // more, and must not grow without bound.
        let end = Time::from_micros(start.as_micros().saturating_add(cross_us));
        self.busy_until = Some(end.min(now + cap));
        ahead.min(cap)
    }

    /// The copies of body `d` sent up to now leave when the link is free: remembered until
    /// then (one entry per body still crossing, so as many as the bodies sent in `cap`).
    pub(crate) fn note_crossing(&mut self, d: Digest, now: Time) {
        self.crossing.retain(|_, t| *t > now);
        if let Some(t) = self.busy_until.filter(|&t| t > now) {
            self.crossing.insert(d, t);
        }
    }

    /// Whether body `d` will still be crossing at `by`.
    pub(crate) fn crossing_at(&self, d: &Digest, by: Time) -> bool {
        self.crossing.get(d).is_some_and(|&t| t > by)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// At 1 MB/s: a 1 MB body sent at 0 has nothing ahead of it, the next one 1 s, one sent
    /// at 1.5 s 0.5 s; an idle link has nothing ahead; the cap bounds both.
    #[test]
    fn bodies_queue_behind_each_other_on_one_link() {
        let mut u = Uplink::default();
        let rate = 1_000_000;
        let cap = Duration::from_secs(60);
        let t = |ms: u32| Time::ZERO + MS * ms;
        let ahead: Vec<u128> = [
            u.send(t(0), 1_000_000, rate, cap),
            u.send(t(0), 1_000_000, rate, cap),
            u.send(t(1_500), 10, rate, cap),
            u.send(t(9_000), 10, rate, cap),
        ]
        .iter()
        .map(Duration::as_millis)
        .collect();
        assert_eq!(ahead, [0, 1_000, 500, 0]);
        let short = Duration::from_secs(2);
        let mut u = Uplink::default();
        for _ in 0..5 {
            u.send(t(0), 1_000_000, rate, short);
        }
        assert_eq!(u.send(t(0), 1, rate, short), short);
        assert_eq!(u.send(t(1_000), 1, rate, short), MS * 1_000);
    }
}
