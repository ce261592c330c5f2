//! Checkpoints, stability and garbage collection (docs/PROTOCOL.md §2.1, §2.2).

use super::{Replica, M};
use crate::action::{DropReason, Event, StableVia};
use crate::crypto::Digest;
use crate::ids::{ReplicaId, Seq};
use crate::message::{Checkpoint, Message};
use crate::service::Service;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Stable-checkpoint claims remembered per replica.
const CLAIMS_PER_REPLICA: usize = 4;

/// Checkpoint bookkeeping.
#[derive(Clone, Debug, Default)]
pub(crate) struct Checkpoints {
    /// Checkpoints this replica holds (at or above the last stable one), with digests.
    pub own: BTreeMap<Seq, Digest>,
    /// CHECKPOINT votes inside the window, by sequence number and sender.
    pub votes: BTreeMap<Seq, BTreeMap<ReplicaId, Digest>>,
    /// Each replica's latest claims of *stable* checkpoints (lag detection, §2.1), at most
    /// [`CLAIMS_PER_REPLICA`] per replica.
    pub stable_claims: BTreeMap<ReplicaId, BTreeMap<Seq, Digest>>,
    /// Own CHECKPOINT frame (stable flag set) for the last stable checkpoint, for relaying.
    pub stable_frame: Option<Arc<[u8]>>,
}

impl Checkpoints {
    pub fn set_own(&mut self, seq: Seq, d: Digest) {
        self.own.insert(seq, d);
    }
}

impl<S: Service> Replica<S> {
    /// A checkpoint above the stable one that an installed NEW-VIEW chose
    /// ([`crate::PersistRecord::Certified`]); listed in VIEW-CHANGEs until it is stable here.
    pub(super) fn certified_checkpoint(&self) -> Option<(Seq, Digest)> {
        self.storage
            .durable
            .certified
            .filter(|&(s, _)| s > self.log.last_stable)
    }

    /// Signs our claim that the checkpoint at `last_stable` is stable again after a restart.
    /// The frame is volatile, but the checkpoint was stored only once stable (`mark_stable`),
    /// and a replica behind it fetches it only on `f+1` such claims (`check_lagging`):
    /// without them, two restarted replicas holding the only copies of the state answered
    /// their lagging peers with unstable CHECKPOINTs for ever (simulator:
    /// fs-transfer-power-cuts 2668).
    pub(super) fn claim_stable_checkpoint_again(&mut self) {
        let seq = self.log.last_stable;
        let Some(&digest) = self.checkpoints.own.get(&seq).filter(|_| seq > 0) else {
            return;
        };
        let frame = self.encode(
            &Message::Checkpoint(Checkpoint {
                seq,
                digest,
                replica: self.me,
                stable: true,
            }),
            super::AuthChoice::Authenticator,
        );
        self.checkpoints.stable_frame = Some(frame);
    }

    /// Takes the checkpoint at `n` (every K executed batches) and multicasts it.
    pub(super) fn make_checkpoint(&mut self, n: Seq) {
        let d = self.take_checkpoint(n);
        self.checkpoints.set_own(n, d);
        // Batches at or below the checkpoint are never replayed again.
        self.log.executed = self.log.executed.split_off(&(n + 1));
        self.event(Event::CheckpointTaken { seq: n, digest: d });
        if self.storage.store_state {
            // The executions this CHECKPOINT vouches for must survive a crash: a replica
            // that lost them would no longer report the checkpoint, and if it helped make
            // it stable elsewhere, a view change could find no checkpoint with `f+1`
            // reports (simulator: total-crash 548).
            self.out.push_back(crate::action::Action::Sync);
        }
        self.broadcast(&Message::Checkpoint(Checkpoint {
            seq: n,
            digest: d,
            replica: self.me,
            stable: false,
        }));
        self.check_stable(n);
    }

    /// §2.1: record a CHECKPOINT; a checkpoint is stable with `2f+1` matching, own included.
    pub(super) fn on_checkpoint(&mut self, m: Checkpoint, _bytes: &[u8]) {
        if m.stable && m.seq > self.log.last_executed {
            let claims = self.checkpoints.stable_claims.entry(m.replica).or_default();
            claims.entry(m.seq).or_insert(m.digest);
            while claims.len() > CLAIMS_PER_REPLICA {
                claims.pop_first();
            }
        }
        if m.seq <= self.log.last_stable {
            return self.drop_input(DropReason::Stale);
        }
        if !m.seq.is_multiple_of(self.config.checkpoint_interval) {
            return self.drop_input(DropReason::Invalid);
        }
        if m.seq <= self.log.last_stable + self.config.log_window {
            self.checkpoints
                .votes
                .entry(m.seq)
                .or_default()
                .entry(m.replica)
                .or_insert(m.digest);
            self.check_stable(m.seq);
        }
        self.check_lagging();
    }

    fn check_stable(&mut self, seq: Seq) {
        let Some(&own) = self.checkpoints.own.get(&seq) else {
            return;
        };
        let matching = self
            .checkpoints
            .votes
            .get(&seq)
            .map_or(0, |v| v.values().filter(|&&d| d == own).count());
        let quorum = if self.mutated(M::StableCheckpointWeak) {
            self.config.quorum() - 1
        } else {
            self.config.quorum()
        };
        if matching + 1 >= quorum && seq > self.log.last_stable {
            self.mark_stable(seq, StableVia::Quorum);
        }
    }

    /// The checkpoint at `seq` is stable: advance `h`, discard what it covers (§2.2).
    pub(super) fn mark_stable(&mut self, seq: Seq, via: StableVia) {
        let Some(&d) = self.checkpoints.own.get(&seq) else {
            return;
        };
        self.log.last_stable = seq;
        self.log.slots = self.log.slots.split_off(&(seq + 1));
        self.checkpoints.own = self.checkpoints.own.split_off(&seq);
        self.checkpoints.votes = self.checkpoints.votes.split_off(&(seq + 1));
        // Checkpoints lent to a lagging replica's fetch stay a while (state_transfer.rs).
        let keep = self.keep_checkpoints_from(seq);
        self.service.discard_checkpoints_below(keep);
        self.lib.discard_checkpoints_below(keep);
        self.storage.durable.gc(seq);
        self.store_checkpoint(seq, d);
        self.log.executed = self.log.executed.split_off(&(seq + 1));
        let frame = self.encode(
            &Message::Checkpoint(Checkpoint {
                seq,
                digest: d,
                replica: self.me,
                stable: true,
            }),
            super::AuthChoice::Authenticator,
        );
        self.checkpoints.stable_frame = Some(frame);
        self.collect_garbage();
        self.stats.checkpoints_stable += 1;
        self.event(Event::CheckpointStable {
            seq,
            digest: d,
            via,
        });
        self.try_send_pre_prepare();
    }

    /// Drops batch bodies no log entry references and request bodies already executed that
    /// no remaining batch needs (§2.2).
    fn collect_garbage(&mut self) {
        self.prune_missing_batches();
        let mut live: BTreeSet<Digest> = BTreeSet::new();
        for slot in self.log.slots.values() {
            if let Some(a) = &slot.pre_prepare {
                live.insert(a.digest);
            }
            if let Some(u) = &slot.unverified {
                live.insert(u.digest);
            }
            live.extend(slot.pp_info.keys().copied());
        }
        live.extend(self.log.executed.values().copied());
        live.extend(self.log.missing_batches.iter().copied());
        live.extend(self.foreign.digests());
        self.log.batches.retain(|d, _| live.contains(d));
        let needed: BTreeSet<Digest> = self
            .log
            .batches
            .values()
            .flat_map(|b| b.big.iter().copied())
            .collect();
        let lib = &self.lib;
        self.requests.store.retain(|d, r| {
            let executed =
                super::reply_cache::last(lib, r.client).is_some_and(|(rid, _)| rid >= r.rid);
            !executed || needed.contains(d)
        });
    }

    /// Forgets missing batch bodies that no log slot waits for any more: their slot was
    /// garbage-collected (a stable checkpoint or a state transfer overtook it) or cleared by a
    /// view change. Nobody would ever send them, and STATUS asks for a bounded number
    /// (`MISSING_MAX`), so stale digests would crowd out the ones a slot really needs and
    /// stall it for ever (simulator: crash 45, a restarted primary stuck behind 64 stale
    /// digests of slots below the checkpoint it fetched).
    pub(super) fn prune_missing_batches(&mut self) {
        let wanted: BTreeSet<Digest> = self
            .log
            .slots
            .values()
            .filter_map(|s| s.pre_prepare.as_ref().map(|a| a.digest))
            .chain(self.foreign.digests())
            .collect();
        self.log.missing_batches.retain(|d| wanted.contains(d));
    }

    /// §2.1 lagging replica: `f+1` replicas claim the same stable checkpoint above what we
    /// executed, so the log entries we miss may be gone: fetch the state.
    pub(super) fn check_lagging(&mut self) {
        let mut counts: BTreeMap<(Seq, Digest), usize> = BTreeMap::new();
        for claims in self.checkpoints.stable_claims.values() {
            for (&s, &d) in claims.range(self.log.last_executed + 1..) {
                *counts.entry((s, d)).or_insert(0) += 1;
            }
        }
        let weak = if self.mutated(M::TrustOneStableClaim) {
            1
        } else {
            self.config.weak()
        };
        if let Some((&(s, d), _)) = counts.iter().rev().find(|(_, &c)| c >= weak) {
            self.start_fetch(s, d);
        }
    }
}
