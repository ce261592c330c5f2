//! INV-PREPARED (docs/PROTOCOL.md §1.5 "Invariant (same view)", §6.6): no two different digests
//! gain prepared certificates for the same `(view, seq)` at correct replicas — one replica
//! twice, or two replicas. Fed by [`Event::Prepared`] (a prepared certificate completed: the
//! pre-prepare and `2f` matching PREPAREs). Sound because any two prepared certificates for
//! `(v, n)` share at least one correct replica's vote (pre-prepare or PREPARE), and a correct
//! replica votes for at most one digest per `(v, n)` — also across a restart with its durable
//! state, which keeps its promises (§3.6 #11).
//!
//! The record of who prepared what is also what [`super::committed_prepared`] needs, so it is
//! kept here and shared.

use super::Sink;
use byzfs_bft::{Digest, Event, Seq, Time, View};
use std::collections::{BTreeMap, BTreeSet};

/// Checker name.
pub const NAME: &str = "prepared";

/// The first prepared certificate seen for a `(view, seq)`, and everyone who prepared it.
#[derive(Clone, Debug)]
struct Cert {
    digest: Digest,
    first: usize,
    at: Time,
    /// Correct replica instances that reported a prepared certificate for `digest`.
    by: BTreeSet<usize>,
}

/// The INV-PREPARED checker.
#[derive(Clone, Debug, Default)]
pub struct Prepared {
    certs: BTreeMap<(View, Seq), Cert>,
}

impl Prepared {
    /// An event of correct replica instance `inst`.
    pub fn on_event(&mut self, sink: &mut Sink, now: Time, inst: usize, ev: &Event) {
        let Event::Prepared { view, seq, digest } = *ev else {
            return;
        };
        let cert = self.certs.entry((view, seq)).or_insert_with(|| Cert {
            digest,
            first: inst,
            at: now,
            by: BTreeSet::new(),
        });
        if cert.digest != digest {
            sink.report(
                NAME,
                now,
                format!(
                    "(view {view}, seq {seq}): r{inst} prepared {digest:?} but r{} prepared {:?} \
                     (at t={} µs)",
                    cert.first,
                    cert.digest,
                    cert.at.as_micros()
                ),
            );
            return;
        }
        cert.by.insert(inst);
    }

    /// How many distinct correct replica instances reported a prepared certificate for
    /// `(view, seq, digest)` so far.
    pub fn prepared_by(&self, view: View, seq: Seq, digest: Digest) -> usize {
        self.certs
            .get(&(view, seq))
            .filter(|c| c.digest == digest)
            .map_or(0, |c| c.by.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(b: u8) -> Digest {
        Digest([b; 32])
    }
    fn prepared(view: View, seq: Seq, digest: Digest) -> Event {
        Event::Prepared { view, seq, digest }
    }

    #[test]
    fn same_digest_everywhere_is_fine_and_counted() {
        let mut p = Prepared::default();
        let mut s = Sink::new(1, "t");
        for r in 0..3 {
            p.on_event(&mut s, Time(1), r, &prepared(0, 1, d(1)));
        }
        p.on_event(&mut s, Time(1), 0, &prepared(0, 1, d(1)));
        // Another view may prepare another digest (the view change decides between them).
        p.on_event(&mut s, Time(2), 1, &prepared(1, 1, d(2)));
        assert!(!s.any(), "{:?}", s.violations());
        assert_eq!(p.prepared_by(0, 1, d(1)), 3);
        assert_eq!(p.prepared_by(0, 1, d(2)), 0);
        assert_eq!(p.prepared_by(1, 1, d(2)), 1);
    }

    #[test]
    fn two_digests_in_one_view_are_caught() {
        let mut p = Prepared::default();
        let mut s = Sink::new(1, "t");
        p.on_event(&mut s, Time(1), 0, &prepared(3, 7, d(1)));
        p.on_event(&mut s, Time(2), 2, &prepared(3, 7, d(2)));
        assert_eq!(s.violations().len(), 1);
        assert_eq!(s.violations()[0].checker, NAME);
        // One replica preparing two digests is caught too.
        let mut s = Sink::new(1, "t");
        p.on_event(&mut s, Time(3), 0, &prepared(3, 7, d(3)));
        assert_eq!(s.violations().len(), 1);
    }
}
