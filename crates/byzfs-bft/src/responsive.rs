//! Which replicas a client counts on (issue #47; docs/PROTOCOL.md "Replies").
//!
//! A request names one *designated replier* that sends the full result; the others send
//! its digest (docs/PROTOCOL.md §1.12), and a read goes first to `2f+1` replicas only. With the
//! designated replier crashed, stopped or lying, the digests certify a result nobody sent
//! in full, and the client waited out a whole retransmission timeout before asking every
//! replica: with one backup down, one read in four did, and reading a file back took 30
//! times as long.
//!
//! So the client keeps, per replica, two facts learned from its own traffic:
//!
//! * **silent**: the replica was expected to answer (asked a read, or sent an ordered
//!   request every replica executes) and has sent no authenticated reply since, for longer
//!   than the grace ([`Responsiveness::grace_us`]: a few typical read times, at least
//!   [`GRACE_MIN_US`]). Any authenticated reply clears it, a late one for a request already
//!   completed included, so a replica that is merely slowest is silent for moments only.
//! * **contradicted**: its reply disagreed with the result a certificate settled (a lie, or
//!   a replica behind), which keeps it from being designated for a back-off that doubles at
//!   each contradiction ([`DISTRUST_MIN_US`] to [`DISTRUST_MAX_US`]).
//!
//! Neither is a safety decision — certificates are counted as before — only a choice of
//! whom to ask first and whom to designate: [`Responsiveness::replier`] draws among the
//! replicas that are neither (among all if none is left), and [`Responsiveness::left_out`]
//! leaves the silent and contradicted ones out of a read's first `2f+1`. A silent replica
//! is asked again now and then ([`Responsiveness::probes`]: after a gap that doubles from
//! [`PROBE_MIN_US`] to [`PROBE_MAX_US`]), so one that comes back is counted on again at its
//! first reply.
//!
//! Tests: the unit tests below, and `client.rs`'s `a_dead_designated_replier_is_not_chosen_again`
//! and the real-process `crates/byzfs/tests/replica_down.rs`.

use crate::ids::ReplicaId;
use crate::time::Time;
use rand::Rng as _;
use rand_chacha::ChaCha8Rng;

/// Shortest grace before an expected reply that has not come makes a replica silent.
pub const GRACE_MIN_US: u64 = 20_000;
/// Longest grace.
pub const GRACE_MAX_US: u64 = 1_000_000;
/// First gap before a silent replica is asked again.
pub const PROBE_MIN_US: u64 = 100_000;
/// Longest gap between asks of a silent replica.
pub const PROBE_MAX_US: u64 = 5_000_000;
/// First time a contradicted replica is not designated.
pub const DISTRUST_MIN_US: u64 = 1_000_000;
/// Longest time a contradicted replica is not designated.
pub const DISTRUST_MAX_US: u64 = 60_000_000;

/// What the client knows of one replica.
#[derive(Clone, Debug, Default)]
struct Replica {
    /// When it was first expected to answer, with no authenticated reply since.
    waiting_since: Option<Time>,
    /// When it is next asked while silent, and the gap after that.
    probe_at: Option<Time>,
    probe_gap_us: u64,
    /// Not designated before this time (contradicted a certificate).
    distrusted_until: Option<Time>,
    distrust_us: u64,
}

/// Per-replica answers seen by one client.
#[derive(Clone, Debug)]
pub struct Responsiveness {
    replicas: Vec<Replica>,
}

impl Responsiveness {
    /// Nothing known yet of `n` replicas: every one is counted on.
    pub fn new(n: usize) -> Responsiveness {
        Responsiveness {
            replicas: vec![Replica::default(); n],
        }
    }

    /// The grace for a client whose reads take `read_us` on average.
    pub fn grace_us(read_us: u64) -> u64 {
        read_us.saturating_mul(8).clamp(GRACE_MIN_US, GRACE_MAX_US)
    }

    /// `r` is now expected to answer (a request was sent to it, or is executed by it).
    pub fn expect(&mut self, r: ReplicaId, now: Time) {
        if let Some(x) = self.replicas.get_mut(r as usize) {
            x.waiting_since.get_or_insert(now);
        }
    }

    /// `r` sent an authenticated reply.
    pub fn answered(&mut self, r: ReplicaId) {
        if let Some(x) = self.replicas.get_mut(r as usize) {
            x.waiting_since = None;
            x.probe_at = None;
            x.probe_gap_us = 0;
        }
    }

    /// `r`'s reply disagreed with a settled certificate.
    pub fn contradicted(&mut self, r: ReplicaId, now: Time) {
        if let Some(x) = self.replicas.get_mut(r as usize) {
            let until = double_gap(&mut x.distrust_us, DISTRUST_MIN_US, DISTRUST_MAX_US, now);
            x.distrusted_until = Some(until);
        }
    }

    /// Whether `r` is silent at `now` (see the module docs).
    pub fn silent(&self, r: ReplicaId, now: Time, grace_us: u64) -> bool {
        self.replicas
            .get(r as usize)
            .and_then(|x| x.waiting_since)
            .is_some_and(|t| now.as_micros().saturating_sub(t.as_micros()) > grace_us)
    }

    fn distrusted(&self, r: ReplicaId, now: Time) -> bool {
        self.replicas
            .get(r as usize)
            .and_then(|x| x.distrusted_until)
            .is_some_and(|t| now < t)
    }

    /// Whether the client counts on `r` to answer, and in full: neither silent nor
    /// contradicted lately.
    pub fn counted_on(&self, r: ReplicaId, now: Time, grace_us: u64) -> bool {
        !self.silent(r, now, grace_us) && !self.distrusted(r, now)
    }

    /// A designated replier: drawn uniformly among the replicas counted on (among all if
    /// none is), other than `avoid` when there is a choice.
    pub fn replier(&self, rng: &mut ChaCha8Rng, now: Time, grace_us: u64, avoid: Option<u8>) -> u8 {
        let n = self.replicas.len().min(usize::from(u8::MAX));
        let all: Vec<u8> = (0..n as u8).collect();
        let trusted: Vec<u8> = all
            .iter()
            .copied()
            .filter(|&r| self.counted_on(ReplicaId::from(r), now, grace_us))
            .collect();
        let pool = if trusted.is_empty() { all } else { trusted };
        let choice: Vec<u8> = match avoid {
            Some(a) if pool.len() > 1 => pool.into_iter().filter(|&r| r != a).collect(),
            _ => pool,
        };
        match choice.len() {
            0 => 0,
            k => choice[rng.gen_range(0..k)],
        }
    }

    /// The `f` replicas a read skips at first: those not counted on, then `usual` in order
    /// (the primary and the replicas after it), never `replier`.
    pub fn left_out(
        &self,
        usual: impl Iterator<Item = ReplicaId>,
        f: usize,
        replier: ReplicaId,
        now: Time,
        grace_us: u64,
    ) -> Vec<ReplicaId> {
        let usual: Vec<ReplicaId> = usual.filter(|&r| r != replier).collect();
        let mut out: Vec<ReplicaId> = usual
            .iter()
            .copied()
            .filter(|&r| !self.counted_on(r, now, grace_us))
            .take(f)
            .collect();
        for r in usual {
            if out.len() >= f {
                break;
            }
            if !out.contains(&r) {
                out.push(r);
            }
        }
        out
    }

    /// The silent replicas among `candidates` whose turn to be asked again has come; each
    /// is asked again after a gap twice as long.
    pub fn probes(&mut self, candidates: &[ReplicaId], now: Time, grace_us: u64) -> Vec<ReplicaId> {
        let mut due = Vec::new();
        for &r in candidates {
            if !self.silent(r, now, grace_us) {
                continue;
            }
            let Some(x) = self.replicas.get_mut(r as usize) else {
                continue;
            };
            match x.probe_at {
                Some(t) if now < t => {}
                Some(_) => {
                    due.push(r);
                    let at = double_gap(&mut x.probe_gap_us, PROBE_MIN_US, PROBE_MAX_US, now);
                    x.probe_at = Some(at);
                }
                None => {
                    x.probe_gap_us = PROBE_MIN_US;
                    x.probe_at = Some(Time::from_micros(
                        now.as_micros().saturating_add(PROBE_MIN_US),
                    ));
                }
            }
        }
        due
    }
}

/// Doubles `gap_us` within `[min_us, max_us]`; returns when the new gap ends after `now`.
fn double_gap(gap_us: &mut u64, min_us: u64, max_us: u64, now: Time) -> Time {
    *gap_us = gap_us.saturating_mul(2).clamp(min_us, max_us);
    Time::from_micros(now.as_micros().saturating_add(*gap_us))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng as _;

    fn at(ms: u64) -> Time {
        Time::from_micros(ms * 1000)
    }

    const G: u64 = GRACE_MIN_US;

    #[test]
    fn a_replica_that_does_not_answer_is_silent_after_the_grace_until_it_answers() {
        let mut r = Responsiveness::new(4);
        r.expect(2, at(0));
        r.expect(2, at(10)); // the first expectation counts
        assert!(!r.silent(2, at(20), G));
        assert!(r.silent(2, at(21), G));
        assert!(!r.silent(1, at(21), G), "never asked");
        r.answered(2);
        assert!(!r.silent(2, at(100), G));
    }

    #[test]
    fn the_replier_is_drawn_among_the_replicas_counted_on() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut r = Responsiveness::new(4);
        r.expect(1, at(0));
        r.contradicted(3, at(0));
        let drawn: std::collections::BTreeSet<u8> = (0..200)
            .map(|_| r.replier(&mut rng, at(100), G, None))
            .collect();
        assert_eq!(drawn, [0, 2].into());
        // Avoiding one leaves the other.
        assert!((0..50).all(|_| r.replier(&mut rng, at(100), G, Some(0)) == 2));
        // The distrust lapses after its back-off (1 s the first time).
        let later: std::collections::BTreeSet<u8> = (0..200)
            .map(|_| r.replier(&mut rng, at(1_001), G, None))
            .collect();
        assert_eq!(later, [0, 2, 3].into());
        // With none counted on, any replica.
        let mut none = Responsiveness::new(4);
        for i in 0..4 {
            none.expect(i, at(0));
        }
        let any: std::collections::BTreeSet<u8> = (0..200)
            .map(|_| none.replier(&mut rng, at(100), G, None))
            .collect();
        assert_eq!(any, [0, 1, 2, 3].into());
    }

    #[test]
    fn distrust_doubles_up_to_its_cap() {
        let mut r = Responsiveness::new(4);
        r.contradicted(0, at(0));
        assert!(r.distrusted(0, at(999)) && !r.distrusted(0, at(1_000)));
        r.contradicted(0, at(1_000));
        assert!(r.distrusted(0, at(2_999)) && !r.distrusted(0, at(3_000)));
        for _ in 0..20 {
            r.contradicted(0, at(0));
        }
        assert!(!r.distrusted(0, at(60_000)));
    }

    #[test]
    fn reads_leave_out_the_replicas_not_counted_on_first() {
        let mut r = Responsiveness::new(4);
        // Usually the primary (0) is left out; with 2 silent, 2 is instead.
        assert_eq!(r.left_out(0..4, 1, 3, at(0), G), vec![0]);
        r.expect(2, at(0));
        assert_eq!(r.left_out(0..4, 1, 3, at(100), G), vec![2]);
        // Never the replier, and f of them at most.
        assert_eq!(r.left_out(0..4, 1, 2, at(100), G), vec![0]);
        assert_eq!(
            r.left_out((0..7).map(|i| (i + 5) % 7), 2, 6, at(0), G),
            vec![5, 0]
        );
    }

    #[test]
    fn a_silent_replica_is_asked_again_after_doubling_gaps() {
        let mut r = Responsiveness::new(4);
        r.expect(1, at(0));
        let all = [0, 1, 2, 3];
        // Silent from 21 ms: the first gap starts then.
        assert_eq!(r.probes(&all, at(21), G), Vec::<ReplicaId>::new());
        assert_eq!(r.probes(&all, at(120), G), Vec::<ReplicaId>::new());
        assert_eq!(r.probes(&all, at(121), G), vec![1]);
        assert_eq!(r.probes(&all, at(320), G), Vec::<ReplicaId>::new());
        assert_eq!(r.probes(&all, at(321), G), vec![1]);
        // An answer ends it; silence starts over from the next expectation.
        r.answered(1);
        assert_eq!(r.probes(&all, at(10_000), G), Vec::<ReplicaId>::new());
    }
}
