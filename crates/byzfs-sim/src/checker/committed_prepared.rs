//! committed-local ⇒ committed (docs/PROTOCOL.md §1.5 "Invariant", §6.6): when a correct replica
//! completes a commit certificate for `(view, seq, digest)` ([`Event::CommittedLocal`]), at
//! least `f+1` correct replicas have completed a prepared certificate for the same
//! `(view, seq, digest)` ([`Event::Prepared`]).
//!
//! Checked online, at the moment of `CommittedLocal`, and that is sound: the certificate holds
//! `2f+1` COMMITs from distinct replicas, at most `f` of them faulty (Byzantine, twinned,
//! amnesiac), so at least `f+1` come from correct replicas; a correct replica sends COMMIT for
//! `(v, n, d)` only right after its own prepared certificate for `(v, n, d)` completed, and the
//! simulator hands a replica's events to the oracle when it emits them — before any frame of
//! the same step is delivered. So the `f+1` `Prepared` events causally precede the
//! `CommittedLocal`, whatever the message delays. (Clock-faulty replicas run honest code with
//! their own state: they are correct here.)

use super::prepared::Prepared;
use super::Sink;
use byzfs_bft::{Event, Time};

/// Checker name.
pub const NAME: &str = "committed-prepared";

/// The committed-implies-prepared checker.
#[derive(Clone, Debug)]
pub struct CommittedPrepared {
    f: usize,
}

impl CommittedPrepared {
    /// A checker for a cluster tolerating `f` faults.
    pub fn new(f: usize) -> CommittedPrepared {
        CommittedPrepared { f }
    }

    /// An event of correct replica instance `inst`; `prepared` already holds every earlier
    /// `Prepared` event of correct replicas (including `inst`'s own).
    pub fn on_event(
        &mut self,
        sink: &mut Sink,
        now: Time,
        inst: usize,
        ev: &Event,
        prepared: &Prepared,
    ) {
        let Event::CommittedLocal { view, seq, digest } = *ev else {
            return;
        };
        let have = prepared.prepared_by(view, seq, digest);
        if have < self.f + 1 {
            sink.report(
                NAME,
                now,
                format!(
                    "r{inst} completed a commit certificate for (view {view}, seq {seq}, \
                     {digest:?}) but only {have} correct replica(s) prepared it (need f+1 = {})",
                    self.f + 1
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use byzfs_bft::Digest;

    fn d(b: u8) -> Digest {
        Digest([b; 32])
    }

    #[test]
    fn commit_needs_f_plus_one_correct_prepared() {
        let mut p = Prepared::default();
        let mut c = CommittedPrepared::new(1);
        let mut s = Sink::new(1, "t");
        let prep = |r| {
            (
                r,
                Event::Prepared {
                    view: 2,
                    seq: 9,
                    digest: d(1),
                },
            )
        };
        let committed = Event::CommittedLocal {
            view: 2,
            seq: 9,
            digest: d(1),
        };
        let (r, ev) = prep(0);
        p.on_event(&mut s, Time(1), r, &ev);
        c.on_event(&mut s, Time(2), 0, &committed, &p);
        assert_eq!(s.violations().len(), 1, "only one correct replica prepared");
        assert_eq!(s.violations()[0].checker, NAME);
        let mut s = Sink::new(1, "t");
        let (r, ev) = prep(1);
        p.on_event(&mut s, Time(3), r, &ev);
        c.on_event(&mut s, Time(4), 0, &committed, &p);
        assert!(!s.any(), "{:?}", s.violations());
        // A different digest or view is not the same certificate.
        let other = Event::CommittedLocal {
            view: 3,
            seq: 9,
            digest: d(1),
        };
        c.on_event(&mut s, Time(5), 2, &other, &p);
        assert_eq!(s.violations().len(), 1);
    }
}
