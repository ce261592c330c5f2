//! NEW-VIEW (docs/PROTOCOL.md §3.4): the decision procedure (the MAC-variant counting rules of the
//! BFT library's `NV_info`), as a pure function [`decide`] of the VIEW-CHANGE set `S`, and
//! around it the replica's construction, checking and install of NEW-VIEW. The new primary
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
//! * With [`ViewChangeRule::Walk`] (the fast path's, §4.7: `walk.rs`) each sequence number
//!   is decided by the walk down the views instead, over the same set.

use super::slot::Accepted;
use super::timers::TimerKind;
use super::view_change::StoredVc;
use super::walk::{walk_seq, BrokenWalk};
use super::{AuthChoice, Replica, M};
use crate::action::{DropReason, Event, PersistRecord, StableVia};
use crate::batch::null_digest;
use crate::config::ViewChangeRule;
use crate::crypto::Digest;
use crate::ids::{ClientId, Principal, ReplicaId, RequestId, Seq, View};
use crate::message::{Message, NewView, Tag, ViewChange};
use crate::service::Service;
use crate::wire::{AuthKind, Frame};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

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

/// Deliberately broken rules of the decision (mutation testing only; all off by default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Broken {
    /// Prepared entries with the lowest view first, without rule A1.
    pub lowest_view_first: bool,
    /// Rule A2 satisfied by one VIEW-CHANGE instead of `f+1`.
    pub a2_one: bool,
    /// The walk's broken versions ([`ViewChangeRule::Walk`]).
    pub walk: BrokenWalk,
}

/// Runs the decision over `vcs` (distinct senders, all for the same view). `log_window` is
/// `L`; `broken` switches deliberately broken rules on (mutation testing only).
pub fn decide(
    vcs: &[&ViewChange],
    f: usize,
    log_window: u64,
    broken: Broken,
    rule: ViewChangeRule,
) -> Option<Decision> {
    let quorum = 2 * f + 1;
    let weak = f + 1;
    let a2_weak = if broken.a2_one { 1 } else { weak };
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
        picks.push(match rule {
            ViewChangeRule::Pbft => decide_seq(vcs, n, quorum, a2_weak, broken.lowest_view_first)?,
            ViewChangeRule::Walk => walk_seq(vcs, n, f, broken.walk)?,
        });
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
        // A1 makes the candidate order irrelevant for safety (a lower-view candidate passes
        // A1 only if at most f messages report a higher view, so nothing of a higher view can
        // have committed); the broken rule therefore drops A1 too: it is the "first/lowest
        // certificate wins" merge of pitfall §3.6 #1.
        if (a1 >= quorum || lowest_first) && a2 >= weak {
            return Some(d);
        }
    }
    let nothing = vcs
        .iter()
        .filter(|m| m.last_stable < n && prepared_at(m, n).is_none())
        .count();
    (nothing >= quorum).then(null_digest)
}

/// NEW-VIEW construction (the new primary), checking (every backup) and install (§3.4),
/// around [`decide`].
impl<S: Service> Replica<S> {
    fn view_change_set(&self) -> Vec<&StoredVc> {
        self.vc
            .latest
            .values()
            .filter(|s| s.vc.view == self.view.current)
            .collect()
    }

    /// The new primary decides once the VIEW-CHANGEs it holds settle every sequence number.
    pub(super) fn try_new_view(&mut self) {
        let set = self.view_change_set();
        if set.len() < self.config.quorum() {
            return;
        }
        let vcs: Vec<&ViewChange> = set.iter().map(|s| &s.vc).collect();
        let rule = self.config.view_change_rule;
        let Some(dec) = decide(
            &vcs,
            self.f(),
            self.config.log_window,
            self.broken_rules(),
            rule,
        ) else {
            return;
        };
        let frames: Vec<Vec<u8>> = set.iter().map(|s| s.frame.to_vec()).collect();
        let v = self.view.current;
        for (i, d) in dec.picks.iter().enumerate() {
            self.persist(PersistRecord::Prepared {
                view: v,
                seq: dec.min + 1 + i as u64,
                digest: *d,
            });
        }
        let nv = NewView {
            view: v,
            view_changes: frames,
            min: dec.min,
            min_digest: dec.min_digest,
            picks: dec.picks.clone(),
        };
        let frame = self.encode(&Message::NewView(nv), AuthChoice::Signature);
        self.out.push_back(crate::action::Action::Broadcast {
            bytes: frame.clone(),
        });
        self.vc.new_view_frame = Some(frame);
        self.process_new_view(dec);
    }

    /// A signed NEW-VIEW: verify every embedded VIEW-CHANGE and recompute the decision.
    pub(super) fn on_new_view(&mut self, frame: &Frame<'_>, nv: NewView, bytes: &[u8]) {
        let Principal::Replica(j) = frame.header.sender else {
            return self.drop_input(DropReason::Invalid);
        };
        if j != self.config.primary(nv.view) || frame.header.auth != AuthKind::Signature {
            return self.drop_input(DropReason::Invalid);
        }
        if nv.view < self.view.current
            || (nv.view == self.view.current && self.view.has_new_view)
            || nv.view == 0
        {
            return self.drop_input(DropReason::Stale);
        }
        let Some(dec) = self.verify_new_view(&nv) else {
            return self.drop_input(DropReason::Invalid);
        };
        if let Some(seq) = self.new_view_contradicts_promises(nv.view, &dec) {
            // We accepted a different batch at `seq` in this view before a restart, from
            // another NEW-VIEW or PRE-PREPARE of its primary: the primary equivocated.
            // (Simulator: twin-power-cuts 821, 2715; without this, a correct replica
            // prepared two batches at one sequence number in one view.)
            tracing::warn!(
                replica = self.me,
                view = nv.view,
                seq,
                "NEW-VIEW refused: it contradicts a batch accepted in its view before a restart"
            );
            return self.drop_input(DropReason::Invalid);
        }
        if nv.view > self.view.current {
            self.start_view_change(nv.view);
            if self.view.has_new_view || self.view.current != nv.view {
                return;
            }
        }
        self.vc.new_view_frame = Some(Arc::from(bytes));
        self.process_new_view(dec);
    }

    /// The first sequence number at which `dec`, a NEW-VIEW's decision for view `v`,
    /// picks a batch other than one this replica already pre-prepared or prepared in `v`.
    /// A replica installs one NEW-VIEW per view, but the NEW-VIEW is volatile: one restarted
    /// in `v` holds only its durable votes of `v` (the Q-information), and a primary that
    /// sends two NEW-VIEWs for `v` must not get it to vote for two batches at one slot.
    pub(super) fn new_view_contradicts_promises(&self, v: View, dec: &Decision) -> Option<Seq> {
        dec.picks
            .iter()
            .enumerate()
            .map(|(i, &d)| (dec.min + 1 + i as u64, d))
            .filter(|&(seq, _)| seq > self.log.last_stable)
            .find(|&(seq, d)| {
                self.log
                    .slots
                    .get(&seq)
                    .is_some_and(|slot| slot.conflicts_in_view(d, v))
            })
            .map(|(seq, _)| seq)
    }

    fn verify_new_view(&self, nv: &NewView) -> Option<Decision> {
        let rule = self.config.view_change_rule;
        if nv.view_changes.len() < self.config.quorum() || nv.view_changes.len() > self.n() {
            return None;
        }
        let mut vcs: BTreeMap<ReplicaId, ViewChange> = BTreeMap::new();
        for fb in &nv.view_changes {
            let f = Frame::parse(fb, self.config.message_bytes_max).ok()?;
            let Principal::Replica(r) = f.header.sender else {
                return None;
            };
            if f.header.tag != Tag::ViewChange
                || f.header.epoch != self.config.epoch
                || r as usize >= self.n()
                || !f.verify_signature(&self.keys.replica_public[r as usize])
            {
                return None;
            }
            let Ok(Message::ViewChange(vc)) = f.decode() else {
                return None;
            };
            if vc.replica != r || vc.view != nv.view || !self.view_change_well_formed(&vc) {
                return None;
            }
            if vcs.insert(r, vc).is_some() {
                return None;
            }
        }
        let refs: Vec<&ViewChange> = vcs.values().collect();
        if self.mutated(M::TrustNewView) {
            return Some(Decision {
                min: nv.min,
                min_digest: nv.min_digest,
                picks: nv.picks.clone(),
            });
        }
        let dec = decide(
            &refs,
            self.f(),
            self.config.log_window,
            self.broken_rules(),
            rule,
        )?;
        (dec.min == nv.min && dec.min_digest == nv.min_digest && dec.picks == nv.picks)
            .then_some(dec)
    }

    /// The decision's broken rules this replica runs with (none outside mutation testing).
    fn broken_rules(&self) -> Broken {
        Broken {
            lowest_view_first: self.mutated(M::NewViewLowestView),
            a2_one: self.mutated(M::NewViewA2One),
            // `byzfs-model`'s `core_rule.rs` checks these against the model's unsafe rules.
            walk: BrokenWalk {
                past_certificates: self.mutated(M::WalkPastCertificates),
                zyzzyva: self.mutated(M::ZyzzyvaHighestCertificate),
            },
        }
    }

    /// `process_new_view` (§3.4): leave limbo, install the chosen checkpoint (fetching state if
    /// behind), re-propose the picked batches, and resume.
    fn process_new_view(&mut self, dec: Decision) {
        let v = self.view.current;
        self.view.has_new_view = true;
        self.timers.stop(TimerKind::ViewChange);
        self.monitor_view_start();
        let max = dec.min + dec.picks.len() as u64 + 1;
        self.view.low_bound = dec.min;
        self.log.seqno = max - 1;
        self.read_only.raise_floor(max - 1);
        self.monitor_carried_over(max - 1);
        if dec.min > self.log.last_stable
            && self.checkpoints.own.get(&dec.min) == Some(&dec.min_digest)
        {
            self.mark_stable(dec.min, StableVia::NewView);
        }
        if dec.min > self.log.last_stable
            && self.certified_checkpoint().is_none_or(|(s, _)| s < dec.min)
        {
            // Before this view's PREPAREs: see `PersistRecord::Certified`.
            self.persist(PersistRecord::Certified {
                seq: dec.min,
                digest: dec.min_digest,
            });
        }
        if self.log.last_executed < dec.min
            || self
                .checkpoints
                .own
                .get(&dec.min)
                .is_some_and(|d| *d != dec.min_digest)
        {
            self.start_fetch(dec.min, dec.min_digest);
        }
        let null = null_digest();
        self.log.batches.entry(null).or_default();
        for (i, &d) in dec.picks.iter().enumerate() {
            let seq = dec.min + 1 + i as u64;
            if seq <= self.log.last_stable {
                continue;
            }
            if let Some(b) = self.log.batches.get(&d).cloned() {
                self.note_batch_at(Some(seq), d, (*b).clone());
                if seq > self.log.last_executed {
                    self.time_carried(&b);
                }
            } else {
                self.log.missing_batches.insert(d);
            }
            let slot = self.log.slots.entry(seq).or_default();
            slot.pre_prepare = Some(Accepted {
                digest: d,
                frame: None,
            });
            slot.note_pre_prepared(d, v);
            self.maybe_send_prepare(seq);
        }
        self.stats.views_installed += 1;
        tracing::debug!(
            replica = self.me,
            view = v,
            min = dec.min,
            "new view installed"
        );
        self.event(Event::ViewInstalled {
            view: v,
            min: dec.min,
        });
        if self.is_primary() {
            // Re-queue every request we hold that is neither executed nor carried over.
            let mut reqs: Vec<(ClientId, RequestId, Digest)> = self
                .requests
                .store
                .values()
                .map(|r| (r.client, r.rid, r.digest))
                .collect();
            reqs.sort();
            for (c, rid, d) in reqs {
                let done = self.cached_rid(c).is_some_and(|(r, _)| r >= rid);
                if !done && !self.requests.proposed.contains(&d) && self.signature_checked(d) {
                    self.requests.queue.push_back(d);
                }
            }
            self.try_send_pre_prepare();
        }
        self.restart_vtimer();
        self.drain_read_only();
        self.execute_committed();
    }
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
        let dec = decide(
            &[&a, &b, &c],
            1,
            256,
            Broken::default(),
            ViewChangeRule::Pbft,
        )
        .unwrap();
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
        let dec = decide(
            &[&a, &b, &c],
            1,
            256,
            Broken::default(),
            ViewChangeRule::Pbft,
        )
        .unwrap();
        assert_eq!(dec.picks, vec![null_digest(), d(7)]);
    }

    #[test]
    fn highest_view_wins_and_mutation_picks_lowest() {
        // d(7) prepared at view 1 (one replica), d(8) at view 3 (another, with proofs at 3).
        let a = vc(0, 0, &[(1, 1, 7)], &[(1, 1, 7)]);
        let b = vc(1, 0, &[(1, 3, 8)], &[(1, 3, 8)]);
        let c = vc(2, 0, &[], &[(1, 3, 8)]);
        let e = vc(3, 0, &[], &[(1, 1, 7)]);
        let good = decide(
            &[&a, &b, &c, &e],
            1,
            256,
            Broken::default(),
            ViewChangeRule::Pbft,
        )
        .unwrap();
        assert_eq!(good.picks, vec![d(8)]);
        let bad = decide(
            &[&a, &b, &c, &e],
            1,
            256,
            Broken {
                lowest_view_first: true,
                ..Broken::default()
            },
            ViewChangeRule::Pbft,
        )
        .unwrap();
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
        assert!(decide(
            &[&liar, &b, &c],
            1,
            256,
            Broken::default(),
            ViewChangeRule::Pbft
        )
        .is_none());
        let e = vc(3, 0, &[], &[]);
        assert_eq!(
            decide(
                &[&liar, &b, &c, &e],
                1,
                256,
                Broken::default(),
                ViewChangeRule::Pbft
            )
            .unwrap()
            .picks,
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
        assert_eq!(
            decide(
                &[&liar, &b, &c],
                1,
                256,
                Broken::default(),
                ViewChangeRule::Pbft
            )
            .unwrap()
            .min,
            0
        );
        // Two replicas at stable 128 and one at 0: C1 holds for 128 (all ≤ 128), C2 holds.
        let x = vc(0, 128, &[], &[]);
        let y = vc(1, 128, &[], &[]);
        let mut z = vc(2, 0, &[], &[]);
        z.checkpoints.push((128, d(100 + 128)));
        let dec = decide(
            &[&x, &y, &z],
            1,
            256,
            Broken::default(),
            ViewChangeRule::Pbft,
        )
        .unwrap();
        assert_eq!((dec.min, dec.min_digest), (128, d(228)));
    }

    /// The Revisiting counterexample's last set (plan 49): `7` certified in view 0 and held
    /// by one replica; `8` accepted in view 1 by it and one more (a fast completion leaves
    /// that in any `2f+1`). The walk takes `8`; PBFT's rule waits (the certificate fails
    /// A2 and one replica prepared something); Zyzzyva's takes the older certificate.
    #[test]
    fn the_walk_keeps_a_fast_completion_over_an_older_certificate() {
        let a = vc(0, 0, &[(1, 0, 7)], &[(1, 0, 7), (1, 1, 8)]);
        let b = vc(1, 0, &[], &[(1, 1, 8)]);
        let c = vc(2, 0, &[], &[]);
        let picks =
            |broken: Broken, rule| decide(&[&a, &b, &c], 1, 256, broken, rule).map(|d| d.picks);
        assert_eq!(
            picks(Broken::default(), ViewChangeRule::Walk),
            Some(vec![d(8)])
        );
        assert_eq!(picks(Broken::default(), ViewChangeRule::Pbft), None);
        let zyzzyva = Broken {
            walk: BrokenWalk {
                zyzzyva: true,
                ..BrokenWalk::default()
            },
            ..Broken::default()
        };
        assert_eq!(picks(zyzzyva, ViewChangeRule::Walk), Some(vec![d(7)]));
    }

    /// A certificate no `f+1` vouch for stops the walk: it may be a slow completion whose
    /// other witnesses are outside the set, so the `f+1` reports of another batch at a lower
    /// view decide nothing (the flaw the model found in the rule as first written).
    #[test]
    fn an_unvouched_certificate_stops_the_walk() {
        let a = vc(0, 0, &[], &[(1, 0, 7)]);
        let b = vc(1, 0, &[(1, 1, 8)], &[(1, 1, 8)]);
        let c = vc(2, 0, &[], &[(1, 0, 7)]);
        let walk = |past_certificates| {
            let broken = Broken {
                walk: BrokenWalk {
                    past_certificates,
                    ..BrokenWalk::default()
                },
                ..Broken::default()
            };
            decide(&[&a, &b, &c], 1, 256, broken, ViewChangeRule::Walk).map(|d| d.picks)
        };
        assert_eq!(walk(false), None);
        assert_eq!(walk(true), Some(vec![d(7)]), "walked past it");
    }

    /// A certificate only its holder reports (the others' votes lost in power cuts, or
    /// never cast): among `2f+1` VIEW-CHANGEs it may be a slow completion whose other
    /// witness is missing, and the walk waits; with all `3f+1` in, it cannot be one, and
    /// the walk passes it (PBFT's null batch then fills the slot). Simulator
    /// `partition-power-cuts` 1580 waited for ever before.
    #[test]
    fn with_every_view_change_in_a_lone_certificate_is_walked_past() {
        let lone = vc(0, 0, &[(1, 2, 7)], &[(1, 2, 7)]);
        let (b, c, e) = (vc(1, 0, &[], &[]), vc(2, 0, &[], &[]), vc(3, 0, &[], &[]));
        let walk = |set: &[&ViewChange]| {
            decide(set, 1, 256, Broken::default(), ViewChangeRule::Walk).map(|d| d.picks)
        };
        assert_eq!(walk(&[&lone, &b, &c]), None);
        assert_eq!(walk(&[&lone, &b, &c, &e]), Some(vec![null_digest()]));
    }
}
