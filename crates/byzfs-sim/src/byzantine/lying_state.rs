//! S-LYING-STATE (issue #29, docs/PROTOCOL.md §2.4): a faulty replica that claims each checkpoint
//! it takes is stable with a made-up digest, and serves a shadow state consistent with that
//! lie to anyone who fetches it: the checkpoint's real partition digests with one partition
//! replaced, and that partition's content with one byte of one value changed (the same
//! length, so every chunk lines up with the one its honest code sends). Only the `f+1` rule
//! before trusting a stable claim, and the check of a replier's partition digests against
//! the agreed checkpoint digest, keep the shadow out of a correct replica (checker
//! `checkpoints`: a transferred state differs from the agreed one).

use super::{Ctx, Outgoing, Strategy};
use byzfs_bft::message::Message;
use byzfs_bft::service::root_digest;
use byzfs_bft::state::{leaf_hash, partition_digest, Sum};
use byzfs_bft::{Digest, Seq};
use std::collections::BTreeMap;

/// A checkpoint's shadow: what the liar claims and serves instead.
#[derive(Clone, Debug)]
struct Shadow {
    root: Digest,
    parts: Vec<Digest>,
    part: u32,
    data: Vec<u8>,
}

/// The lying state server.
#[derive(Debug, Default)]
pub struct LyingState {
    /// Shadows by checkpoint; `None` where no partition had a value to change.
    shadows: BTreeMap<Seq, Option<Shadow>>,
}

const SHADOWS_MAX: usize = 64;

impl LyingState {
    /// A fresh strategy.
    pub fn new() -> LyingState {
        LyingState::default()
    }

    /// The shadow of held checkpoint `seq`, built on first use.
    fn shadow(&mut self, ctx: &Ctx<'_>, seq: Seq) -> Option<&Shadow> {
        if !self.shadows.contains_key(&seq) {
            let built = ctx.replica.and_then(|r| build(r, seq));
            if built.is_none()
                && ctx
                    .replica
                    .and_then(|r| r.checkpoint_digests(seq))
                    .is_none()
            {
                // Not held (yet): try again later.
                return None;
            }
            if self.shadows.len() >= SHADOWS_MAX {
                self.shadows.pop_first();
            }
            self.shadows.insert(seq, built);
        }
        self.shadows.get(&seq).and_then(Option::as_ref)
    }
}

/// Builds the shadow of checkpoint `seq` held by `r`: the first service partition with a
/// non-empty value gets that value's last byte flipped.
fn build(r: &byzfs_bft::Replica<crate::service::SimService>, seq: Seq) -> Option<Shadow> {
    use byzfs_bft::Service;
    let mut parts = r.checkpoint_digests(seq)?;
    let svc = r.service();
    for part in 0..svc.partition_count() {
        let data = svc.export_partition(seq, part)?;
        let Ok(mut items) = postcard::from_bytes::<Vec<(Vec<u8>, Vec<u8>)>>(&data) else {
            continue;
        };
        let Some(v) = items.iter_mut().find_map(|(_, v)| v.last_mut()) else {
            continue;
        };
        *v ^= 0x01;
        let mut sum = Sum::ZERO;
        for (k, v) in &items {
            sum.add(&leaf_hash(k, v));
        }
        let Ok(fake) = postcard::to_allocvec(&items) else {
            continue;
        };
        if fake.len() != data.len() {
            continue;
        }
        parts[part as usize] = partition_digest(part, &sum);
        return Some(Shadow {
            root: root_digest(&parts),
            parts,
            part,
            data: fake,
        });
    }
    None
}

impl Strategy for LyingState {
    fn name(&self) -> &'static str {
        "lying-state"
    }

    fn on_send(&mut self, ctx: &mut Ctx<'_>, out: Outgoing) -> Vec<Outgoing> {
        let Some((h, msg)) = ctx.forger.open(&out.bytes) else {
            return vec![out];
        };
        let lie = match msg {
            Message::Checkpoint(mut c) => {
                let Some(s) = self.shadow(ctx, c.seq) else {
                    return vec![out];
                };
                c.digest = s.root;
                c.stable = true;
                Message::Checkpoint(c)
            }
            Message::StateMeta(mut m) => {
                let Some(s) = self.shadow(ctx, m.seq) else {
                    return vec![out];
                };
                m.parts = s.parts.clone();
                Message::StateMeta(m)
            }
            Message::StatePart(mut m) => {
                let Some(s) = self.shadow(ctx, m.seq) else {
                    return vec![out];
                };
                if m.part != s.part {
                    return vec![out];
                }
                let start = usize::try_from(m.offset).unwrap_or(usize::MAX);
                let end = start.saturating_add(m.data.len());
                let Some(fake) = s.data.get(start..end) else {
                    return vec![out];
                };
                m.data = fake.to_vec();
                Message::StatePart(m)
            }
            _ => return vec![out],
        };
        vec![Outgoing {
            bytes: ctx.forger.seal(&h, &lie, out.to),
            ..out
        }]
    }
}
