//! The new-view decision procedure (PROTOCOL.md §3.4, the MAC-variant counting rules of the
//! BFT library's `NV_info`), as a pure function of the VIEW-CHANGE set `S`. The new primary
//! runs it to build NEW-VIEW; every backup reruns it on the signed VIEW-CHANGEs the NEW-VIEW
//! carries and rejects any difference.
//!
//! * Checkpoint: the largest `h` with (C1) `2f+1` messages whose `last_stable ≤ h` and (C2)
//!   `f+1` messages holding `(h, D)`.
//! * For every `n ∈ (min, max)`: pick `d` prepared at view `v` if (A1) `2f+1` messages with
//!   `last_stable < n` do not contradict it (their prepared entry for `n` has a lower view, or
//!   the same view and digest, or is absent) and (A2) `f+1` messages pre-prepared or prepared
//!   `d` at a view `≥ v` — trying candidates **highest view first** (pitfall §3.6 #1); else the
//!   null batch if `2f+1` messages with `last_stable < n` prepared nothing at `n`; else the
//!   decision must wait for more VIEW-CHANGEs.

use crate::batch::null_digest;
use crate::crypto::Digest;
use crate::ids::{Seq, View};
use crate::message::ViewChange;
use std::collections::BTreeSet;

/// The outcome: the checkpoint `min` and one digest per sequence number in `(min, max)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Chosen checkpoint.
    pub min: Seq,
    /// Its digest.
    pub min_digest: Digest,
    /// Batch digest for `min+1, min+2, …, max-1`.
    pub picks: Vec<Digest>,
}

/// Runs the decision over `vcs` (distinct senders, all for the same view). `log_window` is
/// `L`; `lowest_view_first` is the deliberately broken rule (mutation testing only).
pub fn decide(
    vcs: &[&ViewChange],
    f: usize,
    log_window: u64,
    lowest_view_first: bool,
) -> Option<Decision> {
    let quorum = 2 * f + 1;
    let weak = f + 1;
    // 1. The checkpoint.
    let mut cands: BTreeSet<(Seq, Digest)> = BTreeSet::new();
    for m in vcs {
        cands.extend(m.checkpoints.iter().copied());
    }
    let (min, min_digest) = cands.iter().rev().copied().find(|&(h, d)| {
        let c1 = vcs.iter().filter(|m| m.last_stable <= h).count() >= quorum;
        let c2 = vcs
            .iter()
            .filter(|m| m.checkpoints.contains(&(h, d)))
            .count()
            >= weak;
        c1 && c2
    })?;
    // 2. max: one past the highest sequence number any message references, within (min, min+L].
    let top = vcs
        .iter()
        .flat_map(|m| {
            m.prepared
                .iter()
                .map(|e| e.seq)
                .chain(m.pre_prepared.iter().map(|e| e.seq))
        })
        .filter(|&s| s > min && s <= min + log_window)
        .max()
        .unwrap_or(min);
    // 3. Each sequence number.
    let mut picks = Vec::with_capacity((top - min) as usize);
    for n in min + 1..=top {
        picks.push(decide_seq(vcs, n, quorum, weak, lowest_view_first)?);
    }
    Some(Decision {
        min,
        min_digest,
        picks,
    })
}

fn prepared_at(m: &ViewChange, n: Seq) -> Option<(View, Digest)> {
    m.prepared
        .iter()
        .find(|e| e.seq == n)
        .map(|e| (e.view, e.digest))
}

fn decide_seq(
    vcs: &[&ViewChange],
    n: Seq,
    quorum: usize,
    weak: usize,
    lowest_first: bool,
) -> Option<Digest> {
    let mut cands: Vec<(View, Digest)> = vcs.iter().filter_map(|m| prepared_at(m, n)).collect();
    cands.sort();
    cands.dedup();
    if !lowest_first {
        cands.reverse();
    }
    for (v, d) in cands {
        let a1 = vcs
            .iter()
            .filter(|m| m.last_stable < n)
            .filter(|m| match prepared_at(m, n) {
                None => true,
                Some((pv, pd)) => pv < v || (pv == v && pd == d),
            })
            .count();
        let a2 = vcs
            .iter()
            .filter(|m| {
                m.pre_prepared
                    .iter()
                    .any(|e| e.seq == n && e.digest == d && e.view >= v)
                    || m.prepared
                        .iter()
                        .any(|e| e.seq == n && e.digest == d && e.view >= v)
            })
            .count();
        if a1 >= quorum && a2 >= weak {
            return Some(d);
        }
    }
    let nothing = vcs
        .iter()
        .filter(|m| m.last_stable < n && prepared_at(m, n).is_none())
        .count();
    (nothing >= quorum).then(null_digest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{PrePreparedEntry, PreparedEntry};

    fn d(x: u8) -> Digest {
        Digest([x; 32])
    }

    fn vc(r: u32, h: Seq, prepared: &[(Seq, View, u8)], pp: &[(Seq, View, u8)]) -> ViewChange {
        ViewChange {
            view: 5,
            replica: r,
            last_stable: h,
            checkpoints: vec![(h, d(100 + h as u8))],
            prepared: prepared
                .iter()
                .map(|&(seq, view, x)| PreparedEntry {
                    seq,
                    view,
                    digest: d(x),
                })
                .collect(),
            pre_prepared: pp
                .iter()
                .map(|&(seq, view, x)| PrePreparedEntry {
                    seq,
                    view,
                    digest: d(x),
                })
                .collect(),
        }
    }

    #[test]
    fn empty_logs_choose_checkpoint_and_nothing() {
        let (a, b, c) = (vc(0, 0, &[], &[]), vc(1, 0, &[], &[]), vc(2, 0, &[], &[]));
        let dec = decide(&[&a, &b, &c], 1, 256, false).unwrap();
        assert_eq!(
            dec,
            Decision {
                min: 0,
                min_digest: d(100),
                picks: vec![]
            }
        );
    }

    #[test]
    fn prepared_request_is_carried_and_gap_is_null() {
        // Seq 2 prepared at view 1 by two replicas; seq 1 prepared nowhere.
        let a = vc(0, 0, &[(2, 1, 7)], &[(2, 1, 7)]);
        let b = vc(1, 0, &[(2, 1, 7)], &[(2, 1, 7)]);
        let c = vc(2, 0, &[], &[]);
        let dec = decide(&[&a, &b, &c], 1, 256, false).unwrap();
        assert_eq!(dec.picks, vec![null_digest(), d(7)]);
    }

    #[test]
    fn highest_view_wins_and_mutation_picks_lowest() {
        // d(7) prepared at view 1 (one replica), d(8) at view 3 (another, with proofs at 3).
        let a = vc(0, 0, &[(1, 1, 7)], &[(1, 1, 7)]);
        let b = vc(1, 0, &[(1, 3, 8)], &[(1, 3, 8)]);
        let c = vc(2, 0, &[], &[(1, 3, 8)]);
        let e = vc(3, 0, &[], &[(1, 1, 7)]);
        let good = decide(&[&a, &b, &c, &e], 1, 256, false).unwrap();
        assert_eq!(good.picks, vec![d(8)]);
        let bad = decide(&[&a, &b, &c, &e], 1, 256, true).unwrap();
        assert_eq!(
            bad.picks,
            vec![d(7)],
            "the mutation must change the outcome"
        );
    }

    #[test]
    fn single_liar_cannot_force_a_request() {
        // One replica claims a prepared entry nobody else saw: A2 fails, B fails with 3
        // messages (only 2 report nothing): undecided until a fourth VIEW-CHANGE arrives.
        let liar = vc(0, 0, &[(1, 2, 9)], &[(1, 2, 9)]);
        let b = vc(1, 0, &[], &[]);
        let c = vc(2, 0, &[], &[]);
        assert!(decide(&[&liar, &b, &c], 1, 256, false).is_none());
        let e = vc(3, 0, &[], &[]);
        assert_eq!(
            decide(&[&liar, &b, &c, &e], 1, 256, false).unwrap().picks,
            vec![null_digest()]
        );
    }

    #[test]
    fn checkpoint_needs_weak_proof_and_quorum_le() {
        // One replica (a liar) claims checkpoint 128: C2 fails, so min stays 0.
        let mut liar = vc(0, 0, &[], &[]);
        liar.checkpoints.push((128, d(1)));
        let b = vc(1, 0, &[], &[]);
        let c = vc(2, 0, &[], &[]);
        assert_eq!(decide(&[&liar, &b, &c], 1, 256, false).unwrap().min, 0);
        // Two replicas at stable 128 and one at 0: C1 holds for 128 (all ≤ 128), C2 holds.
        let x = vc(0, 128, &[], &[]);
        let y = vc(1, 128, &[], &[]);
        let mut z = vc(2, 0, &[], &[]);
        z.checkpoints.push((128, d(100 + 128)));
        let dec = decide(&[&x, &y, &z], 1, 256, false).unwrap();
        assert_eq!((dec.min, dec.min_digest), (128, d(228)));
    }
}
