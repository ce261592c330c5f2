//! S-VC-SPAM (issue #29, Aardvark §5.3): a faulty replica keeps sending every other replica
//! correctly signed VIEW-CHANGEs for ever higher views — far beyond the current one, and now
//! and then exactly the next — every 5–50 ms, piggybacked on whatever it sends anyway. Its
//! own view changes are sent too, though its newer claims make receivers discard them.
//! Alone it must move no one (the `f+1` join rule; checker `view-jump`), and the cluster
//! must keep working under it (liveness phase). As primary it can still end its own view,
//! as any faulty primary can by falling silent.

use super::{Ctx, Dest, Outgoing, Strategy};
use byzfs_bft::message::{Message, ViewChange};
use byzfs_bft::{ReplicaId, Time, View};
use rand::Rng;
use std::collections::BTreeMap;

/// The view-change spammer.
#[derive(Debug, Default)]
pub struct VcSpam {
    /// Its latest honest VIEW-CHANGE, whose contents the spam reuses.
    template: Option<ViewChange>,
    /// The highest view claimed so far.
    top: View,
    /// When each replica gets its next claim.
    next: BTreeMap<ReplicaId, Time>,
}

impl VcSpam {
    /// A fresh strategy.
    pub fn new() -> VcSpam {
        VcSpam::default()
    }

    fn claim(&mut self, ctx: &mut Ctx<'_>, me: ReplicaId) -> ViewChange {
        let view = if ctx.rng.gen_bool(0.2) {
            ctx.view + 1
        } else {
            self.top = self.top.max(ctx.view) + ctx.rng.gen_range(2..=16);
            self.top
        };
        let mut vc = self.template.clone().unwrap_or(ViewChange {
            view,
            replica: me,
            last_stable: 0,
            checkpoints: Vec::new(),
            prepared: Vec::new(),
            pre_prepared: Vec::new(),
        });
        vc.view = view;
        vc
    }
}

impl Strategy for VcSpam {
    fn name(&self) -> &'static str {
        "vc-spam"
    }

    fn on_send(&mut self, ctx: &mut Ctx<'_>, out: Outgoing) -> Vec<Outgoing> {
        if let Some((_, Message::ViewChange(vc))) = ctx.forger.open(&out.bytes) {
            self.template = Some(vc);
        }
        let Dest::Replica(to) = out.to else {
            return vec![out];
        };
        if self.next.get(&to).is_some_and(|&t| t > ctx.now) {
            return vec![out];
        }
        let gap = ctx.rng.gen_range(5_000..=50_000);
        self.next.insert(to, Time(ctx.now.as_micros() + gap));
        let vc = self.claim(ctx, ctx.forger.me());
        let spam = ctx.forger.sign(ctx.config.epoch, &Message::ViewChange(vc));
        vec![out, Outgoing::now(Dest::Replica(to), spam)]
    }
}
