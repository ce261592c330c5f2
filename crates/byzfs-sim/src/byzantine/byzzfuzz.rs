//! ByzzFuzz (docs/PROTOCOL.md §5.2): small-scope mutations by one Byzantine replica in `c` random
//! rounds. A round is a sequence number (PRE-PREPARE, PREPARE, COMMIT, CHECKPOINT) or a view
//! (VIEW-CHANGE, NEW-VIEW). In a faulty round, messages of that round to a random subset of
//! receivers get one mutation: view ± 1, seq ± 1, the digest swapped for one seen in another
//! slot (for a PRE-PREPARE: the batch of another slot), or replaced by an older message of the
//! same type (replay). Mutated messages are re-authenticated.

use super::{Ctx, Dest, Outgoing, Strategy};
use crate::rng::SimRng;
use byzfs_bft::message::{BatchBody, Message, Tag};
use byzfs_bft::wire::Frame;
use byzfs_bft::{Digest, ReplicaId, Seq, View};
use rand::Rng;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mutation {
    ViewPlus,
    ViewMinus,
    SeqPlus,
    SeqMinus,
    SwapDigest,
    Replay,
}

#[derive(Clone, Debug)]
struct Round {
    mutation: Mutation,
    victims: Vec<ReplicaId>,
}

/// Rounds are drawn from sequence numbers `1..=SEQ_ROUNDS` and views `1..=VIEW_ROUNDS`.
const SEQ_ROUNDS: u64 = 24;
const VIEW_ROUNDS: u64 = 4;
const SEEN_MAX: usize = 256;
const HISTORY_MAX: usize = 16;

/// The ByzzFuzz mutator.
#[derive(Debug)]
pub struct ByzzFuzz {
    seq_rounds: BTreeMap<Seq, Option<Round>>,
    view_rounds: BTreeMap<View, Option<Round>>,
    digests: BTreeMap<Seq, Digest>,
    batches: BTreeMap<Seq, BatchBody>,
    sent: BTreeMap<u8, VecDeque<Arc<[u8]>>>,
}

fn kind(m: &Message) -> Option<(bool, u64)> {
    match m {
        Message::PrePrepare(x) => Some((true, x.seq)),
        Message::Prepare(x) => Some((true, x.seq)),
        Message::Commit(x) => Some((true, x.seq)),
        Message::Checkpoint(x) => Some((true, x.seq)),
        Message::ViewChange(x) => Some((false, x.view)),
        Message::NewView(x) => Some((false, x.view)),
        _ => None,
    }
}

impl ByzzFuzz {
    /// Chooses `c ∈ 1..=5` faulty rounds.
    pub fn new(rng: &mut SimRng) -> ByzzFuzz {
        let mut s = ByzzFuzz {
            seq_rounds: BTreeMap::new(),
            view_rounds: BTreeMap::new(),
            digests: BTreeMap::new(),
            batches: BTreeMap::new(),
            sent: BTreeMap::new(),
        };
        for _ in 0..rng.gen_range(1..=5) {
            if rng.gen_bool(0.75) {
                s.seq_rounds.insert(rng.gen_range(1..=SEQ_ROUNDS), None);
            } else {
                s.view_rounds.insert(rng.gen_range(1..=VIEW_ROUNDS), None);
            }
        }
        s
    }

    fn learn(&mut self, m: &Message) {
        let (seq, d) = match m {
            Message::PrePrepare(x) => {
                if self.batches.len() < SEEN_MAX {
                    self.batches.entry(x.seq).or_insert_with(|| x.batch.clone());
                }
                return;
            }
            Message::Prepare(x) => (x.seq, x.digest),
            Message::Commit(x) => (x.seq, x.digest),
            _ => return,
        };
        if self.digests.len() < SEEN_MAX {
            self.digests.entry(seq).or_insert(d);
        }
    }

    fn round(ctx: &mut Ctx<'_>, slot: &mut Option<Round>) -> Round {
        if let Some(r) = slot {
            return r.clone();
        }
        let n = ctx.config.n() as ReplicaId;
        let me = ctx.forger.me();
        let others: Vec<ReplicaId> = (0..n).filter(|&r| r != me).collect();
        let mut victims: Vec<ReplicaId> = others
            .iter()
            .copied()
            .filter(|_| ctx.rng.gen_bool(0.5))
            .collect();
        if victims.is_empty() {
            victims.push(others[ctx.rng.gen_range(0..others.len())]);
        }
        let mutation = match ctx.rng.gen_range(0..6) {
            0 => Mutation::ViewPlus,
            1 => Mutation::ViewMinus,
            2 => Mutation::SeqPlus,
            3 => Mutation::SeqMinus,
            4 => Mutation::SwapDigest,
            _ => Mutation::Replay,
        };
        let r = Round { mutation, victims };
        *slot = Some(r.clone());
        r
    }

    fn other_digest(&self, ctx: &mut Ctx<'_>, seq: Seq) -> Option<Digest> {
        let cands: Vec<Digest> = self
            .digests
            .iter()
            .filter(|(s, _)| **s != seq)
            .map(|(_, d)| *d)
            .collect();
        crate::rng::pick(ctx.rng, &cands).copied()
    }

    fn other_batch(&self, ctx: &mut Ctx<'_>, seq: Seq) -> Option<BatchBody> {
        let cands: Vec<&BatchBody> = self
            .batches
            .iter()
            .filter(|(s, _)| **s != seq)
            .map(|(_, b)| b)
            .collect();
        crate::rng::pick(ctx.rng, &cands).map(|b| (*b).clone())
    }
}

impl Strategy for ByzzFuzz {
    fn name(&self) -> &'static str {
        "byzzfuzz"
    }

    fn on_receive(&mut self, bytes: &[u8]) {
        if let Ok(f) = Frame::parse(bytes, usize::MAX) {
            if matches!(f.header.tag, Tag::PrePrepare | Tag::Prepare | Tag::Commit) {
                if let Ok(m) = f.decode() {
                    self.learn(&m);
                }
            }
        }
    }

    fn on_send(&mut self, ctx: &mut Ctx<'_>, out: Outgoing) -> Vec<Outgoing> {
        let Some((h, msg)) = ctx.forger.open(&out.bytes) else {
            return vec![out];
        };
        self.learn(&msg);
        let tag = h.tag as u8;
        let older = {
            let hist = self.sent.entry(tag).or_default();
            let older = crate::rng::pick(ctx.rng, hist.make_contiguous()).cloned();
            if hist.len() == HISTORY_MAX {
                hist.pop_front();
            }
            hist.push_back(out.bytes.clone());
            older
        };
        let Dest::Replica(to) = out.to else {
            return vec![out];
        };
        let Some((by_seq, round_no)) = kind(&msg) else {
            return vec![out];
        };
        let slot = if by_seq {
            self.seq_rounds.get_mut(&round_no)
        } else {
            self.view_rounds.get_mut(&round_no)
        };
        let Some(slot) = slot else { return vec![out] };
        let round = ByzzFuzz::round(ctx, slot);
        if !round.victims.contains(&to) {
            return vec![out];
        }
        let mut m = msg;
        let bump = |x: &mut u64, up: bool| {
            *x = if up {
                x.saturating_add(1)
            } else {
                x.saturating_sub(1)
            }
        };
        match round.mutation {
            Mutation::Replay => {
                return match older {
                    Some(b) => vec![Outgoing { bytes: b, ..out }],
                    None => vec![out],
                };
            }
            Mutation::ViewPlus | Mutation::ViewMinus => {
                let up = round.mutation == Mutation::ViewPlus;
                match &mut m {
                    Message::PrePrepare(x) => bump(&mut x.view, up),
                    Message::Prepare(x) => bump(&mut x.view, up),
                    Message::Commit(x) => bump(&mut x.view, up),
                    Message::ViewChange(x) => bump(&mut x.view, up),
                    Message::NewView(x) => bump(&mut x.view, up),
                    _ => {}
                }
            }
            Mutation::SeqPlus | Mutation::SeqMinus => {
                let up = round.mutation == Mutation::SeqPlus;
                match &mut m {
                    Message::PrePrepare(x) => bump(&mut x.seq, up),
                    Message::Prepare(x) => bump(&mut x.seq, up),
                    Message::Commit(x) => bump(&mut x.seq, up),
                    Message::Checkpoint(x) => bump(&mut x.seq, up),
                    Message::ViewChange(x) => bump(&mut x.last_stable, up),
                    Message::NewView(x) => bump(&mut x.min, up),
                    _ => {}
                }
            }
            Mutation::SwapDigest => match &mut m {
                Message::PrePrepare(x) => {
                    if let Some(b) = self.other_batch(ctx, x.seq) {
                        x.batch = b;
                    }
                }
                Message::Prepare(x) => {
                    x.digest = self
                        .other_digest(ctx, x.seq)
                        .unwrap_or(Digest(ctx.rng.gen()))
                }
                Message::Commit(x) => {
                    x.digest = self
                        .other_digest(ctx, x.seq)
                        .unwrap_or(Digest(ctx.rng.gen()))
                }
                Message::Checkpoint(x) => x.digest = Digest(ctx.rng.gen()),
                Message::NewView(x) => {
                    if let Some(p) = x.picks.first_mut() {
                        *p = self
                            .digests
                            .values()
                            .next()
                            .copied()
                            .unwrap_or(Digest(ctx.rng.gen()));
                    }
                }
                _ => {}
            },
        }
        vec![Outgoing {
            bytes: ctx.forger.seal(&h, &m, out.to),
            ..out
        }]
    }
}
