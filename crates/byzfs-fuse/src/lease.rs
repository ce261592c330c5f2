//! The mount's lease at the replicas (`byzfs_fs::lock`): when it was last renewed and
//! confirmed, and the place of the last reply that said it had lapsed.
//!
//! Every lock, lock delegation, file delegation and held directory the mount keeps needs
//! the lease: when a reply says it lapsed (no lease-bearing request reached the replicas
//! for 30 s of agreed time), the replicas had dropped them all before that request ran,
//! and took the lease again for it. Lease-bearing requests are in flight without the
//! mount's lock (issue #45 item 1), so their replies are applied in any order; each book
//! tags what a reply installs with that request's **place** (its position in the order the
//! replicas run this mount's requests: `cluster.rs` `Cluster::next_place`) and:
//!
//! * a lapse told by the reply of place `p` drops only what is tagged below `p` (what
//!   was installed later was installed under the lease `p` took again), and
//! * a reply of place `q` applied after a lapse of a later place installs nothing (what it
//!   was granted was dropped at the replicas with the lease: a lock granted so is lost, as
//!   NFS loses locks with its lease, and logged).
//!
//! Where a place is not known exactly (a batch's reply, applied after other requests were
//! sent), a later one is used: dropping more than the replicas did only makes other
//! mounts wait for a recall the mount answers as for something it does not hold;
//! dropping less would let the mount grant locks under a delegation the replicas dropped.

use std::time::{Duration, Instant};

/// How often a mount that needs the lease renews it: a third of the replicas' 30 s.
pub(crate) const RENEW_EVERY: Duration = Duration::from_secs(10);
/// Locks are granted from this mount's own books only within this of the lease's last
/// confirmation (`delegations.rs`; the mount renews every [`RENEW_EVERY`]).
pub(crate) const CONFIRMED_WITHIN: Duration = Duration::from_secs(20);

/// What a lease-bearing reply means for the books ([`Lease::answered`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// The lease held: what the reply grants is installed, tagged with its place.
    Held,
    /// The lease had lapsed before this request: everything tagged below this place is
    /// gone; what the reply grants is installed.
    Lapsed(u64),
    /// A later request's reply said the lease lapsed after this one ran: what this reply
    /// grants is gone already and installs nothing.
    Late,
}

/// The lease as this mount knows it.
#[derive(Debug, Default)]
pub(crate) struct Lease {
    /// The place of the latest reply that said the lease had lapsed (0: none).
    lapsed_at: u64,
    /// When the last renewal was sent (one is not sent again within [`RENEW_EVERY`]).
    renewed: Option<Instant>,
    /// When the last request that renewed the lease, and whose reply was in, was sent.
    confirmed: Option<Instant>,
    /// Lapses told, and replies that came too late to install what they granted: logged
    /// at unmount.
    pub(crate) lapses: u64,
    pub(crate) late: u64,
    /// Lease-bearing calls whose reply was waited for without the mount's lock
    /// (`lease_call.rs`), logged at unmount.
    pub(crate) trips_unlocked: u64,
}

impl Lease {
    /// The reply of a lease-bearing request of place `place`, sent at `sent`, in;
    /// `lapsed`: it says the lease had lapsed before it ran.
    pub(crate) fn answered(&mut self, place: u64, lapsed: bool, sent: Instant) -> Answer {
        self.renewed = self.renewed.max(Some(sent));
        self.confirmed = self.confirmed.max(Some(sent));
        if place < self.lapsed_at {
            self.late += 1;
            return Answer::Late;
        }
        if lapsed {
            self.lapsed_at = place;
            self.lapses += 1;
            return Answer::Lapsed(place);
        }
        Answer::Held
    }

    /// A lapse told where the request's place is not known exactly: `at_most` is a place
    /// no earlier than its own (see the module docs).
    pub(crate) fn lapsed_by(&mut self, at_most: u64) -> u64 {
        self.lapsed_at = self.lapsed_at.max(at_most);
        self.lapses += 1;
        self.lapsed_at
    }

    /// Whether what was installed at place `tag` is gone with a lapse told since.
    pub(crate) fn dropped(&self, tag: u64) -> bool {
        tag < self.lapsed_at
    }

    /// The place of the latest lapse told (0: none).
    pub(crate) fn lapsed_at(&self) -> u64 {
        self.lapsed_at
    }

    /// A renewal is sent now.
    pub(crate) fn renewing(&mut self, now: Instant) {
        self.renewed = Some(now);
    }

    /// Whether the lease should be renewed now, `needed`: the mount holds something that
    /// needs it (locks, delegations, hidden files).
    pub(crate) fn renewal_due(&self, now: Instant, needed: bool) -> bool {
        needed
            && self
                .renewed
                .is_none_or(|t| now.saturating_duration_since(t) >= RENEW_EVERY)
    }

    /// Whether the lease was confirmed within `within`.
    pub(crate) fn confirmed_within(&self, now: Instant, within: Duration) -> bool {
        self.confirmed
            .is_some_and(|t| now.saturating_duration_since(t) < within)
    }

    /// Whether it was confirmed recently enough to grant locks from the mount's books.
    pub(crate) fn confirmed_recently(&self, now: Instant) -> bool {
        self.confirmed_within(now, CONFIRMED_WITHIN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lapse_drops_what_is_older_and_a_late_reply_installs_nothing() {
        let t = Instant::now();
        let mut l = Lease::default();
        assert_eq!(l.answered(3, false, t), Answer::Held);
        assert!(!l.dropped(3));
        // Place 7 says the lease lapsed: what 3 installed went, what 8 installs stays.
        assert_eq!(l.answered(7, true, t), Answer::Lapsed(7));
        assert!(l.dropped(3) && l.dropped(6));
        assert!(!l.dropped(7) && !l.dropped(8));
        // Place 5's reply, applied after 7's: its grant went with the lease.
        assert_eq!(l.answered(5, false, t), Answer::Late);
        assert_eq!(
            l.answered(5, true, t),
            Answer::Late,
            "an older lapse is news to none"
        );
        assert_eq!(l.lapsed_at(), 7);
        assert_eq!(l.answered(9, false, t), Answer::Held);
        assert_eq!((l.lapses, l.late), (1, 2));
    }

    #[test]
    fn a_lapse_at_an_uncertain_place_never_goes_back() {
        let mut l = Lease::default();
        assert_eq!(l.lapsed_by(12), 12);
        assert_eq!(l.lapsed_by(4), 12);
        assert!(l.dropped(11) && !l.dropped(12));
    }

    #[test]
    fn renewals_are_due_while_needed_and_confirmations_keep_the_latest() {
        let t = Instant::now();
        let mut l = Lease::default();
        assert!(!l.renewal_due(t, false));
        assert!(l.renewal_due(t, true), "never renewed");
        l.renewing(t);
        assert!(!l.renewal_due(t + RENEW_EVERY / 2, true));
        assert!(l.renewal_due(t + RENEW_EVERY, true));
        assert!(!l.confirmed_recently(t));
        l.answered(2, false, t + Duration::from_secs(5));
        // An older request's reply, in later, does not move the confirmation back.
        l.answered(1, false, t);
        assert!(l.confirmed_recently(t + CONFIRMED_WITHIN));
        assert!(!l.confirmed_recently(t + Duration::from_secs(5) + CONFIRMED_WITHIN));
        assert!(!l.renewal_due(t + Duration::from_secs(5) + RENEW_EVERY / 2, true));
    }
}
