//! Flood protection (Aardvark's, docs/PROTOCOL.md §5.3 measure 3; ARCHITECTURE.md "Defences
//! under attack"): a source whose frames are mostly useless — garbage, bad authenticators,
//! duplicates, messages outside the window, each dropped by the core — is shed for a
//! back-off. A peer replica's inbound link is closed and its reconnection refused; a
//! client's connection is closed and that session refused; frames of the source still
//! queued are dropped unread. The back-off doubles each time the same source is shed again
//! (up to [`BACKOFF_MAX`]).
//!
//! The bar is high so a correct source never reaches it: at least [`USELESS_MIN`] useless
//! frames in one second from a peer ([`USELESS_MIN_CLIENT`] from a client session), and at
//! least [`USELESS_SHARE_PERCENT`] % of what it sent. A correct peer's retransmissions after
//! a partition are mostly useful, and a correct client's retransmissions are bounded by its
//! window (16) and its retransmission timer (150 ms at least): under a hundred a second.
//!
//! A client picks its session numbers, so a shed client can come back at once under a new
//! session: when [`CERT_STRIKES`] sessions of one certificate are shed within
//! [`CERT_WINDOW`], the certificate itself is shed (every session of it, with the same
//! growing back-off) — its holder is faulty.

use byzfs_bft::{ClientId, ReplicaId};
use core::time::Duration;
use std::collections::HashMap;
use std::time::Instant;

/// Length of one counting window.
const WINDOW: Duration = Duration::from_secs(1);
/// Useless frames in one window that may make a peer shed.
pub(super) const USELESS_MIN: u32 = 2_000;
/// Useless frames in one window that may make a client session shed.
pub(super) const USELESS_MIN_CLIENT: u32 = 256;
/// Sessions of one certificate shed within [`CERT_WINDOW`] that shed the certificate.
pub(super) const CERT_STRIKES: u32 = 3;
/// See [`CERT_STRIKES`].
const CERT_WINDOW: Duration = Duration::from_secs(10);
/// Share of a source's frames in one window that must be useless.
const USELESS_SHARE_PERCENT: u32 = 50;
/// First back-off.
const BACKOFF_MIN: Duration = Duration::from_secs(1);
/// Longest back-off.
pub(super) const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// Where a frame came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Origin {
    /// The inbound link of this peer replica.
    Replica(ReplicaId),
    /// A client's own connection.
    Client { client: ClientId, conn: u64 },
}

impl Origin {
    /// The identity a shed applies to (a client's session, not one connection of it).
    fn key(self) -> Key {
        match self {
            Origin::Replica(j) => Key::Replica(j),
            Origin::Client { client, .. } => Key::Client(client),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Key {
    Replica(ReplicaId),
    Client(ClientId),
}

#[derive(Clone, Debug)]
struct Tally {
    since: Instant,
    frames: u32,
    useless: u32,
    /// Shed until, and how many times so far.
    shed_until: Option<Instant>,
    strikes: u32,
}

/// The per-source tallies of one event loop.
#[derive(Debug, Default)]
pub(super) struct Shedder {
    tallies: HashMap<Key, Tally>,
    /// Per client certificate: when its first recent session was shed, how many since, and
    /// how many times the certificate itself was shed.
    certs: HashMap<ClientId, (Instant, u32, u32)>,
}

impl Shedder {
    /// Whether `origin` is shed at `now` (its frames are dropped unread).
    pub fn is_shed(&mut self, origin: Origin, now: Instant) -> bool {
        let Some(t) = self.tallies.get_mut(&origin.key()) else {
            return false;
        };
        match t.shed_until {
            Some(until) if until > now => true,
            Some(_) => {
                t.shed_until = None;
                false
            }
            None => false,
        }
    }

    /// Counts one frame of `origin` the core handled, `useless` if it dropped it. Returns
    /// the back-off if this frame made the source cross the bar.
    pub fn note(&mut self, origin: Origin, useless: bool, now: Instant) -> Option<Duration> {
        let t = self.tallies.entry(origin.key()).or_insert(Tally {
            since: now,
            frames: 0,
            useless: 0,
            shed_until: None,
            strikes: 0,
        });
        if now.duration_since(t.since) >= WINDOW {
            t.since = now;
            t.frames = 0;
            t.useless = 0;
        }
        t.frames += 1;
        t.useless += u32::from(useless);
        let min = match origin {
            Origin::Replica(_) => USELESS_MIN,
            Origin::Client { .. } => USELESS_MIN_CLIENT,
        };
        let over = t.useless >= min && t.useless * 100 >= t.frames * USELESS_SHARE_PERCENT;
        if !over {
            return None;
        }
        let backoff = BACKOFF_MIN
            .saturating_mul(1u32 << t.strikes.min(5))
            .min(BACKOFF_MAX);
        t.strikes += 1;
        t.shed_until = Some(now + backoff);
        t.frames = 0;
        t.useless = 0;
        Some(backoff)
    }

    /// A session of certificate `cert` was shed at `now`: the back-off for the whole
    /// certificate if that makes [`CERT_STRIKES`] within [`CERT_WINDOW`].
    pub fn cert_strike(&mut self, cert: ClientId, now: Instant) -> Option<Duration> {
        let e = self.certs.entry(cert).or_insert((now, 0, 0));
        if now.duration_since(e.0) >= CERT_WINDOW {
            *e = (now, 0, e.2);
        }
        e.1 += 1;
        if e.1 < CERT_STRIKES {
            return None;
        }
        let backoff = BACKOFF_MIN
            .saturating_mul(1u32 << e.2.min(5))
            .min(BACKOFF_MAX);
        *e = (now, 0, e.2 + 1);
        Some(backoff)
    }

    /// Forgets client sessions not seen for a while (bounded memory under many sessions).
    pub fn prune(&mut self, now: Instant) {
        if self.tallies.len() < 4096 {
            return;
        }
        self.tallies.retain(|k, t| {
            matches!(k, Key::Replica(_))
                || t.shed_until.is_some_and(|u| u > now)
                || now.duration_since(t.since) < BACKOFF_MAX
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_of_mostly_useless_frames_is_shed_with_a_growing_backoff() {
        let mut s = Shedder::default();
        let t0 = Instant::now();
        let peer = Origin::Replica(2);
        // Useful frames alongside: below half useless, never shed.
        for _ in 0..3 * USELESS_MIN {
            assert_eq!(s.note(peer, false, t0), None);
            assert_eq!(s.note(peer, false, t0), None);
            assert_eq!(s.note(peer, true, t0), None);
        }
        let t1 = t0 + WINDOW;
        for i in 1..=USELESS_MIN {
            let r = s.note(peer, true, t1);
            assert_eq!(r.is_some(), i == USELESS_MIN, "frame {i}");
        }
        assert!(s.is_shed(peer, t1 + Duration::from_millis(999)));
        assert!(!s.is_shed(peer, t1 + BACKOFF_MIN));
        // Again: twice as long.
        let t2 = t1 + BACKOFF_MIN + WINDOW;
        let mut last = None;
        for _ in 0..USELESS_MIN {
            last = s.note(peer, true, t2);
        }
        assert_eq!(last, Some(2 * BACKOFF_MIN));
        // Another source is untouched; a client is shed per session, on any connection.
        assert!(!s.is_shed(Origin::Replica(3), t2));
        let c = |conn| Origin::Client { client: 7, conn };
        for i in 1..=USELESS_MIN_CLIENT {
            assert_eq!(s.note(c(1), true, t2).is_some(), i == USELESS_MIN_CLIENT);
        }
        assert!(s.is_shed(c(2), t2));
    }

    #[test]
    fn a_certificate_whose_sessions_keep_being_shed_is_shed() {
        let mut s = Shedder::default();
        let t0 = Instant::now();
        assert_eq!(s.cert_strike(9, t0), None);
        assert_eq!(s.cert_strike(9, t0 + CERT_WINDOW), None, "a new window");
        assert_eq!(s.cert_strike(9, t0 + CERT_WINDOW), None);
        assert_eq!(s.cert_strike(9, t0 + CERT_WINDOW), Some(BACKOFF_MIN));
        assert_eq!(
            s.cert_strike(1, t0 + CERT_WINDOW),
            None,
            "another certificate"
        );
        for _ in 0..2 {
            assert_eq!(s.cert_strike(9, t0 + CERT_WINDOW), None);
        }
        assert_eq!(s.cert_strike(9, t0 + CERT_WINDOW), Some(2 * BACKOFF_MIN));
    }
}
