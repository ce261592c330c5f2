//! The storage boundary: a partitioned, checkpointed map from byte keys to byte values.
//!
//! The file service ([`crate::FileService`]) keeps all of its replicated state in a [`Store`]
//! and nowhere else, so the checkpoint, rollback, digest and state-transfer methods of the
//! `Service` trait are the store's. Backends:
//!
//! * [`MemStore`]: everything in memory. Used by tests and the simulator.
//! * a redb backend (data on disk, checkpoints kept as undo records in redb) is the next
//!   step; it implements this same trait, so it is a drop-in (see the crate docs).
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

use byzfs_bft::{Digest, Seq};
use std::collections::BTreeMap;

mod mem;
mod txn;

pub use mem::MemStore;
pub use txn::Txn;

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
/// per-partition digests and per-partition export/import (PROTOCOL.md §2.3–2.4).
///
/// Every method is deterministic in the sequence of calls: two stores fed the same calls have
/// the same digests and content. `checkpoint`, `rollback`, `discard_checkpoints_below` and
/// `finish_import` cost O(changes) plus O(partitions). A disk backend that fails inside them
/// cannot continue consistently and stops the replica (it then counts as one of the `f`
/// faults and recovers by state transfer); reads and [`Store::apply`] report failures.
pub trait Store {
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
