//! Lying replies (docs/PROTOCOL.md §1.6, §1.12): every REPLY to a client is altered and
//! re-MAC'd validly — a wrong but well-formed result with its matching digest, the right result
//! under a wrong digest, or a flipped tentative flag — so only the client's reply quorum
//! protects it.

use super::{Ctx, Dest, Outgoing, Strategy};
use crate::kv::KvResult;
use byzfs_bft::message::Message;
use byzfs_bft::Digest;
use rand::Rng;

/// The lying replier.
#[derive(Debug, Default)]
pub struct LyingReplies;

impl LyingReplies {
    /// A fresh strategy.
    pub fn new() -> LyingReplies {
        LyingReplies
    }
}

impl Strategy for LyingReplies {
    fn name(&self) -> &'static str {
        "lying-replies"
    }

    fn on_send(&mut self, ctx: &mut Ctx<'_>, out: Outgoing) -> Vec<Outgoing> {
        let Dest::Client(_) = out.to else {
            return vec![out];
        };
        let Some((h, Message::Reply(mut r))) = ctx.forger.open(&out.bytes) else {
            return vec![out];
        };
        match ctx.rng.gen_range(0..4) {
            0 | 1 => {
                let lie = match ctx.rng.gen_range(0..4) {
                    0 => KvResult::Value(Some(b"a lie".to_vec())),
                    1 => KvResult::Value(None),
                    2 => KvResult::Ok,
                    _ => KvResult::Time(ctx.rng.gen()),
                }
                .encode();
                r.result_digest = Digest::of(&lie);
                r.result = Some(lie);
            }
            2 => r.result_digest = Digest(ctx.rng.gen()),
            _ => r.tentative = !r.tentative,
        }
        vec![Outgoing {
            bytes: ctx.forger.seal(&h, &Message::Reply(r), out.to),
            ..out
        }]
    }
}
