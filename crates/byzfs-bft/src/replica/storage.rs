//! What a replica makes durable through its driver (docs/PROTOCOL.md §3.7): the promises it
//! persists and, when the driver keeps the state on disk, the batches and checkpoint images
//! it stores.

use super::durable::DurableLog;
use super::Replica;
use crate::action::{Action, CheckpointImage, PersistRecord, StoreRecord};
use crate::crypto::Digest;
use crate::ids::Seq;
use crate::service::Service;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The promises, and what of the state was stored.
#[derive(Clone, Debug, Default)]
pub(crate) struct Storage {
    /// Durable promises (what survives a restart with disk).
    pub durable: DurableLog,
    /// Whether the driver keeps the state on disk: emit [`StoreRecord`]s and `Executed`
    /// records ([`Replica::set_store_state`]).
    pub store_state: bool,
    /// Batches already stored, with the highest sequence number stored for each.
    pub batches: BTreeMap<Digest, Seq>,
    /// Partition digests (service, then library) of the last stored checkpoint image.
    pub parts: Vec<Digest>,
    /// The stable checkpoint the driver's record names, durably
    /// ([`Replica::checkpoint_recorded`]): with the state stored, the log window this
    /// replica votes in starts there, so that every vote it made durable is in the window
    /// of the replica a restart rebuilds (docs/PROTOCOL.md §2.7).
    pub recorded: Seq,
    /// The last checkpoint this replica installed by state transfer while the state is
    /// stored by a service that keeps its own: nothing past it executes until the record
    /// of it lands, since the write-ahead log holds none of the batches it covers
    /// (docs/PROTOCOL.md §2.7).
    pub transferred: Seq,
}

impl<S: Service> Replica<S> {
    /// For the driver: its record of stable checkpoint `seq` (the
    /// [`StoreRecord::Checkpoint`] it was given) is durable. Until then the replica accepts
    /// and votes for no slot past the previously recorded checkpoint's log window
    /// (docs/PROTOCOL.md §2.7): a driver that delays the record (to let the service's
    /// sync run off its event loop) must call this when the record lands. Frames held above
    /// the window are handled now that it moved.
    pub fn checkpoint_recorded(&mut self, seq: Seq) {
        if seq <= self.storage.recorded {
            return;
        }
        let before = self.window_base();
        let waited = self.awaits_transfer_record();
        self.storage.recorded = seq;
        if self.window_base() > before {
            self.handle_ahead();
            self.try_send_pre_prepare();
        }
        if waited && !self.awaits_transfer_record() {
            self.execute_committed();
            self.try_execute_tentative();
        }
    }

    /// Whether execution waits for the record of a transferred checkpoint (§2.7): until it
    /// lands, a crash restarts this replica from the checkpoint recorded before, and the
    /// batches between the two are in no log of its own to re-execute. A batch executed on
    /// top of the transferred state meanwhile would let its CHECKPOINT and replies claim a
    /// state the replica cannot return to (simulator, `fs-disk-transfer-power-cuts` seed
    /// 2579: after a crash of every replica no checkpoint had `f+1` holders).
    pub(super) fn awaits_transfer_record(&self) -> bool {
        self.storage.recorded < self.storage.transferred
            && !self.mutated(super::M::ExecuteBeforeTransferRecorded)
    }

    /// Where the log window this replica votes in starts: its stable checkpoint, or, when
    /// the state is stored by a service that keeps its own, the one its driver recorded if
    /// that is older (§2.7). A driver records any other service's checkpoint in the drain
    /// that stores it, before that drain's sends, so its window needs no wait.
    pub(super) fn window_base(&self) -> Seq {
        if self.storage.store_state && self.service.persists_state() {
            self.log.last_stable.min(self.storage.recorded)
        } else {
            self.log.last_stable
        }
    }

    /// Records a promise and emits it; the body of a batch it votes for is stored with it.
    pub(super) fn persist(&mut self, rec: PersistRecord) {
        self.storage.durable.record(rec);
        if let PersistRecord::Prepared { seq, digest, .. }
        | PersistRecord::Proposed { seq, digest, .. }
        | PersistRecord::Voted { seq, digest, .. }
        | PersistRecord::Committed { seq, digest, .. } = rec
        {
            // The body of what we vote for goes to disk with the vote: after a crash of every
            // replica, the promise alone (a digest) could never be executed. A COMMIT is
            // usually the second vote for its batch (stored already, so this is a no-op),
            // but the first of a backup that abstains from PREPAREs (`abstains`).
            self.store_batch(seq, digest);
        }
        self.out.push_back(Action::Persist(rec));
    }

    /// Stores the body of batch `digest` (at `seq`) if the state is stored, the body and its
    /// big requests are held, and it was not stored at `seq` or above already. A body not
    /// complete yet is stored when it executes.
    pub(super) fn store_batch(&mut self, seq: Seq, digest: Digest) {
        if !self.storage.store_state || self.storage.batches.get(&digest).is_some_and(|&s| s >= seq)
        {
            return;
        }
        let Some(body) = self.log.batches.get(&digest).cloned() else {
            return;
        };
        let big: Vec<Arc<[u8]>> = body
            .big
            .iter()
            .filter_map(|d| self.requests.store.get(d).map(|r| r.frame.clone()))
            .collect();
        if big.len() != body.big.len() {
            return;
        }
        self.storage.batches.insert(digest, seq);
        self.out.push_back(Action::Store(StoreRecord::Batch {
            seq,
            digest,
            body,
            big,
        }));
    }

    /// Stores stable checkpoint `seq` (digest `d`): the partitions changed since the last
    /// stored image (only the digests of a service that persists its own state). Called
    /// once the checkpoint is stable, so it is held by the service.
    pub(super) fn store_checkpoint(&mut self, seq: Seq, d: Digest) {
        if !self.storage.store_state {
            return;
        }
        let (Some(mut digests), Some(lib)) = (
            self.service.checkpoint_partition_digests(seq),
            self.lib.checkpoint_digests(seq),
        ) else {
            debug_assert!(false, "stable checkpoint {seq} not held");
            return;
        };
        let svc = digests.len();
        digests.extend(lib);
        let persists = self.service.persists_state();
        let mut changed = Vec::new();
        for (i, pd) in digests.iter().enumerate() {
            if self.storage.parts.get(i) == Some(pd) {
                continue;
            }
            // `i` indexes a partition list built from two `u32` counts.
            let data = if i < svc && persists {
                // The service keeps its own state: its digest suffices here.
                Some(Vec::new())
            } else if i < svc {
                self.service.export_partition(seq, i as u32)
            } else {
                self.lib.export_partition(seq, (i - svc) as u32)
            };
            let Some(data) = data else {
                debug_assert!(false, "stable checkpoint {seq} cannot export partition {i}");
                return;
            };
            changed.push((i as u32, *pd, data));
        }
        let partitions = digests.len() as u32;
        self.storage.parts = digests;
        self.storage.batches.retain(|_, s| *s > seq);
        self.out
            .push_back(Action::Store(StoreRecord::Checkpoint(Arc::new(
                CheckpointImage {
                    seq,
                    digest: d,
                    partitions,
                    changed,
                },
            ))));
    }
}
