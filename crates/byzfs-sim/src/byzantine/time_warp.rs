//! S-TIME-WARP: a primary that stretches the agreed clock (docs/PROTOCOL.md §1.13). Every backup
//! is shown the same batch (no equivocation), but with the non-deterministic timestamp moved
//! to the edge of what a backup may accept, or just past it:
//! * *ahead*: up to the tolerance ahead of real time, so the agreed clock runs ahead and the
//!   next correct primary, bound to propose above it, proposes timestamps that backups with
//!   slow clocks find too far ahead;
//! * *behind*: about the tolerance behind real time (refused if not above the agreed clock);
//! * *beyond*: 1–1.6 tolerances ahead, accepted only by backups whose clocks run fast enough.
//!
//! The primary's own COMMITs carry the altered digest, so a batch a quorum accepted commits.
//! Safety must hold whatever the timestamps; liveness must come back once real time passes
//! the agreed clock.

use super::{Ctx, Dest, Outgoing, Strategy};
use crate::kv::DEFAULT_CLOCK_TOLERANCE;
use byzfs_bft::batch::batch_digest;
use byzfs_bft::message::{Message, PrePrepare};
use byzfs_bft::{Digest, Seq, View};
use rand::Rng;
use std::collections::BTreeMap;

const DECISIONS_MAX: usize = 4096;

/// A warped slot: the altered PRE-PREPARE, and the original and altered batch digests.
type Warped = (PrePrepare, Digest, Digest);

/// The clock-stretching primary.
#[derive(Debug, Default)]
pub struct TimeWarp {
    /// Per slot: the warped batch, or `None` when the slot is left alone.
    decisions: BTreeMap<(View, Seq), Option<Warped>>,
}

impl TimeWarp {
    /// A fresh strategy.
    pub fn new() -> TimeWarp {
        TimeWarp::default()
    }

    /// The timestamp for a slot decided at `now_us`, or `None` to leave it.
    fn warp(ctx: &mut Ctx<'_>, now_us: u64) -> Option<u64> {
        let tol = DEFAULT_CLOCK_TOLERANCE.as_micros() as u64;
        let slack = ctx.rng.gen_range(0..=tol / 10);
        match ctx.rng.gen_range(0..10) {
            0..=3 => Some(now_us + tol - slack),
            4..=5 => Some(now_us.saturating_sub(tol) + slack),
            6..=7 => Some(now_us + tol + ctx.rng.gen_range(1..=tol * 6 / 10)),
            _ => None,
        }
    }

    fn decide(&mut self, ctx: &mut Ctx<'_>, pp: &PrePrepare) -> Option<(PrePrepare, Digest)> {
        let key = (pp.view, pp.seq);
        if !self.decisions.contains_key(&key) {
            let decision = if pp.batch.nondet.len() == 8 {
                Self::warp(ctx, ctx.now.as_micros()).and_then(|ts| {
                    let mut alt = pp.clone();
                    alt.batch.nondet = ts.to_le_bytes().to_vec();
                    let orig = batch_digest(&pp.batch)?;
                    let new = batch_digest(&alt.batch)?;
                    Some((alt, orig, new))
                })
            } else {
                None
            };
            if self.decisions.len() >= DECISIONS_MAX {
                self.decisions.pop_first();
            }
            self.decisions.insert(key, decision);
        }
        // Inserted just above if absent.
        let d = self.decisions.get(&key).expect("decision present");
        d.as_ref().map(|(alt, _, new)| (alt.clone(), *new))
    }
}

impl Strategy for TimeWarp {
    fn name(&self) -> &'static str {
        "time-warp"
    }

    fn on_send(&mut self, ctx: &mut Ctx<'_>, out: Outgoing) -> Vec<Outgoing> {
        if !matches!(out.to, Dest::Replica(_)) {
            return vec![out];
        }
        let Some((h, msg)) = ctx.forger.open(&out.bytes) else {
            return vec![out];
        };
        let altered = match msg {
            Message::PrePrepare(pp) => match self.decide(ctx, &pp) {
                Some((alt, _)) => Message::PrePrepare(alt),
                None => return vec![out],
            },
            // Vote for the batch the backups were shown.
            Message::Commit(mut c) => match self.decisions.get(&(c.view, c.seq)) {
                Some(Some((_, orig, new))) if *orig == c.digest => {
                    c.digest = *new;
                    Message::Commit(c)
                }
                _ => return vec![out],
            },
            _ => return vec![out],
        };
        vec![Outgoing {
            bytes: ctx.forger.seal(&h, &altered, out.to),
            ..out
        }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::byzantine::forge::Forger;
    use crate::rng::{stream, Purpose};
    use byzfs_bft::message::{BatchBody, Commit};
    use byzfs_bft::wire::{encode, Auth, Envelope};
    use byzfs_bft::{Config, Principal, TestKeys, Time};

    #[test]
    fn every_backup_sees_one_warped_batch_and_commits_follow_it() {
        let tk = TestKeys::new(4, 1);
        let keys = tk.replica(0, []);
        let forger = Forger::new(keys.clone(), 1 << 20);
        let config = Config::new(1);
        let now_us: u64 = 50_000_000;
        let tol = DEFAULT_CLOCK_TOLERANCE.as_micros() as u64;
        let (mut warped, mut left) = (0, 0);
        let mut rng = stream(7, Purpose::Byzantine);
        let mut tw = TimeWarp::new();
        for seq in 1..=40 {
            let pp = PrePrepare {
                view: 0,
                seq,
                batch: BatchBody {
                    requests: Vec::new(),
                    big: vec![Digest::ZERO],
                    nondet: (now_us + 1).to_le_bytes().to_vec(),
                },
            };
            let orig = batch_digest(&pp.batch).expect("digest");
            let auth = Auth::Authenticator(&keys.to_replica);
            let env = Envelope::new(Principal::Replica(0), 0);
            let frame: std::sync::Arc<[u8]> = encode(env, &Message::PrePrepare(pp), auth).into();
            let mut ctx = Ctx {
                now: Time::from_micros(now_us),
                view: 0,
                config: &config,
                forger: &forger,
                rng: &mut rng,
                replica: None,
            };
            let mut shown = Vec::new();
            for to in 1..4 {
                let out = tw.on_send(&mut ctx, Outgoing::now(Dest::Replica(to), frame.clone()));
                assert_eq!(out.len(), 1);
                let Some((_, Message::PrePrepare(p))) = forger.open(&out[0].bytes) else {
                    panic!("a PRE-PREPARE leaves");
                };
                shown.push(p);
            }
            assert!(shown.windows(2).all(|w| w[0] == w[1]), "no equivocation");
            let ts = u64::from_le_bytes(shown[0].batch.nondet[..].try_into().expect("8 bytes"));
            let new = batch_digest(&shown[0].batch).expect("digest");
            if ts == now_us + 1 {
                left += 1;
                assert_eq!(new, orig);
                continue;
            }
            warped += 1;
            assert!(ts.abs_diff(now_us) >= tol * 9 / 10 && ts.abs_diff(now_us) <= tol * 16 / 10);
            let commit = Message::Commit(Commit {
                view: 0,
                seq,
                digest: orig,
                replica: 0,
            });
            let env = Envelope::new(Principal::Replica(0), 0);
            let frame = encode(env, &commit, Auth::Authenticator(&keys.to_replica)).into();
            let out = tw.on_send(&mut ctx, Outgoing::now(Dest::Replica(2), frame));
            let Some((_, Message::Commit(c))) = forger.open(&out[0].bytes) else {
                panic!("a COMMIT leaves");
            };
            assert_eq!(c.digest, new, "the primary votes for what it showed");
        }
        assert!(warped > 20 && left > 0, "warped {warped}, left {left}");
    }
}
