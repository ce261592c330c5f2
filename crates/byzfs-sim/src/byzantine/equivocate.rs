//! S-EQUIV (PROTOCOL.md §6.4): an equivocating primary. For each `(view, seq)` it pre-prepares,
//! a random non-empty subset of backups (the victims) receives a *different* PRE-PREPARE for
//! the same `(view, seq)`, re-authenticated: requests reordered or one dropped, or the
//! non-deterministic timestamp nudged (still plausible); or the victims also get the same batch
//! at `seq + 1` (one request at two sequence numbers); or the victims get it at `seq + 1` only
//! (a skipped sequence number, a hole).

use super::{Ctx, Dest, Outgoing, Strategy};
use crate::kv::model::nondet_ts;
use byzfs_bft::message::Message;
use byzfs_bft::{ReplicaId, Seq, View};
use rand::Rng;
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    Reorder,
    DropRequest,
    Nondet(i64),
    TwoSeqs,
    SkipSeq,
}

#[derive(Clone, Debug)]
struct Decision {
    variant: Variant,
    victims: Vec<ReplicaId>,
}

/// The equivocating primary.
#[derive(Debug, Default)]
pub struct Equivocate {
    decisions: BTreeMap<(View, Seq), Decision>,
}

const DECISIONS_MAX: usize = 4096;

impl Equivocate {
    /// A fresh strategy.
    pub fn new() -> Equivocate {
        Equivocate::default()
    }

    fn decide(&mut self, ctx: &mut Ctx<'_>, view: View, seq: Seq) -> Decision {
        if let Some(d) = self.decisions.get(&(view, seq)) {
            return d.clone();
        }
        let n = ctx.config.n() as ReplicaId;
        let me = ctx.forger.me();
        let backups: Vec<ReplicaId> = (0..n).filter(|&r| r != me).collect();
        let mut victims: Vec<ReplicaId> = backups
            .iter()
            .copied()
            .filter(|_| ctx.rng.gen_bool(0.5))
            .collect();
        if victims.is_empty() {
            victims.push(backups[ctx.rng.gen_range(0..backups.len())]);
        }
        let variant = match ctx.rng.gen_range(0..5) {
            0 => Variant::Reorder,
            1 => Variant::DropRequest,
            2 => Variant::Nondet(
                ctx.rng.gen_range(1..=2_000) * if ctx.rng.gen_bool(0.5) { 1 } else { -1 },
            ),
            3 => Variant::TwoSeqs,
            _ => Variant::SkipSeq,
        };
        let d = Decision { variant, victims };
        if self.decisions.len() >= DECISIONS_MAX {
            self.decisions.pop_first();
        }
        self.decisions.insert((view, seq), d.clone());
        d
    }
}

impl Strategy for Equivocate {
    fn name(&self) -> &'static str {
        "equivocate"
    }

    fn on_send(&mut self, ctx: &mut Ctx<'_>, out: Outgoing) -> Vec<Outgoing> {
        let Dest::Replica(to) = out.to else {
            return vec![out];
        };
        let Some((h, Message::PrePrepare(pp))) = ctx.forger.open(&out.bytes) else {
            return vec![out];
        };
        let d = self.decide(ctx, pp.view, pp.seq);
        if !d.victims.contains(&to) {
            return vec![out];
        }
        let mut alt = pp.clone();
        let mut variant = d.variant;
        if variant == Variant::Reorder && alt.batch.requests.len() < 2 {
            variant = Variant::Nondet(1);
        }
        if variant == Variant::DropRequest && alt.batch.requests.is_empty() {
            variant = Variant::Nondet(-1);
        }
        match variant {
            Variant::Reorder => alt.batch.requests.reverse(),
            Variant::DropRequest => {
                alt.batch.requests.pop();
            }
            Variant::Nondet(delta) => {
                let ts = nondet_ts(&alt.batch.nondet).saturating_add_signed(delta);
                alt.batch.nondet = ts.to_le_bytes().to_vec();
            }
            Variant::TwoSeqs => {
                let mut again = pp.clone();
                again.seq += 1;
                let dup = Outgoing::now(
                    out.to,
                    ctx.forger.seal(&h, &Message::PrePrepare(again), out.to),
                );
                return vec![out, dup];
            }
            Variant::SkipSeq => alt.seq += 1,
        }
        vec![Outgoing {
            bytes: ctx.forger.seal(&h, &Message::PrePrepare(alt), out.to),
            ..out
        }]
    }
}
