//! S-IMPERSONATE (issue #29): a faulty replica sends PREPAREs, COMMITs, CHECKPOINTs and
//! VIEW-CHANGEs under other replicas' names — copies of its own, with a made-up digest or a
//! higher view half the time — authenticated with its own keys (an authenticator, a MAC or a
//! signature, the kind the message needs) or not at all. None may count (checker
//! `authentic`): forged votes would complete certificates the named replicas never joined,
//! forged CHECKPOINTs make checkpoints stable, forged VIEW-CHANGEs move correct replicas.
//! Its honest traffic still flows.

use super::{Ctx, Dest, Outgoing, Strategy};
use byzfs_bft::message::Message;
use byzfs_bft::wire::AuthKind;
use byzfs_bft::{Digest, ReplicaId};
use rand::Rng;

/// The impersonator.
#[derive(Debug, Default)]
pub struct Impersonator;

impl Impersonator {
    /// A fresh strategy.
    pub fn new() -> Impersonator {
        Impersonator
    }
}

impl Strategy for Impersonator {
    fn name(&self) -> &'static str {
        "impersonator"
    }

    fn on_send(&mut self, ctx: &mut Ctx<'_>, out: Outgoing) -> Vec<Outgoing> {
        let Dest::Replica(to) = out.to else {
            return vec![out];
        };
        let Some((h, msg)) = ctx.forger.open(&out.bytes) else {
            return vec![out];
        };
        let me = ctx.forger.me();
        let n = ctx.config.n() as ReplicaId;
        // Speak for someone other than itself and the receiver (which knows its own votes).
        let others: Vec<ReplicaId> = (0..n).filter(|&j| j != me && j != to).collect();
        if others.is_empty() || !ctx.rng.gen_bool(0.6) {
            return vec![out];
        }
        let j = others[ctx.rng.gen_range(0..others.len())];
        let alter = ctx.rng.gen_bool(0.5);
        let fake = match msg {
            Message::Prepare(mut m) => {
                m.replica = j;
                if alter {
                    m.digest = Digest(ctx.rng.gen());
                }
                Message::Prepare(m)
            }
            Message::Commit(mut m) => {
                m.replica = j;
                if alter {
                    m.digest = Digest(ctx.rng.gen());
                }
                Message::Commit(m)
            }
            Message::Checkpoint(mut m) => {
                m.replica = j;
                if alter {
                    m.digest = Digest(ctx.rng.gen());
                    m.stable = ctx.rng.gen_bool(0.5);
                }
                Message::Checkpoint(m)
            }
            Message::ViewChange(mut m) => {
                m.replica = j;
                if alter {
                    m.view += ctx.rng.gen_range(1..=4);
                }
                Message::ViewChange(m)
            }
            _ => return vec![out],
        };
        let kind = if ctx.rng.gen_bool(0.15) {
            AuthKind::None
        } else {
            h.auth
        };
        let forged = ctx
            .forger
            .impersonate(j, ctx.config.epoch, &fake, kind, out.to);
        let forged = Outgoing::now(out.to, forged);
        if ctx.rng.gen_bool(0.5) {
            vec![forged, out]
        } else {
            vec![out, forged]
        }
    }
}
