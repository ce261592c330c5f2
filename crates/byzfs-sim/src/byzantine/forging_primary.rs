//! S-FORGING-PRIMARY (issue #49 item 3; docs/PROTOCOL.md §1.5 "Backup on PRE-PREPARE",
//! §1.13, §1.14): a faulty primary that passes off as its clients' what they never sent.
//! In each slot it leads it does one of:
//! * **forge**: an inlined request's operation altered by one byte, the digest in the
//!   request's header made to fit it (so the request parses and decodes), the client's
//!   authentication left as it was (the primary cannot make the client's);
//! * **replay**: a request frame it proposed in an earlier slot, genuine and authenticated,
//!   added again (a replica answers it from its reply cache, never runs it twice);
//! * **bend**: the batch's non-deterministic choice moved an hour ahead or behind, out of
//!   every backup's tolerance;
//! * nothing (a quarter of the slots), so its clients' other requests still commit.
//!
//! Every backup gets the same PRE-PREPARE (no equivocation), sealed with the primary's own
//! keys: only each backup's own checks, or `f` other backups' PREPAREs vouching for the
//! batch, stand between a forgery and its execution. Checker `exactly-once` compares what
//! runs with what clients put on the network; mutation `vouch-on-fewer` (vouched for by
//! `f - 1` others) lets the forgeries run.

use super::{Ctx, Dest, Outgoing, Strategy};
use crate::kv::model::nondet_ts;
use byzfs_bft::message::{Message, PrePrepare};
use byzfs_bft::wire::HEADER_LEN;
use byzfs_bft::{Digest, Seq, View};
use rand::Rng;
use std::collections::{BTreeMap, VecDeque};

/// Slots whose altered PRE-PREPARE is kept (each backup gets the same one).
const SLOTS_KEPT: usize = 1024;
/// Request frames kept for replays.
const SEEN_KEPT: usize = 64;
/// How far a bent choice moves the batch's timestamp, µs (an hour).
const BEND_US: i64 = 3_600_000_000;

/// The forging primary.
#[derive(Debug, Default)]
pub struct ForgingPrimary {
    /// What each slot it led was turned into (`None`: sent as it was).
    slots: BTreeMap<(View, Seq), Option<PrePrepare>>,
    /// Request frames of earlier batches, for replays.
    seen: VecDeque<Vec<u8>>,
}

impl ForgingPrimary {
    /// A fresh strategy.
    pub fn new() -> ForgingPrimary {
        ForgingPrimary::default()
    }

    /// `pp` altered one way, chosen at random; `None` to send it as it is.
    fn alter(&mut self, ctx: &mut Ctx<'_>, pp: &PrePrepare) -> Option<PrePrepare> {
        let mut alt = pp.clone();
        match ctx.rng.gen_range(0..4) {
            0 if !alt.batch.requests.is_empty() => {
                let i = ctx.rng.gen_range(0..alt.batch.requests.len());
                alt.batch.requests[i] = forged(&alt.batch.requests[i])?;
            }
            1 if !self.seen.is_empty() => {
                let old = self.seen[ctx.rng.gen_range(0..self.seen.len())].clone();
                let at = ctx.rng.gen_range(0..=alt.batch.requests.len());
                alt.batch.requests.insert(at, old);
            }
            2 if !alt.batch.nondet.is_empty() => {
                let by = if ctx.rng.gen_bool(0.5) {
                    BEND_US
                } else {
                    -BEND_US
                };
                let ts = nondet_ts(&alt.batch.nondet).saturating_add_signed(by);
                alt.batch.nondet = ts.to_le_bytes().to_vec();
            }
            _ => return None,
        }
        Some(alt)
    }
}

/// Request frame `frame` with the last byte of its operation changed and the body digest
/// in its header made to fit; the client's authentication as it was. `None` if it has no
/// operation byte to change.
fn forged(frame: &[u8]) -> Option<Vec<u8>> {
    let body_len = u32::from_le_bytes(frame.get(20..24)?.try_into().ok()?) as usize;
    let end = HEADER_LEN.checked_add(body_len)?;
    let body = frame.get(HEADER_LEN..end)?;
    let v = byzfs_bft::message::RequestView::decode(body)?;
    if v.op.is_empty() {
        return None;
    }
    let mut out = frame.to_vec();
    // The operation is the body's last field (`RequestView`).
    out[end - 1] ^= 0x5a;
    let digest = Digest::of(&out[HEADER_LEN..end]);
    out[32..64].copy_from_slice(&digest.0);
    Some(out)
}

impl Strategy for ForgingPrimary {
    fn name(&self) -> &'static str {
        "forging-primary"
    }

    fn on_send(&mut self, ctx: &mut Ctx<'_>, out: Outgoing) -> Vec<Outgoing> {
        if !matches!(out.to, Dest::Replica(_)) {
            return vec![out];
        }
        let Some((h, Message::PrePrepare(pp))) = ctx.forger.open(&out.bytes) else {
            return vec![out];
        };
        let key = (pp.view, pp.seq);
        if !self.slots.contains_key(&key) {
            let alt = self.alter(ctx, &pp);
            if self.slots.len() >= SLOTS_KEPT {
                self.slots.pop_first();
            }
            self.slots.insert(key, alt);
            for r in &pp.batch.requests {
                if self.seen.len() >= SEEN_KEPT {
                    self.seen.pop_front();
                }
                self.seen.push_back(r.clone());
            }
        }
        match self.slots.get(&key) {
            Some(Some(alt)) => {
                let bytes = ctx
                    .forger
                    .seal(&h, &Message::PrePrepare(alt.clone()), out.to);
                vec![Outgoing { bytes, ..out }]
            }
            _ => vec![out],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use byzfs_bft::message::{Request, RequestView};
    use byzfs_bft::wire::{encode, Auth, Envelope, Frame, REPLIER_ALL};
    use byzfs_bft::Principal;

    #[test]
    fn a_forged_request_parses_and_decodes_but_carries_another_operation() {
        let env = Envelope {
            sender: Principal::Client(9),
            epoch: 0,
            flags: 0,
            replier: REPLIER_ALL,
        };
        let req = Request {
            client: 9,
            rid: 4,
            acked: 3,
            after: 3,
            op: b"set a 1".to_vec(),
        };
        let frame = encode(env, &Message::Request(req), Auth::None);
        let forged = forged(&frame).expect("an operation to change");
        let f = Frame::parse(&forged, usize::MAX).expect("the digest fits the body");
        let v = RequestView::decode(f.body).expect("still a request");
        let want_op = [b's', b'e', b't', b' ', b'a', b' ', b'1' ^ 0x5a];
        assert_eq!((v.client, v.rid, v.op), (9, 4, &want_op[..]));
        assert_eq!(forged[..32], frame[..32], "the header but its digest");
        assert_ne!(forged[32..64], frame[32..64]);
        assert_eq!(forged.len(), frame.len());
    }
}
