//! What a replica promised, kept so a restart never contradicts it (docs/PROTOCOL.md §3.6 #11):
//! the highest view entered and the votes sent above the last stable checkpoint. The driver
//! persists each [`PersistRecord`] before the sends that follow it, and stores
//! [`StoreRecord`]s (checkpoint images, batch bodies); what it loads back at start is a
//! [`DurableState`]. The restart rules that rebuild a replica from it are in
//! [`super::restart`].

use crate::action::{PersistRecord, StoreRecord};
use crate::crypto::Digest;
use crate::ids::{Seq, View};
use crate::message::BatchBody;
use std::collections::BTreeMap;

/// Everything a disk driver loaded for [`crate::Replica::restore`].
#[derive(Clone, Debug, Default)]
pub struct DurableState {
    /// Every stored [`PersistRecord`] (any order; duplicates allowed).
    pub records: Vec<PersistRecord>,
    /// The last stored stable checkpoint, `None` if none was stored (then the replica starts
    /// from the initial state, checkpoint 0).
    pub checkpoint: Option<StoredCheckpoint>,
    /// Stored batch bodies.
    pub batches: Vec<StoredBatch>,
    /// Whether every [`PersistRecord::Proposed`] and [`PersistRecord::Voted`] the replica
    /// wrote is in `records`, as the driver knows: the data directory is new, the last run
    /// stopped cleanly after syncing everything, or (`byzfs-net`) the machine has not
    /// restarted since, so even a killed process's unsynced writes reached the file. If not
    /// (a power cut may have lost some), a replica restored as the primary of its view gives
    /// the view up instead of proposing in it, and any replica sends no new PREPARE in the
    /// view it restarts in at or below its vote horizon ([`PersistRecord::AbstainUpTo`]).
    pub proposals_durable: bool,
}

impl DurableState {
    /// Applies a promise the way a disk driver keeps it (the reference semantics of the
    /// records, used by tests; `byzfs-net`'s redb store implements the same).
    pub fn apply_persist(&mut self, rec: PersistRecord) {
        if !self.records.contains(&rec) {
            self.records.push(rec);
        }
    }

    /// Applies a [`StoreRecord`] the way a disk driver keeps it: the highest `seq` per batch;
    /// checkpoint images merged partition by partition; everything at or below a stored
    /// checkpoint dropped.
    pub fn apply_store(&mut self, rec: &StoreRecord) {
        match rec {
            StoreRecord::Batch {
                seq,
                digest,
                body,
                big,
            } => {
                if let Some(b) = self.batches.iter_mut().find(|b| b.digest == *digest) {
                    b.seq = b.seq.max(*seq);
                } else {
                    self.batches.push(StoredBatch {
                        seq: *seq,
                        digest: *digest,
                        body: BatchBody::clone(body),
                        big: big.iter().map(|f| f.to_vec()).collect(),
                    });
                }
            }
            StoreRecord::Checkpoint(img) => {
                let mut parts = self.checkpoint.take().map(|c| c.parts).unwrap_or_default();
                parts.resize(img.partitions as usize, (Digest::default(), Vec::new()));
                for (i, d, data) in &img.changed {
                    if let Some(p) = parts.get_mut(*i as usize) {
                        *p = (*d, data.clone());
                    }
                }
                self.checkpoint = Some(StoredCheckpoint {
                    seq: img.seq,
                    digest: img.digest,
                    parts,
                });
                self.records
                    .retain(|r| record_seq(*r).is_none_or(|s| s > img.seq));
                self.batches.retain(|b| b.seq > img.seq);
            }
        }
    }
}

/// The sequence number a record is about (`None` for `View`).
pub fn record_seq(rec: PersistRecord) -> Option<Seq> {
    match rec {
        // A horizon bounds votes above the checkpoint too: a checkpoint never drops it.
        PersistRecord::View(_)
        | PersistRecord::Abstain(_)
        | PersistRecord::AbstainUpTo { .. }
        | PersistRecord::VoteHorizon(_) => None,
        PersistRecord::Prepared { seq, .. }
        | PersistRecord::Proposed { seq, .. }
        | PersistRecord::Voted { seq, .. }
        | PersistRecord::Committed { seq, .. }
        | PersistRecord::Executed { seq, .. }
        | PersistRecord::Certified { seq, .. } => Some(seq),
    }
}

/// A whole stable checkpoint, as loaded (the driver merged the changed-partition images).
#[derive(Clone, Debug)]
pub struct StoredCheckpoint {
    /// Sequence number.
    pub seq: Seq,
    /// Root digest.
    pub digest: Digest,
    /// Every partition in order (service, then library): its digest and content.
    pub parts: Vec<(Digest, Vec<u8>)>,
}

/// A stored batch body (see [`crate::action::StoreRecord::Batch`]).
#[derive(Clone, Debug)]
pub struct StoredBatch {
    /// Highest sequence number it was stored at.
    pub seq: Seq,
    /// Batch digest.
    pub digest: Digest,
    /// The batch.
    pub body: BatchBody,
    /// Frames of its big requests.
    pub big: Vec<Vec<u8>>,
}

/// Why stored state cannot be restored. The store is corrupt or belongs to another cluster
/// or service: delete the data directory to rejoin through state transfer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RestoreError {
    /// The checkpoint has a different number of partitions than the service.
    #[error("stored checkpoint has {found} partitions, the service has {expected}")]
    PartitionCount {
        /// The service's (plus the library's).
        expected: u32,
        /// The checkpoint's.
        found: u32,
    },
    /// A partition's content does not decode or does not match its digest.
    #[error("stored partition {0} does not match its digest")]
    BadPartition(u32),
    /// The partitions do not add up to the checkpoint's root digest.
    #[error("stored checkpoint {0} does not match its digest")]
    BadCheckpoint(Seq),
    /// A service that persists its own state could not return to the stored checkpoint.
    #[error("the service's own store cannot return to stored checkpoint {seq}: {why}")]
    ServiceState {
        /// The stored checkpoint.
        seq: Seq,
        /// What the service said.
        why: String,
    },
}

/// The durable promises.
#[derive(Clone, Debug, Default)]
pub(crate) struct DurableLog {
    pub view: View,
    pub votes: BTreeMap<Seq, Vec<PersistRecord>>,
    /// The highest checkpoint an installed NEW-VIEW certified above the stable one.
    pub certified: Option<(Seq, Digest)>,
    /// The view it last restarted in from records that may lack votes, and the highest
    /// sequence number those may be at ([`PersistRecord::AbstainUpTo`]).
    pub abstain: Option<(View, Seq)>,
    /// The highest sequence number it may send a PREPARE for
    /// ([`PersistRecord::VoteHorizon`]).
    pub horizon: Seq,
}

impl DurableLog {
    pub fn record(&mut self, rec: PersistRecord) {
        let rec = rec.as_promise();
        match rec {
            PersistRecord::View(v) => self.view = self.view.max(v),
            PersistRecord::Abstain(v) => self.abstain_up_to(v, Seq::MAX),
            PersistRecord::AbstainUpTo { view, seq } => self.abstain_up_to(view, seq),
            PersistRecord::VoteHorizon(seq) => self.horizon = self.horizon.max(seq),
            // Not a promise: `restore` replays it, nothing else needs it.
            PersistRecord::Executed { .. } => {}
            PersistRecord::Certified { seq, digest } => {
                if self.certified.is_none_or(|(s, _)| s < seq) {
                    self.certified = Some((seq, digest));
                }
            }
            PersistRecord::Prepared { seq, .. }
            | PersistRecord::Proposed { seq, .. }
            | PersistRecord::Voted { seq, .. }
            | PersistRecord::Committed { seq, .. } => {
                let e = self.votes.entry(seq).or_default();
                if !e.contains(&rec) {
                    e.push(rec);
                }
            }
        }
    }

    /// Merges an abstention: only the highest view's counts, and in it the highest bound.
    fn abstain_up_to(&mut self, view: View, seq: Seq) {
        self.abstain = match self.abstain {
            Some((v, s)) if v > view || (v == view && s >= seq) => Some((v, s)),
            _ => Some((view, seq)),
        };
    }

    pub fn gc(&mut self, stable: Seq) {
        self.votes = self.votes.split_off(&(stable + 1));
        if self.certified.is_some_and(|(s, _)| s <= stable) {
            self.certified = None;
        }
    }
}
