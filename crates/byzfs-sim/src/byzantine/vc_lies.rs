//! S-VC-LIES (docs/PROTOCOL.md §6.4, §3.6): a faulty replica's VIEW-CHANGE omits its prepared
//! entries, claims fake ones, reports a wrong checkpoint digest, or differs per receiver;
//! as new primary, its NEW-VIEW alters a pick, drops a listed VIEW-CHANGE, or names a wrong
//! checkpoint digest, also per receiver. Everything is re-signed with its own key; the
//! VIEW-CHANGEs of others inside a NEW-VIEW cannot be forged, only dropped.

use super::{Ctx, Outgoing, Strategy};
use byzfs_bft::batch::null_digest;
use byzfs_bft::message::{Message, PrePreparedEntry, PreparedEntry};
use byzfs_bft::Digest;
use rand::Rng;

/// The lying view-changer.
#[derive(Debug, Default)]
pub struct VcLies;

impl VcLies {
    /// A fresh strategy.
    pub fn new() -> VcLies {
        VcLies
    }
}

impl Strategy for VcLies {
    fn name(&self) -> &'static str {
        "vc-lies"
    }

    fn on_send(&mut self, ctx: &mut Ctx<'_>, out: Outgoing) -> Vec<Outgoing> {
        let Some((h, msg)) = ctx.forger.open(&out.bytes) else {
            return vec![out];
        };
        let lie = match msg {
            Message::ViewChange(mut vc) => {
                // Different receivers get different lies (or the truth).
                match ctx.rng.gen_range(0..5) {
                    0 => {
                        vc.prepared.clear();
                        vc.pre_prepared.clear();
                    }
                    1 => {
                        let window = ctx.config.log_window;
                        for _ in 0..ctx.rng.gen_range(1..=3) {
                            let seq = vc.last_stable + ctx.rng.gen_range(1..=window);
                            let digest = if ctx.rng.gen_bool(0.5) {
                                Digest(ctx.rng.gen())
                            } else {
                                null_digest()
                            };
                            let view = vc.view.saturating_sub(ctx.rng.gen_range(1..=2));
                            vc.prepared.retain(|e| e.seq != seq);
                            vc.pre_prepared.retain(|e| e.seq != seq);
                            vc.prepared.push(PreparedEntry { seq, view, digest });
                            vc.pre_prepared.push(PrePreparedEntry { seq, view, digest });
                        }
                        vc.prepared.sort();
                        vc.pre_prepared.sort();
                    }
                    2 => {
                        for c in &mut vc.checkpoints {
                            c.1 = Digest(ctx.rng.gen());
                        }
                        if ctx.rng.gen_bool(0.5) {
                            // Claim a stable checkpoint it does not have.
                            vc.last_stable += ctx.config.checkpoint_interval;
                            vc.checkpoints.push((vc.last_stable, Digest(ctx.rng.gen())));
                        }
                    }
                    3 => {
                        for e in &mut vc.prepared {
                            e.view += 1;
                        }
                    }
                    _ => return vec![out],
                }
                Message::ViewChange(vc)
            }
            Message::NewView(mut nv) => {
                match ctx.rng.gen_range(0..4) {
                    0 if !nv.picks.is_empty() => {
                        let i = ctx.rng.gen_range(0..nv.picks.len());
                        nv.picks[i] = if ctx.rng.gen_bool(0.5) {
                            null_digest()
                        } else {
                            Digest(ctx.rng.gen())
                        };
                    }
                    1 if !nv.view_changes.is_empty() => {
                        let i = ctx.rng.gen_range(0..nv.view_changes.len());
                        nv.view_changes.remove(i);
                    }
                    2 => nv.min_digest = Digest(ctx.rng.gen()),
                    _ => return vec![out],
                }
                Message::NewView(nv)
            }
            _ => return vec![out],
        };
        vec![Outgoing {
            bytes: ctx.forger.seal(&h, &lie, out.to),
            ..out
        }]
    }
}
