//! Catching up on batches committed in a view this replica has left (docs/PROTOCOL.md §3.8).
//!
//! A replica whose view-change timer fired alone sits in a view `v' > v` that the others
//! never join while `v` runs well. PBFT lets it back only through the next stable
//! checkpoint (state transfer, §2.4), and in a cluster that goes quiet no checkpoint comes:
//! it stayed behind for ever (`crates/byzfs/tests/faults.rs`, the Andrew kill test, once
//! clients stopped waiting for it). Its VIEW-CHANGE for `v'` promised not to vote in `v`,
//! so it may not take part in `v`'s ordering; but it may *execute* a batch `v` committed.
//! `2f+1` COMMITs for `(v, n, d)` from distinct replicas include `f+1` correct ones, each
//! sent after its own prepared certificate: `d` is committed at `n` in `v`, and every later
//! NEW-VIEW picks `d` at `n` (§3.4). Running `d` at `n` is what every correct replica does.
//!
//! So COMMITs of a view other than our installed one, for slots just above what we
//! executed, are kept here ([`ForeignCommits`]); peers that see in STATUS a replica in a
//! higher view behind them resend theirs (`status.rs`), and the batch body comes the usual
//! way (`Status::missing_batches`). Nothing here makes this replica vote.

use super::{Replica, M};
use crate::action::{DropReason, Event};
use crate::batch::null_digest;
use crate::crypto::Digest;
use crate::ids::{ReplicaId, Seq, View};
use crate::message::Commit;
use crate::service::Service;
use std::collections::{BTreeMap, BTreeSet};

/// COMMITs of views other than our installed one, per slot: each replica's of the highest
/// view seen. Bounded by the log window (slots) times the number of replicas.
#[derive(Clone, Debug, Default)]
pub(crate) struct ForeignCommits {
    by_slot: BTreeMap<Seq, BTreeMap<ReplicaId, (View, Digest)>>,
}

impl ForeignCommits {
    /// Records `replica`'s COMMIT for `(view, seq, digest)`, unless it sent one of a
    /// higher view for `seq` (a correct replica's later COMMITs name the same digest).
    pub(crate) fn note(&mut self, seq: Seq, replica: ReplicaId, view: View, digest: Digest) {
        let slot = self.by_slot.entry(seq).or_default();
        let e = slot.entry(replica).or_insert((view, digest));
        if e.0 < view {
            *e = (view, digest);
        }
    }

    /// The digest `quorum` replicas sent COMMIT for at `seq` in one view, if any.
    pub(crate) fn certified(&self, seq: Seq, quorum: usize) -> Option<(View, Digest)> {
        let slot = self.by_slot.get(&seq)?;
        let mut counts: BTreeMap<(View, Digest), usize> = BTreeMap::new();
        for vd in slot.values() {
            *counts.entry(*vd).or_insert(0) += 1;
        }
        counts
            .into_iter()
            .find(|(_, c)| *c >= quorum)
            .map(|(vd, _)| vd)
    }

    /// Forgets the slots at or below `seq` (executed, or overtaken by a checkpoint).
    pub(crate) fn forget_through(&mut self, seq: Seq) {
        self.by_slot = self.by_slot.split_off(&(seq + 1));
    }

    /// Every digest some slot holds a COMMIT for (bodies worth keeping).
    pub(crate) fn digests(&self) -> BTreeSet<Digest> {
        self.by_slot
            .values()
            .flat_map(|s| s.values().map(|(_, d)| *d))
            .collect()
    }
}

impl<S: Service> Replica<S> {
    /// A COMMIT the normal case cannot use (another view, or ours before its NEW-VIEW):
    /// kept if it is for a slot within a log window above what we executed, and may let
    /// the next slot run.
    pub(super) fn on_foreign_commit(&mut self, c: Commit) {
        let above = c.seq > self.log.last_executed.max(self.log.last_stable);
        if !above
            || c.seq > self.log.last_executed + self.config.log_window
            || c.view > self.view.current
        {
            return self.drop_input(DropReason::OutOfWindow);
        }
        self.foreign.note(c.seq, c.replica, c.view, c.digest);
        self.execute_committed();
    }

    /// The batch `2f+1` foreign COMMITs certify at `n`, if its body is here to run; asks for
    /// a missing body. Only when no tentative execution is outstanding: a tentative batch
    /// at `n` is of our current view and commits there.
    pub(super) fn foreign_committed(&mut self, n: Seq) -> Option<Digest> {
        if self.log.last_tentative != self.log.last_executed {
            return None;
        }
        let quorum = if self.mutated(M::ForeignCommitQuorumF1) {
            self.f() + 1
        } else {
            self.config.quorum()
        };
        let (view, d) = self.foreign.certified(n, quorum)?;
        if d == null_digest() {
            self.log.batches.entry(d).or_default();
        }
        if !self.log.batches.contains_key(&d) {
            self.log.missing_batches.insert(d);
            return None;
        }
        if !self.batch_complete(d) {
            return None;
        }
        self.event(Event::CommittedLocal {
            view,
            seq: n,
            digest: d,
        });
        self.stats.batches_caught_up += 1;
        Some(d)
    }

    /// Big request bodies a foreign-certified batch we hold names and we lack.
    pub(super) fn foreign_missing_bodies(&self) -> BTreeSet<Digest> {
        self.foreign_bodies()
            .into_iter()
            .filter(|r| !self.requests.store.contains_key(r))
            .collect()
    }

    /// Big request bodies a foreign-certified batch we hold names, held or not: such a body
    /// counts as in the log (`body_in_log`) before and after it arrives, so a client's share
    /// of the request store does not change when it does (simulator: fs-crash 2819, 8495
    /// and fs-disk-total-crash 233, checker `request-store`).
    pub(super) fn foreign_bodies(&self) -> BTreeSet<Digest> {
        let quorum = self.config.quorum();
        let n = self.log.last_executed + 1;
        let Some((_, d)) = self.foreign.certified(n, quorum) else {
            return BTreeSet::new();
        };
        self.log
            .batches
            .get(&d)
            .map(|b| b.big.iter().copied().collect())
            .unwrap_or_default()
    }
}
