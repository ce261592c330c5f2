//! S-LYING-PRIMARY (issue #29, docs/PROTOCOL.md §3.4–§3.6): a faulty replica that equivocates
//! while it leads (as [`super::equivocate::Equivocate`]) and lies consistently in the view
//! changes after:
//! * its VIEW-CHANGEs claim that the batches it showed only to some backups — the variants
//!   of its equivocations, really proposed, so their bodies exist — were prepared, and
//!   pre-prepared, one view below the new one, above every real certificate for the slot.
//!   Only rule A2 (`f+1` VIEW-CHANGEs must report the batch pre-prepared in that view or
//!   later) stands between that claim and a new view that re-proposes the variant at a slot
//!   where the other batch committed;
//! * as a new primary, it sends every backup the same wrong NEW-VIEW (one lie per view): a
//!   pick replaced by the null batch or by one of its variants, the last pick dropped or an
//!   extra null pick added, or a wrong checkpoint (its digest, or one interval off). The
//!   VIEW-CHANGEs inside are the real, signed ones, so only a backup's own recomputation of
//!   the decision can tell.
//!
//! Everything is signed with its own key, the same to every receiver.

use super::equivocate::Equivocate;
use super::{Ctx, Outgoing, Strategy};
use byzfs_bft::batch::null_digest;
use byzfs_bft::message::{Message, NewView, PrePreparedEntry, PreparedEntry, ViewChange};
use byzfs_bft::{Digest, Seq, View};
use rand::Rng;
use std::collections::BTreeMap;

/// The lying primary.
#[derive(Debug, Default)]
pub struct LyingPrimary {
    equivocate: Equivocate,
    /// The NEW-VIEW lie told for each view (the same to everyone).
    new_views: BTreeMap<View, NewView>,
}

impl LyingPrimary {
    /// A fresh strategy.
    pub fn new() -> LyingPrimary {
        LyingPrimary::default()
    }

    /// The variant batches (latest view per slot) in `vc`'s window.
    fn variants(&self, vc: &ViewChange, window: u64) -> BTreeMap<Seq, Digest> {
        let mut out: BTreeMap<Seq, (View, Digest)> = BTreeMap::new();
        for (seq, view, d) in self.equivocate.variants() {
            if seq > vc.last_stable && seq <= vc.last_stable + window && view < vc.view {
                let e = out.entry(seq).or_insert((view, d));
                if view >= e.0 {
                    *e = (view, d);
                }
            }
        }
        out.into_iter().map(|(s, (_, d))| (s, d)).collect()
    }

    fn lie_in_view_change(&self, mut vc: ViewChange, window: u64) -> ViewChange {
        let claimed = vc.view - 1;
        for (seq, digest) in self.variants(&vc, window) {
            vc.prepared.retain(|e| e.seq != seq);
            vc.prepared.push(PreparedEntry {
                seq,
                view: claimed,
                digest,
            });
            vc.pre_prepared
                .retain(|e| e.seq != seq || e.digest != digest);
            vc.pre_prepared.push(PrePreparedEntry {
                seq,
                view: claimed,
                digest,
            });
        }
        vc.prepared.sort();
        vc.pre_prepared.sort_by_key(|e| (e.seq, e.digest));
        vc
    }

    fn lie_in_new_view(&self, ctx: &mut Ctx<'_>, mut nv: NewView) -> NewView {
        let variants: BTreeMap<Seq, Digest> = self
            .equivocate
            .variants()
            .map(|(seq, _, d)| (seq, d))
            .collect();
        let real: Vec<usize> = (0..nv.picks.len())
            .filter(|&i| nv.picks[i] != null_digest())
            .collect();
        match ctx.rng.gen_range(0..10) {
            // Most often a real pick, the last one half the time (the slot most likely
            // committed at some correct replicas and not yet at others).
            0..=6 if !real.is_empty() => {
                let i = if ctx.rng.gen_bool(0.5) {
                    real[real.len() - 1]
                } else {
                    real[ctx.rng.gen_range(0..real.len())]
                };
                let seq = nv.min + 1 + i as u64;
                nv.picks[i] = match variants.get(&seq) {
                    Some(&v) if v != nv.picks[i] && ctx.rng.gen_bool(0.7) => v,
                    _ => null_digest(),
                };
            }
            7 if !nv.picks.is_empty() => {
                nv.picks.pop();
            }
            8 => nv.picks.push(null_digest()),
            // A wrong checkpoint: its digest, or the checkpoint one interval off.
            _ if ctx.rng.gen_bool(0.5) => nv.min_digest = Digest(ctx.rng.gen()),
            _ => {
                let k = ctx.config.checkpoint_interval;
                nv.min = if nv.min >= k && ctx.rng.gen_bool(0.5) {
                    nv.min - k
                } else {
                    nv.min + k
                };
            }
        }
        nv
    }
}

impl Strategy for LyingPrimary {
    fn name(&self) -> &'static str {
        "lying-primary"
    }

    fn on_send(&mut self, ctx: &mut Ctx<'_>, out: Outgoing) -> Vec<Outgoing> {
        let Some((h, msg)) = ctx.forger.open(&out.bytes) else {
            return vec![out];
        };
        let lie = match msg {
            Message::PrePrepare(_) | Message::Commit(_) => {
                return self.equivocate.on_send(ctx, out);
            }
            Message::ViewChange(vc) => {
                Message::ViewChange(self.lie_in_view_change(vc, ctx.config.log_window))
            }
            Message::NewView(nv) => {
                let lie = match self.new_views.get(&nv.view) {
                    Some(l) => l.clone(),
                    None => {
                        let l = self.lie_in_new_view(ctx, nv);
                        self.new_views.insert(l.view, l.clone());
                        l
                    }
                };
                Message::NewView(lie)
            }
            _ => return vec![out],
        };
        vec![Outgoing {
            bytes: ctx.forger.seal(&h, &lie, out.to),
            ..out
        }]
    }
}
