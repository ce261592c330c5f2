//! The fast path's NEW-VIEW decision at one sequence number (docs/PROTOCOL.md §4.7; plan
//! `docs/plans/49-fast-path.md` "The invariant, and the decision rule"), model-checked by
//! `crates/byzfs-model` (its `Rule::Walk`; the test `core_rule.rs` there runs this function
//! against it).
//!
//! A fast completion leaves no prepared certificate, only `2f+1` correct replicas that
//! accepted its PRE-PREPARE; so PBFT's rule, which looks at certificates first, could lose
//! it to an older certificate (Zyzzyva's view change did: §4.6). The walk goes down the
//! views in which any VIEW-CHANGE of the set reports anything at the slot, highest first:
//!
//! * **(A)** a certificate of view `u` that passes A1 (`2f+1` do not contradict it) and A2
//!   (`f+1` accepted its digest at `u` or later) is taken; certificates of `u` of which
//!   none passes stop the walk — nothing is decided and the primary waits for more
//!   VIEW-CHANGEs (a slow completion's other witnesses may be outside the set) — unless
//!   none of them could have `f+1` witnesses even with every VIEW-CHANGE missing from the
//!   set (a slow completion's `f+1` correct witnesses each report its certificate, which
//!   is durable before their COMMIT leaves);
//! * **(F)** else a digest `f+1` accepted at `u` or later is taken (what a fast completion
//!   at `u` leaves in any `2f+1` VIEW-CHANGEs);
//! * else the next lower view.
//!
//! No view decides: the null batch if `2f+1` prepared nothing there, else nothing (wait).
//! Over any set of `2f+1` to `3f+1` VIEW-CHANGEs, as the model checks: the new primary
//! decides over all it holds, as for PBFT's rule. With every correct replica's VIEW-CHANGE
//! in, a set decides: a certificate of a correct replica has `f+1` correct witnesses there
//! (A2), none of them prepared anything else in its view (A1), and with all `3f+1` in, a
//! certificate without `f+1` witnesses is walked past (PBFT's null rule then applies where
//! a replica's lost votes left a lone certificate: simulator `partition-power-cuts` 1580).

use crate::batch::null_digest;
use crate::crypto::Digest;
use crate::ids::{Seq, View};
use crate::message::ViewChange;
use std::collections::BTreeSet;

/// Deliberately broken versions of the walk (mutation testing only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BrokenWalk {
    /// Certificates of a view that none passes are walked past like an empty view (the
    /// rule as plan 49 first wrote it; the model found it unsafe).
    pub past_certificates: bool,
    /// Zyzzyva's published rule: the highest certificate of any view first, unchecked,
    /// then the digest `f+1` accepted at the highest view.
    pub zyzzyva: bool,
}

/// The digest at `n` by the walk over `vcs` (`f` faults, `3f+1` replicas), or `None` if
/// the primary must wait for more VIEW-CHANGEs.
pub fn walk_seq(vcs: &[&ViewChange], n: Seq, f: usize, broken: BrokenWalk) -> Option<Digest> {
    let quorum = 2 * f + 1;
    let missing = (3 * f + 1).saturating_sub(vcs.len());
    let prepared_at = |m: &ViewChange| {
        m.prepared
            .iter()
            .find(|e| e.seq == n)
            .map(|e| (e.view, e.digest))
    };
    // How many accepted `d` at `n` at view `u` or later (a prepared entry counts: a
    // replica prepares only what it accepted).
    let accepted_since = |d: Digest, u: View| {
        vcs.iter()
            .filter(|m| {
                m.pre_prepared
                    .iter()
                    .any(|e| e.seq == n && e.digest == d && e.view >= u)
                    || m.prepared
                        .iter()
                        .any(|e| e.seq == n && e.digest == d && e.view >= u)
            })
            .count()
    };
    let digests: BTreeSet<Digest> = vcs
        .iter()
        .flat_map(|m| {
            let pre = m
                .pre_prepared
                .iter()
                .filter(|e| e.seq == n)
                .map(|e| e.digest);
            let prep = m.prepared.iter().filter(|e| e.seq == n).map(|e| e.digest);
            pre.chain(prep)
        })
        .collect();
    // (F) at `u`: the first digest, in order, `f+1` accepted at `u` or later.
    let fast_at = |u: View| digests.iter().copied().find(|&d| accepted_since(d, u) > f);
    let views: BTreeSet<View> = vcs
        .iter()
        .flat_map(|m| {
            let pre = m.pre_prepared.iter().filter(|e| e.seq == n).map(|e| e.view);
            let prep = m.prepared.iter().filter(|e| e.seq == n).map(|e| e.view);
            pre.chain(prep)
        })
        .collect();
    // No view decides: the null batch if `2f+1` prepared nothing at `n`.
    let null = || {
        let nothing = vcs
            .iter()
            .filter(|m| m.last_stable < n && prepared_at(m).is_none())
            .count();
        (nothing >= quorum).then(null_digest)
    };
    if broken.zyzzyva {
        if let Some((_, d)) = vcs.iter().filter_map(|m| prepared_at(m)).max() {
            return Some(d);
        }
        return views.iter().rev().find_map(|&u| fast_at(u)).or_else(null);
    }
    for &u in views.iter().rev() {
        // (A) Certificates of view `u`.
        let certificates: BTreeSet<Digest> = vcs
            .iter()
            .filter_map(|m| prepared_at(m))
            .filter(|&(pu, _)| pu == u)
            .map(|(_, d)| d)
            .collect();
        if !certificates.is_empty() {
            for &d in &certificates {
                let a1 = vcs
                    .iter()
                    .filter(|m| m.last_stable < n)
                    .filter(|m| match prepared_at(m) {
                        None => true,
                        Some((pv, pd)) => pv < u || (pv == u && pd == d),
                    })
                    .count();
                if a1 >= quorum && accepted_since(d, u) > f {
                    return Some(d);
                }
            }
            let could_be_slow = certificates
                .iter()
                .any(|&d| accepted_since(d, u) + missing > f);
            if could_be_slow && !broken.past_certificates {
                return None;
            }
        }
        // (F) What a fast completion at `u` leaves.
        if let Some(d) = fast_at(u) {
            return Some(d);
        }
    }
    null()
}
