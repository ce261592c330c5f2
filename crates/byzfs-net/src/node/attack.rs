//! **Test-only fault injection**, compiled only with the feature `byzantine` (which release
//! builds lack) and switched on only by the hidden command-line flag `byzfs replica
//! --attack MODE` (no configuration file can): a Byzantine replica attacking the cluster's
//! throughput, for `byzfs bench attack` (Aardvark's attacks, docs/PROTOCOL.md §5.3). Its state,
//! votes and replies stay correct; only what it sends to the other replicas changes.

use crate::counters::Counters;
use crate::link_lane::PeerQueues;
use byzfs_bft::batch::batch_digest;
use byzfs_bft::message::{Message, PrePrepare, Tag, ViewChange};
use byzfs_bft::wire::{encode, Auth, Envelope, Frame};
use byzfs_bft::{Principal, ReplicaId, ReplicaKeys, View};
use core::time::Duration;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

/// What a Byzantine replica does to the others (`byzfs replica --attack MODE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicaAttack {
    /// As primary, holds every PRE-PREPARE for 90 % of the view-change timeout.
    SlowPrimary,
    /// As primary, sends the upper half of the backups (replicas `n/2..n`) a different
    /// PRE-PREPARE for each slot (its requests reversed), re-authenticated with its own keys:
    /// neither batch can gather a commit quorum. A batch of one request gets an empty
    /// variant, which the backups refuse and fetch the real batch instead: the attack bites
    /// under load, when batches hold several requests.
    Equivocate,
    /// Floods every other replica with garbage: random bytes, and frames whose header is
    /// well formed but whose authenticator is not.
    Garbage,
    /// Floods every other replica with valid-looking old messages: replays of the genuine
    /// frames it sent earlier (each authentic, each long stale).
    Replay,
    /// Sends every other replica signed VIEW-CHANGEs for ever higher views, every 10 ms.
    ViewChangeSpam,
}

/// Frames of its own the replaying replica keeps to replay.
const REPLAY_KEEP: usize = 512;
/// Interval of the view-change spam.
const VC_SPAM_EVERY: Duration = Duration::from_millis(10);
/// Size of a garbage frame.
const GARBAGE_BYTES: usize = 1500;

/// One frame for one peer, to be queued after `delay`.
pub(super) struct Out {
    pub to: ReplicaId,
    pub bytes: Arc<[u8]>,
    pub delay: Duration,
}

/// The attacking replica's state.
pub(super) struct Attacker {
    kind: ReplicaAttack,
    keys: ReplicaKeys,
    epoch: u32,
    n: usize,
    hold: Duration,
    /// Genuine frames it sent (replay), and whether the flood task is running.
    sent: Arc<std::sync::Mutex<VecDeque<Arc<[u8]>>>>,
    flooding: bool,
    /// View-change spam: the highest view claimed and when last.
    top: View,
    last_spam: Option<Instant>,
    /// Frames altered, held or added (logged at the end).
    pub acts: u64,
}

impl Attacker {
    pub fn new(
        kind: ReplicaAttack,
        keys: ReplicaKeys,
        epoch: u32,
        n: usize,
        view_change_timeout: Duration,
    ) -> Attacker {
        tracing::warn!(
            replica = keys.me,
            ?kind,
            "TEST-ONLY fault injection: this replica attacks the cluster's throughput"
        );
        Attacker {
            kind,
            keys,
            epoch,
            n,
            hold: view_change_timeout / 10 * 9,
            sent: Arc::default(),
            flooding: false,
            top: 0,
            last_spam: None,
            acts: 0,
        }
    }

    /// What becomes of `bytes`, sent by the honest code to `to` (every peer for a
    /// broadcast); `view` is the replica's current view. May start the flood task.
    pub fn outgoing(
        &mut self,
        to: Option<ReplicaId>,
        bytes: Arc<[u8]>,
        view: View,
        peers: &[Option<PeerQueues>],
        counters: &Arc<Counters>,
    ) -> Vec<Out> {
        let me = self.keys.me;
        let dests: Vec<ReplicaId> = match to {
            Some(j) => vec![j],
            None => (0..self.n as ReplicaId).filter(|&j| j != me).collect(),
        };
        let now = |to, bytes| Out {
            to,
            bytes,
            delay: Duration::ZERO,
        };
        let tag = bytes.get(3).copied();
        let mut out: Vec<Out> = Vec::new();
        match self.kind {
            ReplicaAttack::SlowPrimary if tag == Some(Tag::PrePrepare as u8) => {
                self.acts += 1;
                for j in dests {
                    out.push(Out {
                        to: j,
                        bytes: bytes.clone(),
                        delay: self.hold,
                    });
                }
                return out;
            }
            ReplicaAttack::Equivocate if tag == Some(Tag::PrePrepare as u8) => {
                if let Some(variant) = self.variant(&bytes) {
                    self.acts += 1;
                    for j in dests {
                        let b = if j as usize >= self.n / 2 {
                            variant.clone()
                        } else {
                            bytes.clone()
                        };
                        out.push(now(j, b));
                    }
                    return out;
                }
            }
            ReplicaAttack::Garbage | ReplicaAttack::Replay => {
                if let Ok(mut kept) = self.sent.lock() {
                    if kept.len() < REPLAY_KEEP {
                        kept.push_back(bytes.clone());
                    }
                }
                if !self.flooding {
                    self.flooding = true;
                    self.spawn_flood(peers, counters);
                }
            }
            ReplicaAttack::ViewChangeSpam
                if self.last_spam.is_none_or(|t| t.elapsed() >= VC_SPAM_EVERY) =>
            {
                self.last_spam = Some(Instant::now());
                self.top = self.top.max(view) + 1 + (self.acts % 8);
                let spam = self.view_change(self.top);
                self.acts += 1;
                for j in 0..self.n as ReplicaId {
                    if j != me {
                        out.push(now(j, spam.clone()));
                    }
                }
            }
            _ => {}
        }
        out.extend(dests.into_iter().map(|j| now(j, bytes.clone())));
        out
    }

    /// A different PRE-PREPARE for the slot of `bytes`, sealed with this replica's keys.
    fn variant(&self, bytes: &[u8]) -> Option<Arc<[u8]>> {
        let f = Frame::parse(bytes, usize::MAX).ok()?;
        let Message::PrePrepare(mut pp) = f.decode().ok()? else {
            return None;
        };
        if pp.batch.requests.len() >= 2 {
            pp.batch.requests.reverse();
        } else if !pp.batch.requests.is_empty() || !pp.batch.big.is_empty() {
            pp.batch.requests.clear();
            pp.batch.big.clear();
        } else {
            return None;
        }
        batch_digest(&pp.batch)?;
        let env = Envelope {
            sender: Principal::Replica(self.keys.me),
            epoch: f.header.epoch,
            flags: f.header.flags,
            replier: f.header.replier,
        };
        let msg = Message::PrePrepare(PrePrepare {
            view: pp.view,
            seq: pp.seq,
            batch: pp.batch,
        });
        Some(encode(env, &msg, Auth::Authenticator(&self.keys.to_replica)).into())
    }

    /// A signed VIEW-CHANGE for `view` claiming nothing prepared.
    fn view_change(&self, view: View) -> Arc<[u8]> {
        let vc = ViewChange {
            view,
            replica: self.keys.me,
            last_stable: 0,
            checkpoints: Vec::new(),
            prepared: Vec::new(),
            pre_prepared: Vec::new(),
        };
        encode(
            Envelope::new(Principal::Replica(self.keys.me), self.epoch),
            &Message::ViewChange(vc),
            Auth::Signature(&self.keys.signing),
        )
        .into()
    }

    /// The flood: fills every peer queue as fast as its link drains, with garbage or with
    /// replays of the frames kept in `sent`, until the node stops (the queues close).
    fn spawn_flood(&self, peers: &[Option<PeerQueues>], counters: &Arc<Counters>) {
        let queues: Vec<PeerQueues> = peers.iter().flatten().cloned().collect();
        let (kind, sent, counters) = (self.kind, self.sent.clone(), counters.clone());
        tokio::spawn(async move {
            let mut i: usize = 0;
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
            loop {
                let frame: Arc<[u8]> = match kind {
                    ReplicaAttack::Replay => {
                        let kept = sent
                            .lock()
                            .ok()
                            .and_then(|k| k.get(i % k.len().max(1)).cloned());
                        match kept {
                            Some(f) => f,
                            None => {
                                tokio::time::sleep(Duration::from_millis(5)).await;
                                continue;
                            }
                        }
                    }
                    _ => {
                        // Random bytes, with a plausible header every other frame (a tag
                        // and epoch the receiver parses before the authenticator fails).
                        let mut g = vec![0u8; GARBAGE_BYTES];
                        for b in g.iter_mut() {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            *b = x as u8;
                        }
                        if i.is_multiple_of(2) {
                            if let Ok(k) = sent.lock() {
                                if let Some(real) = k.get(i % k.len().max(1)) {
                                    let h = real.len().min(64);
                                    g[..h].copy_from_slice(&real[..h]);
                                }
                            }
                        }
                        g.into()
                    }
                };
                i = i.wrapping_add(1);
                let mut queued = false;
                for q in &queues {
                    queued |= q.push(frame.clone(), &counters);
                }
                if !queued {
                    if queues.iter().all(|q| q.is_closed()) {
                        return;
                    }
                    // Every link is full: let the writers drain.
                    tokio::time::sleep(Duration::from_millis(1)).await;
                } else if i.is_multiple_of(64) {
                    tokio::task::yield_now().await;
                }
            }
        });
    }
}
