//! S-EQUIV (docs/PROTOCOL.md §6.4): an equivocating primary. For each `(view, seq)` it pre-prepares,
//! the backups are split three ways, re-authenticating everything with its own keys:
//! * the *victims* get a different PRE-PREPARE `B` for the same slot — requests reordered or
//!   one dropped, or the non-deterministic timestamp nudged (still plausible);
//! * at most one *bridge* gets both `A` and `B`, in random order (a second PRE-PREPARE for a
//!   slot it already holds);
//! * the others get the original `A`.
//!
//! The primary's own COMMITs follow the story each backup was told (`B` to victims, both to the
//! bridge), so with a backup that wrongly accepts a second PRE-PREPARE each side can assemble a
//! commit certificate. Other variants: the victims also get the batch at `seq + 1` (one request
//! at two sequence numbers), or get it at `seq + 1` only (a skipped sequence number, a hole).

use super::{Ctx, Dest, Outgoing, Strategy};
use crate::kv::model::nondet_ts;
use byzfs_bft::batch::batch_digest;
use byzfs_bft::message::{Message, PrePrepare};
use byzfs_bft::{Digest, ReplicaId, Seq, View};
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
    bridge: Option<ReplicaId>,
    /// `(original digest, variant digest)` once the variant was built.
    digests: Option<(Digest, Digest)>,
}

/// The equivocating primary.
#[derive(Debug)]
pub struct Equivocate {
    decisions: BTreeMap<(View, Seq), Decision>,
    /// Probability that a slot has a bridge.
    bridge_p: f64,
    /// Largest delay between the two PRE-PREPAREs a bridge receives, µs.
    bridge_gap_us: u64,
}

impl Default for Equivocate {
    fn default() -> Equivocate {
        Equivocate::new()
    }
}

const DECISIONS_MAX: usize = 4096;
/// Largest delay between the two PRE-PREPAREs a bridge receives, µs.
const BRIDGE_GAP_US: u64 = 1_000;

impl Equivocate {
    /// A fresh strategy: a bridge in half the slots, the bridge's two PRE-PREPAREs at most
    /// 1 ms apart.
    pub fn new() -> Equivocate {
        Equivocate::with_bridge(0.5, BRIDGE_GAP_US)
    }

    /// A strategy with a bridge in a fraction `bridge_p` of the slots, whose two PRE-PREPAREs
    /// are up to `bridge_gap_us` apart.
    pub fn with_bridge(bridge_p: f64, bridge_gap_us: u64) -> Equivocate {
        Equivocate {
            decisions: BTreeMap::new(),
            bridge_p,
            bridge_gap_us,
        }
    }

    fn decide(&mut self, ctx: &mut Ctx<'_>, view: View, seq: Seq) -> &mut Decision {
        if !self.decisions.contains_key(&(view, seq)) {
            let n = ctx.config.n() as ReplicaId;
            let me = ctx.forger.me();
            let mut backups: Vec<ReplicaId> = (0..n).filter(|&r| r != me).collect();
            let bridge = if ctx.rng.gen_bool(self.bridge_p) {
                Some(backups.remove(ctx.rng.gen_range(0..backups.len())))
            } else {
                None
            };
            let mut victims: Vec<ReplicaId> = backups
                .iter()
                .copied()
                .filter(|_| ctx.rng.gen_bool(0.5))
                .collect();
            if victims.is_empty() && bridge.is_none() {
                victims.push(backups[ctx.rng.gen_range(0..backups.len())]);
            }
            let sign = if ctx.rng.gen_bool(0.5) { 1 } else { -1 };
            let variant = match ctx.rng.gen_range(0..5) {
                0 => Variant::Reorder,
                1 => Variant::DropRequest,
                2 => Variant::Nondet(ctx.rng.gen_range(1..=2_000) * sign),
                3 => Variant::TwoSeqs,
                _ => Variant::SkipSeq,
            };
            if self.decisions.len() >= DECISIONS_MAX {
                self.decisions.pop_first();
            }
            let d = Decision {
                variant,
                victims,
                bridge,
                digests: None,
            };
            self.decisions.insert((view, seq), d);
        }
        // Inserted just above if absent.
        self.decisions
            .get_mut(&(view, seq))
            .expect("decision present")
    }

    /// The variant batches it pre-prepared to victims or a bridge at the same slot:
    /// `(seq, view, variant digest)`.
    pub fn variants(&self) -> impl Iterator<Item = (Seq, View, Digest)> + '_ {
        self.decisions
            .iter()
            .filter_map(|(&(view, seq), d)| d.digests.map(|(_, new)| (seq, view, new)))
    }

    /// The altered batch of `pp` under `variant` (same slot).
    fn alter(pp: &PrePrepare, variant: Variant) -> PrePrepare {
        let mut alt = pp.clone();
        let nudge = |alt: &mut PrePrepare, delta: i64| {
            let ts = nondet_ts(&alt.batch.nondet).saturating_add_signed(delta);
            alt.batch.nondet = ts.to_le_bytes().to_vec();
        };
        match variant {
            Variant::Reorder if alt.batch.requests.len() >= 2 => alt.batch.requests.reverse(),
            Variant::DropRequest if !alt.batch.requests.is_empty() => {
                alt.batch.requests.pop();
            }
            Variant::Nondet(delta) => nudge(&mut alt, delta),
            _ => nudge(&mut alt, 1),
        }
        alt
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
        let Some((h, msg)) = ctx.forger.open(&out.bytes) else {
            return vec![out];
        };
        match msg {
            Message::PrePrepare(pp) => {
                let d = self.decide(ctx, pp.view, pp.seq);
                let is_bridge = d.bridge == Some(to);
                if !is_bridge && !d.victims.contains(&to) {
                    return vec![out];
                }
                let variant = d.variant;
                let seal = |ctx: &Ctx<'_>, p: PrePrepare| {
                    ctx.forger.seal(&h, &Message::PrePrepare(p), out.to)
                };
                if !is_bridge && matches!(variant, Variant::TwoSeqs | Variant::SkipSeq) {
                    let mut moved = pp.clone();
                    moved.seq += 1;
                    let moved = Outgoing {
                        bytes: seal(ctx, moved),
                        ..out.clone()
                    };
                    return if variant == Variant::TwoSeqs {
                        vec![out, moved]
                    } else {
                        vec![moved]
                    };
                }
                let alt = Equivocate::alter(&pp, variant);
                if let (Some(orig), Some(new)) = (batch_digest(&pp.batch), batch_digest(&alt.batch))
                {
                    d.digests = Some((orig, new));
                }
                let forged = Outgoing {
                    bytes: seal(ctx, alt),
                    ..out.clone()
                };
                if !is_bridge {
                    return vec![forged];
                }
                let gap = ctx.rng.gen_range(0..=self.bridge_gap_us);
                let (first, mut second) = if ctx.rng.gen_bool(0.5) {
                    (forged, out)
                } else {
                    (out, forged)
                };
                second.delay_us += gap;
                vec![first, second]
            }
            Message::Commit(c) => {
                // Vote for what each backup was shown.
                let Some(d) = self.decisions.get(&(c.view, c.seq)) else {
                    return vec![out];
                };
                let Some((orig, new)) = d.digests.filter(|(o, _)| *o == c.digest) else {
                    return vec![out];
                };
                let mut alt = c;
                alt.digest = new;
                let forged = Outgoing {
                    bytes: ctx.forger.seal(&h, &Message::Commit(alt), out.to),
                    ..out.clone()
                };
                debug_assert_eq!(c.digest, orig);
                if d.bridge == Some(to) {
                    vec![out, forged]
                } else if d.victims.contains(&to) {
                    vec![forged]
                } else {
                    vec![out]
                }
            }
            _ => vec![out],
        }
    }
}
