//! The storage boundary: a partitioned, checkpointed map from byte keys to byte values.
//!
//! The file service ([`crate::FileService`]) keeps all of its replicated state in a [`Store`]
//! and nowhere else, so the checkpoint, rollback, digest and state-transfer methods of the
//! `Service` trait are the store's. Backends:
//!
//! * [`MemStore`]: everything in memory. Used by tests and the simulator.
//! * [`LogStore`]: data on disk as a log of what changed, the index in memory, checkpoints
//!   as undo logs of places in the log (see its module docs).
//!   writes staged in memory until the next checkpoint (see its module docs).
//!
//! **Placement.** The partition of a key is its first [`PLACEMENT_BYTES`] bytes read as a
//! big-endian `u64`, modulo the partition count ([`partition_of`]). The service chooses
//! those bytes (a hash of the object the record belongs to, see `crate::key`), so records
//! that are scanned together (one directory's entries) share a partition and can be listed in
//! key order with [`Store::range`], while a large file's blocks spread over all partitions.
//!
//! **Digests.** A partition's digest is the AdHASH sum of its leaves, exactly as
//! [`byzfs_bft::state`] computes it (same leaf hash, same 4096-bit sum, same partition
//! digest), maintained incrementally: a write costs O(1) hash work.
//!
//! **Atomicity.** [`Store::apply`] applies one operation's whole write set or nothing, so an
//! operation that fails half-way (a local disk error) leaves no partial effect.

use byzfs_bft::service::DiskWork;
use byzfs_bft::state::{leaf_hash, partition_digest, Sum};
use byzfs_bft::{Digest, Seq};
use serde::{Serialize, Serializer};
use std::collections::BTreeMap;

mod log;
mod mem;
mod txn;

pub use log::{
    DirMedium, LogCounters, LogStore, Medium, MemMedium, FORMAT as LOG_FORMAT,
    SEGMENT_BYTES as LOG_SEGMENT_BYTES,
};
pub use mem::MemStore;
pub use txn::{ReadLog, Txn};

/// Number of leading key bytes that decide a key's partition.
pub const PLACEMENT_BYTES: usize = 8;

/// The partition of `key` among `parts` partitions: its first [`PLACEMENT_BYTES`] bytes as a
/// big-endian `u64`, modulo `parts` (shorter keys are zero-padded; `parts = 0` counts as 1).
pub fn partition_of(key: &[u8], parts: u32) -> u32 {
    let mut b = [0u8; PLACEMENT_BYTES];
    let n = key.len().min(PLACEMENT_BYTES);
    b[..n].copy_from_slice(&key[..n]);
    // The remainder is below `parts`, a `u32`.
    (u64::from_be_bytes(b) % u64::from(parts.max(1))) as u32
}

/// Key-value pairs returned by a range scan, in key order.
pub type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// One operation's writes: key → new value (`None` = delete), applied atomically.
pub type WriteSet = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// A failure of a replica's local storage. Never deterministic across replicas, so never
/// turned into a replicated result (see [`crate::FileService`] for what happens instead).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The local disk is full.
    #[error("local store full")]
    Full,
    /// Any other local I/O failure.
    #[error("local store I/O error: {0}")]
    Io(String),
}

/// Partitioned key-value storage with copy-on-write checkpoints, rollback, incremental
/// per-partition digests and per-partition export/import (docs/PROTOCOL.md §2.3–2.4).
///
/// Every method is deterministic in the sequence of calls: two stores fed the same calls have
/// the same digests and content. `checkpoint`, `rollback`, `discard_checkpoints_below` and
/// `finish_import` cost O(changes) plus O(partitions). A disk backend that fails inside them
/// cannot continue consistently: it records the failure ([`Store::failure`]) and the driver
/// stops the replica (it then counts as one of the `f` faults and recovers from its log and
/// by state transfer); reads and [`Store::apply`] report failures.
pub trait Store {
    /// A failure after which this store cannot continue consistently, or `None`.
    fn failure(&self) -> Option<String> {
        None
    }

    /// Number of partitions (constant).
    fn partition_count(&self) -> u32;

    /// The live value of `key`.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;

    /// Live entries with `start <= key < end`, in key order, at most `limit` of them.
    /// `start` and `end` must share their placement bytes (one partition is scanned).
    fn range(&self, start: &[u8], end: &[u8], limit: usize) -> Result<Entries, StoreError>;

    /// Applies `writes` atomically: all of them, or (on error) none.
    fn apply(&mut self, writes: WriteSet) -> Result<(), StoreError>;

    /// Digests of the live partitions.
    fn current_digests(&self) -> Vec<Digest>;

    /// Records a checkpoint of the live state at `seq` (replacing any held at `>= seq`) and
    /// returns its partition digests.
    fn checkpoint(&mut self, seq: Seq) -> Vec<Digest>;

    /// Partition digests of held checkpoint `seq`.
    fn checkpoint_digests(&self, seq: Seq) -> Option<Vec<Digest>>;

    /// Sequence number of the most recent held checkpoint.
    fn latest_checkpoint(&self) -> Option<Seq>;

    /// Forgets checkpoints older than `seq`.
    fn discard_checkpoints_below(&mut self, seq: Seq);

    /// Restores the latest checkpoint (which stays held) and returns its sequence number;
    /// `None` and no change if none is held.
    fn rollback(&mut self) -> Option<Seq>;

    /// Partition `part` as of held checkpoint `seq`: postcard of `Vec<(Vec<u8>, Vec<u8>)>`
    /// sorted by key. `None` if not held or out of range.
    fn export_partition(&self, seq: Seq, part: u32) -> Option<Vec<u8>>;

    /// Replaces live partition `part` with `data` if it decodes canonically (sorted unique
    /// keys, all of partition `part`, no trailing bytes) and its digest is `expected`.
    /// Recorded like ordinary writes, so held checkpoints stay exact. On `false` nothing
    /// changed.
    fn import_partition(&mut self, part: u32, data: &[u8], expected: Digest) -> bool;

    /// Ends a state transfer: drops every checkpoint and records the live state as `seq`.
    fn finish_import(&mut self, seq: Seq) -> Vec<Digest>;

    /// Whether the store keeps its state durably for its owner to reopen
    /// (`LogStore::open_persistent`). Default: no.
    fn persists(&self) -> bool {
        false
    }

    /// Begins to make the state durable for the owner's record of checkpoint `stored`
    /// (`LogStore::persist`): durable once the work returned has run. Default: nothing to
    /// do.
    #[must_use = "the work must run, and be reported, before the record it guards"]
    fn persist(&mut self, _stored: Seq) -> Result<Option<DiskWork>, StoreError> {
        Ok(None)
    }

    /// The oldest work handed out ran (`LogStore::work_done`). Default: nothing to do.
    #[must_use = "the work must run, and be reported, before the record it guards"]
    fn work_done(&mut self) -> Result<Option<DiskWork>, StoreError> {
        Ok(None)
    }

    /// The owner's record of checkpoint `stored` is durable (`LogStore::recorded`). Default:
    /// nothing to do.
    #[must_use = "the work must run, and be reported, before the record it guards"]
    fn recorded(&mut self, _stored: Seq) -> Result<Option<DiskWork>, StoreError> {
        Ok(None)
    }

    /// What the store wrote since it was opened, as named totals (`LogStore::counters`):
    /// shown by `byzfs status`, exported to Prometheus, and divided per operation by the
    /// file-system benchmarks. Default: none (nothing is written).
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// Returns a reopened store to held checkpoint `seq` (`LogStore::reopen_at`).
    /// Default: an error (nothing is kept across a restart).
    fn reopen_at(&mut self, seq: Seq) -> Result<Vec<Digest>, StoreError> {
        Err(StoreError::Io(format!(
            "this store keeps nothing across a restart (asked for checkpoint {seq})"
        )))
    }
}

/// Serializes a byte string as postcard's `Vec<u8>` encoding, without one call per byte.
struct RawBytes<'a>(&'a [u8]);

impl Serialize for RawBytes<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

/// The export encoding of a partition's sorted entries: postcard of
/// `Vec<(Vec<u8>, Vec<u8>)>`.
pub(crate) fn encode_partition<'a>(
    items: impl Iterator<Item = (&'a [u8], &'a [u8])>,
) -> Option<Vec<u8>> {
    let items: Vec<(RawBytes<'_>, RawBytes<'_>)> =
        items.map(|(k, v)| (RawBytes(k), RawBytes(v))).collect();
    postcard::to_allocvec(&items).ok()
}

/// Borrowed entries of a decoded partition.
pub(crate) type Items<'a> = Vec<(&'a [u8], &'a [u8])>;

/// Decodes an exported partition and checks it: no trailing bytes, keys strictly increasing,
/// every key of partition `part` (of `parts`), and digest `expected`. Returns the entries.
pub(crate) fn verify_partition(
    data: &[u8],
    part: u32,
    parts: u32,
    expected: Digest,
) -> Option<Items<'_>> {
    if part >= parts {
        return None;
    }
    let (items, rest) = postcard::take_from_bytes::<Vec<(&[u8], &[u8])>>(data).ok()?;
    if !rest.is_empty() {
        return None;
    }
    let mut sum = Sum::ZERO;
    let mut prev: Option<&[u8]> = None;
    for (k, v) in &items {
        if prev.is_some_and(|pk| pk >= *k) || partition_of(k, parts) != part {
            return None;
        }
        prev = Some(k);
        sum.add(&leaf_hash(k, v));
    }
    (partition_digest(part, &sum) == expected).then_some(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_is_big_endian_prefix() {
        assert_eq!(partition_of(&[0, 0, 0, 0, 0, 0, 0, 5, 9, 9], 4096), 5);
        assert_eq!(partition_of(&[0, 0, 0, 0, 0, 0, 16, 1], 4096), 1);
        assert_eq!(partition_of(&[], 7), 0);
        assert_eq!(partition_of(&[0xff; 8], 0), 0);
    }
}
