//! What a NEW-VIEW picks at each slot from `2f+1` or more VIEW-CHANGEs (docs/plans/49-fast-path.md
//! "The invariant, and the decision rule"): the rule ByzFS's fast mode will implement, and
//! Zyzzyva's published one, which the model must show unsafe.

use std::collections::BTreeSet;

/// Faults tolerated; the models run `n = 3f + 1 = 4` replicas.
pub const F: usize = 1;
/// Replicas.
pub const N: usize = 3 * F + 1;
/// Digests: two requests, `0` and `1`, and the null batch.
pub const DIGESTS: usize = 3;
/// The null batch's digest.
pub const NULL: Digest = 2;
/// Most slots (sequence numbers) a model has.
pub const SLOTS_MAX: usize = 2;

/// A batch's digest (`0`, `1`, or [`NULL`]).
pub type Digest = u8;
/// A view number.
pub type View = u8;

/// What one VIEW-CHANGE says of one slot.
#[derive(Clone, Copy, Debug, Default, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct SlotReport {
    /// For each digest, the highest view in which the sender accepted a PRE-PREPARE of it at
    /// this slot (PBFT's `Q`; in fast mode, what it answered speculatively).
    pub accepted: [Option<View>; DIGESTS],
    /// The sender's latest prepared certificate at this slot (PBFT's `P`; in fast mode, a
    /// client's commit certificate it logged): view and digest.
    pub prepared: Option<(View, Digest)>,
}

/// One VIEW-CHANGE: a report per slot.
pub type Report = [SlotReport; SLOTS_MAX];

/// What a NEW-VIEW puts at a slot.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub enum Decision {
    /// This batch (the null batch included), accepted by every replica that takes the
    /// NEW-VIEW.
    Pick(Digest),
    /// Nothing: the new primary proposes a new batch there (no VIEW-CHANGE prepared
    /// anything at or above the slot).
    Free,
}

/// A decision rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// ByzFS's (plan 49): the views are walked highest first; at each view `u`, (A) a
    /// certificate of `u` that passes PBFT's A1 and A2 — and if certificates of `u` are
    /// reported but none passes, no decision (the primary waits) unless none of them could
    /// have `f+1` witnesses even with every VIEW-CHANGE missing from the set; else (F) a
    /// digest at least `f+1` VIEW-CHANGEs report accepted at `u` or later; else the next
    /// lower view. Over sets of `2f+1` to `3f+1` VIEW-CHANGEs.
    Walk,
    /// [`Rule::Walk`] as plan 49 first wrote it: a view whose certificates none passes is
    /// walked past like an empty one. Unsafe (the model finds a slow completion lost): kept
    /// as a mutation the model must catch.
    WalkPastCertificates,
    /// Zyzzyva's published view change: the highest certificate of any view first, then the
    /// digest `f+1` report at the highest view (ranking a certificate of a lower view above
    /// the evidence of a fast completion in a higher one).
    Zyzzyva,
}

impl Rule {
    /// The batch the views of `set` (`2f+1` to `3f+1` reports) decide at one slot, for a
    /// NEW-VIEW of view `w`; `None` if no view decides.
    pub fn slot(self, set: &[SlotReport], w: View) -> Option<Digest> {
        match self {
            Rule::Walk => walk(set, w, true),
            Rule::WalkPastCertificates => walk(set, w, false),
            Rule::Zyzzyva => zyzzyva(set, w),
        }
    }
}

/// How many reports of `set` accepted `d` at view `u` or later; a certificate counts as
/// accepted (a replica logs one only for what it accepted; PBFT's A2 counts both).
fn accepted_since(set: &[SlotReport], d: Digest, u: View) -> usize {
    set.iter()
        .filter(|m| {
            m.accepted[usize::from(d)] >= Some(u)
                || m.prepared.is_some_and(|(v, e)| e == d && v >= u)
        })
        .count()
}

/// The first digest, in order, that at least `f+1` reports accepted at `u` or later.
fn f_plus_one_since(set: &[SlotReport], u: View) -> Option<Digest> {
    (0..DIGESTS as Digest).find(|&d| accepted_since(set, d, u) > F)
}

/// [`Rule::Walk`]; `stop_at_certificates` false: [`Rule::WalkPastCertificates`].
fn walk(set: &[SlotReport], w: View, stop_at_certificates: bool) -> Option<Digest> {
    let missing = N.saturating_sub(set.len());
    for u in (0..w).rev() {
        // (A) A certificate of view `u`: `2f+1` reports prepared nothing else at `u` or
        // later (A1), and `f+1` accepted its digest at `u` or later, so it is no liar's (A2).
        // In the order of digests: over more than `2f+1` reports a liar's certificate may
        // pass A1 and A2 beside another of its view, when neither completed (one that did
        // leaves `f+1` correct certificates, which contradict the other), and any fixed
        // order is safe; this one is the core's (`byzfs_bft::replica::walk`).
        let certificates: BTreeSet<Digest> = set
            .iter()
            .filter_map(|m| m.prepared)
            .filter(|&(pu, _)| pu == u)
            .map(|(_, d)| d)
            .collect();
        if !certificates.is_empty() {
            for &d in &certificates {
                let a1 = set
                    .iter()
                    .filter(|m| match m.prepared {
                        None => true,
                        Some((v, e)) => v < u || (v == u && e == d),
                    })
                    .count();
                if a1 > 2 * F && accepted_since(set, d, u) > F {
                    return Some(d);
                }
            }
            // A certificate of `u` no `f+1` vouch for may be a slow completion whose other
            // witnesses are not in the set, so nothing below `u` may be picked; the primary
            // waits for other VIEW-CHANGEs (found by the model: the F step at a lower view
            // picked another batch). Unless even the missing VIEW-CHANGEs could not make
            // `f+1` witnesses of any of them: a slow completion's `f+1` correct witnesses
            // each report its certificate.
            let could_be_slow = certificates
                .iter()
                .any(|&d| accepted_since(set, d, u) + missing > F);
            if stop_at_certificates && could_be_slow {
                return None;
            }
        }
        // (F) Evidence of a fast completion at `u`.
        if let Some(d) = f_plus_one_since(set, u) {
            return Some(d);
        }
    }
    None
}

/// [`Rule::Zyzzyva`].
fn zyzzyva(set: &[SlotReport], w: View) -> Option<Digest> {
    if let Some((_, d)) = set.iter().filter_map(|m| m.prepared).max() {
        return Some(d);
    }
    (0..w).rev().find_map(|u| f_plus_one_since(set, u))
}

/// The NEW-VIEW of view `w` from `set` (`2f+1` to `3f+1` VIEW-CHANGEs) over the first
/// `slots` slots: at each slot what [`Rule::slot`] decides; where no view decides, the null
/// batch if a report prepared something at a higher slot, else [`Decision::Free`]. `None`:
/// fewer than `2f+1` reports prepared nothing at a slot where no view decides, and the
/// primary must wait for other VIEW-CHANGEs (PBFT §3.4).
pub fn new_view(
    rule: Rule,
    set: &[Report],
    w: View,
    slots: usize,
) -> Option<[Decision; SLOTS_MAX]> {
    let prepared_at = |s: usize| set.iter().any(|m| m[s].prepared.is_some());
    let nothing_at = |s: usize| set.iter().filter(|m| m[s].prepared.is_none()).count();
    let mut out = [Decision::Free; SLOTS_MAX];
    for (s, slot_out) in out.iter_mut().enumerate().take(slots) {
        let column: Vec<SlotReport> = set.iter().map(|m| m[s]).collect();
        *slot_out = match rule.slot(&column, w) {
            Some(d) => Decision::Pick(d),
            None if nothing_at(s) <= 2 * F => return None,
            None if (s + 1..slots).any(prepared_at) => Decision::Pick(NULL),
            None => Decision::Free,
        };
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(accepted: [Option<View>; DIGESTS], prepared: Option<(View, Digest)>) -> SlotReport {
        SlotReport { accepted, prepared }
    }

    /// The Revisiting counterexample's last NEW-VIEW (plan 49): a certificate of `0` from
    /// view 0, and `1` accepted in view 1 by the certificate's holder and one more (with the
    /// liar, `f+1`): the walk takes `1`, Zyzzyva's rule the older certificate.
    #[test]
    fn the_walk_takes_a_fast_completion_over_an_older_certificate() {
        let set = [
            report([Some(0), Some(1), None], Some((0, 0))),
            report([None, Some(1), None], None),
            report([None, None, None], None),
        ];
        assert_eq!(
            (Rule::Walk.slot(&set, 2), Rule::Zyzzyva.slot(&set, 2)),
            (Some(1), Some(0))
        );
    }

    /// A certificate no `f+1` vouch for (a liar's) decides nothing under the walk, and the
    /// NEW-VIEW waits; nothing reported anywhere leaves the slot free, and nothing at a
    /// slot below one prepared makes it null.
    #[test]
    fn a_lone_certificate_waits_and_empty_slots_are_free_or_null() {
        let lone = [[report([None; DIGESTS], Some((1, 0))), SlotReport::default()]];
        let set = [
            lone[0],
            [SlotReport::default(); SLOTS_MAX],
            [SlotReport::default(); SLOTS_MAX],
        ];
        assert_eq!(new_view(Rule::Walk, &set, 2, 2), None);
        let empty = [[SlotReport::default(); SLOTS_MAX]; 3];
        assert_eq!(
            new_view(Rule::Walk, &empty, 2, 2),
            Some([Decision::Free, Decision::Free])
        );
        let above = [
            [
                SlotReport::default(),
                report([Some(1), None, None], Some((1, 0))),
            ],
            [SlotReport::default(), report([Some(1), None, None], None)],
            [SlotReport::default(); SLOTS_MAX],
        ];
        assert_eq!(
            new_view(Rule::Walk, &above, 2, 2),
            Some([Decision::Pick(NULL), Decision::Pick(0)])
        );
    }

    /// A certificate only its holder vouches for stops the walk among `2f+1` reports (a
    /// slow completion's other witness may be missing) and is passed among all `3f+1`
    /// (its witnesses would all be there); the three that prepared nothing then make the
    /// slot null or free.
    #[test]
    fn a_lone_certificate_is_passed_once_every_report_is_in() {
        let lone = [
            report([None, Some(1), None], Some((1, 1))),
            SlotReport::default(),
        ];
        let empty = [SlotReport::default(); SLOTS_MAX];
        assert_eq!(new_view(Rule::Walk, &[lone, empty, empty], 2, 1), None);
        assert_eq!(
            new_view(Rule::Walk, &[lone, empty, empty, empty], 2, 1),
            Some([Decision::Free, Decision::Free])
        );
    }
}
