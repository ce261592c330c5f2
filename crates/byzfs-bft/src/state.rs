//! Partitioned, checkpointed key-value state with incremental digests (docs/PROTOCOL.md §2.3, §2.4).
//!
//! [`PartitionedState`] is the storage a [`Service`](crate::service::Service) can build on: a
//! byte-string map split into a fixed number of partitions, each with an AdHASH-style digest
//! that is updated in O(1) per write, plus copy-on-write checkpoints kept as undo logs.
//!
//! * **Partition of a key:** the first 4 bytes of `BLAKE3(key)` as a little-endian `u32`,
//!   modulo the partition count. Stable across versions, so replicas agree.
//! * **Leaf hash:** `BLAKE3-XOF` in derive-key mode (context [`LEAF_CONTEXT`]) over
//!   `len(key) as u64 LE ‖ key ‖ value`, stretched to [`SUM_BYTES`] bytes.
//! * **Partition sum:** the sum of its leaf hashes modulo `2^(8·SUM_BYTES)` (little-endian,
//!   add with carry). Writing a key subtracts the old leaf hash and adds the new one —
//!   lazily: the first write of a key after a digest was taken records the value the sum
//!   counts for it, and the next digest rehashes each such key once. A key written on every
//!   request (a counter, the reply cache) costs two leaf hashes per checkpoint interval, not
//!   per write (measured: about 10% of a replica's CPU per null operation, `bench throughput`).
//! * **Partition digest:** `Digest::of_parts(&[b"byzfs partition v1", &index.to_le_bytes(), &sum])`
//!   with `index` a `u32`.
//!
//! **Why the sum is 4096 bits, not 256.** A Byzantine replier in state transfer may send any
//! partition content; the fetcher only checks that its sum matches the digest `f+1` replicas
//! vouched for. Finding leaves that add up to a given value modulo `2^n` is a generalized
//! birthday problem that Wagner's k-tree algorithm solves in about `2^(2·sqrt(n))` work: about
//! `2^32` for `n = 256`, which is practical, but about `2^127` for `n = 4096`. Each leaf costs
//! one extra 512-byte XOF output and a 64-limb addition, still O(1).
//!
//! **Checkpoints** are copy-on-write: each held checkpoint has an undo log recording, for every
//! key first modified after it (and before the next checkpoint), the value the key had at the
//! checkpoint (`None` = absent). Taking a checkpoint costs O(partitions); a write costs one
//! undo entry the first time a key changes after the latest checkpoint.

use crate::crypto::Digest;
use crate::ids::Seq;
use serde::{Serialize, Serializer};
use std::collections::BTreeMap;

/// Width of a partition sum in bytes (4096 bits; see the module docs for why).
pub const SUM_BYTES: usize = 512;
const SUM_LIMBS: usize = SUM_BYTES / 8;

/// BLAKE3 derive-key context for leaf hashes (domain separation from every other hash).
pub const LEAF_CONTEXT: &str = "byzfs 2026 partitioned state leaf v1";

/// A partition sum: a `SUM_BYTES`-byte integer, as little-endian 64-bit limbs.
///
/// Public so that services with their own storage (the file service's on-disk store) compute
/// partition digests exactly as this module does.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Sum([u64; SUM_LIMBS]);

impl Sum {
    /// The empty sum (the sum of an empty partition).
    pub const ZERO: Sum = Sum([0; SUM_LIMBS]);

    /// `self += other` modulo `2^(8·SUM_BYTES)`.
    pub fn add(&mut self, other: &Sum) {
        let mut carry = false;
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            let (s1, c1) = a.overflowing_add(*b);
            let (s2, c2) = s1.overflowing_add(u64::from(carry));
            *a = s2;
            carry = c1 || c2;
        }
    }

    /// `self -= other` modulo `2^(8·SUM_BYTES)`.
    pub fn sub(&mut self, other: &Sum) {
        let mut borrow = false;
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            let (d1, b1) = a.overflowing_sub(*b);
            let (d2, b2) = d1.overflowing_sub(u64::from(borrow));
            *a = d2;
            borrow = b1 || b2;
        }
    }

    /// The sum from the `SUM_BYTES` little-endian bytes of [`Sum::to_bytes`] (a disk
    /// backend stores sums this way).
    pub fn from_bytes(bytes: &[u8; SUM_BYTES]) -> Sum {
        let mut limbs = [0u64; SUM_LIMBS];
        for (limb, chunk) in limbs.iter_mut().zip(bytes.chunks_exact(8)) {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            *limb = u64::from_le_bytes(b);
        }
        Sum(limbs)
    }

    /// The sum as `SUM_BYTES` little-endian bytes.
    pub fn to_bytes(&self) -> [u8; SUM_BYTES] {
        let mut out = [0u8; SUM_BYTES];
        for (chunk, limb) in out.chunks_exact_mut(8).zip(self.0.iter()) {
            chunk.copy_from_slice(&limb.to_le_bytes());
        }
        out
    }
}

/// The hash of one leaf, as a summand: [`leaf_sum`] of [`leaf_seed`].
pub fn leaf_hash(key: &[u8], value: &[u8]) -> Sum {
    leaf_sum(&leaf_seed(key, value))
}

/// The 32-byte hash of one leaf from which its summand is expanded ([`leaf_sum`]).
///
/// Apart from the summand so that a store which keeps values on disk can keep this instead
/// of the 512-byte summand (or of the value) for every key, and still take an overwritten
/// or deleted value out of its partition's sum without reading it back.
pub fn leaf_seed(key: &[u8], value: &[u8]) -> [u8; 32] {
    let mut h = blake3::Hasher::new_derive_key(LEAF_CONTEXT);
    h.update(&(key.len() as u64).to_le_bytes());
    h.update(key);
    h.update(value);
    *h.finalize().as_bytes()
}

/// The summand of a leaf whose [`leaf_seed`] is `seed`: `SUM_BYTES` of BLAKE3's output
/// keyed by the seed (an extendable output whose every bit depends on the whole leaf).
pub fn leaf_sum(seed: &[u8; 32]) -> Sum {
    let mut bytes = [0u8; SUM_BYTES];
    blake3::Hasher::new_keyed(seed)
        .update(LEAF_CONTEXT.as_bytes())
        .finalize_xof()
        .fill(&mut bytes);
    let mut limbs = [0u64; SUM_LIMBS];
    for (limb, chunk) in limbs.iter_mut().zip(bytes.chunks_exact(8)) {
        let mut b = [0u8; 8];
        b.copy_from_slice(chunk);
        *limb = u64::from_le_bytes(b);
    }
    Sum(limbs)
}

/// The exposed digest of partition `index` with sum `sum`.
pub fn partition_digest(index: u32, sum: &Sum) -> Digest {
    Digest::of_parts(&[b"byzfs partition v1", &index.to_le_bytes(), &sum.to_bytes()])
}

/// Serializes a byte string with `serialize_bytes`: in postcard this is exactly the encoding
/// of a `Vec<u8>` (varint length, then the bytes), but without one call per byte.
struct RawBytes<'a>(&'a [u8]);

impl Serialize for RawBytes<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

/// One partition of the live state.
#[derive(Clone, Debug, Default)]
struct Partition {
    leaves: BTreeMap<Vec<u8>, Vec<u8>>,
    /// The sum of the leaf hashes, except that each key in `stale` is counted with the value
    /// recorded there (`None` = not counted) instead of its live value.
    sum: Sum,
    /// Keys written since the sum was last settled, with the value `sum` counts for them.
    stale: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

impl Partition {
    /// The exact sum of the live leaves: O(stale keys) leaf hashes.
    fn exact_sum(&self) -> Sum {
        let mut sum = self.sum.clone();
        for (k, counted) in &self.stale {
            let live = self.leaves.get(k);
            if counted.as_ref() == live {
                continue;
            }
            if let Some(v) = counted {
                sum.sub(&leaf_hash(k, v));
            }
            if let Some(v) = live {
                sum.add(&leaf_hash(k, v));
            }
        }
        sum
    }

    /// Folds the stale keys into `sum`.
    fn settle(&mut self) {
        if !self.stale.is_empty() {
            self.sum = self.exact_sum();
            self.stale.clear();
        }
    }
}

/// Notes that `key`, whose live value is `live` (`None` = absent), is about to change: on its
/// first change since the sum was settled, records the value the sum counts for it.
fn touch(stale: &mut BTreeMap<Vec<u8>, Option<Vec<u8>>>, key: &[u8], live: Option<&[u8]>) {
    if !stale.contains_key(key) {
        stale.insert(key.to_vec(), live.map(<[u8]>::to_vec));
    }
}

impl Default for Sum {
    fn default() -> Sum {
        Sum::ZERO
    }
}

/// Undo entries of one partition: key → value at the checkpoint (`None` = absent).
type UndoLog = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// A held checkpoint.
#[derive(Clone, Debug)]
struct Checkpoint {
    seq: Seq,
    digests: Vec<Digest>,
    /// `undo[p]`: for keys of partition `p` modified after this checkpoint and before the next
    /// one, their value at this checkpoint.
    undo: Vec<UndoLog>,
}

/// A key-value map split into a fixed number of digested partitions, with copy-on-write
/// checkpoints, rollback and per-partition export/import for state transfer.
///
/// Deterministic: every output depends only on the sequence of calls.
#[derive(Clone, Debug)]
pub struct PartitionedState {
    parts: Vec<Partition>,
    len: usize,
    /// Held checkpoints, in strictly increasing `seq` order.
    checkpoints: Vec<Checkpoint>,
}

impl PartitionedState {
    /// An empty state with `partitions` partitions (at least 1: a request for 0 gets 1, so the
    /// partition function is always defined).
    pub fn new(partitions: u32) -> Self {
        let p = partitions.max(1);
        PartitionedState {
            parts: vec![Partition::default(); p as usize],
            len: 0,
            checkpoints: Vec::new(),
        }
    }

    /// Number of partitions (constant).
    pub fn partition_count(&self) -> u32 {
        // `new` built `parts` from a `u32`, so the length fits.
        self.parts.len() as u32
    }

    /// The partition `key` belongs to: first 4 bytes of `BLAKE3(key)` as `u32` LE, mod P.
    pub fn partition_of(&self, key: &[u8]) -> u32 {
        let h = blake3::hash(key);
        let b = h.as_bytes();
        u32::from_le_bytes([b[0], b[1], b[2], b[3]]) % self.partition_count()
    }

    /// The live value of `key`.
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        let p = self.partition_of(key) as usize;
        self.parts[p].leaves.get(key).map(Vec::as_slice)
    }

    /// Sets `key` to `value`. O(1): the digest work is deferred to the next digest (one leaf
    /// hash per key written since the latest checkpoint), plus one undo entry on the first change of
    /// `key` since the latest checkpoint.
    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        let p = self.partition_of(&key) as usize;
        let part = &mut self.parts[p];
        match part.leaves.entry(key) {
            std::collections::btree_map::Entry::Occupied(mut e) => {
                if *e.get() == value {
                    return;
                }
                touch(&mut part.stale, e.key(), Some(e.get()));
                let old = std::mem::replace(e.get_mut(), value);
                log_undo(&mut self.checkpoints, p, e.key(), Some(old));
            }
            std::collections::btree_map::Entry::Vacant(e) => {
                touch(&mut part.stale, e.key(), None);
                log_undo(&mut self.checkpoints, p, e.key(), None);
                e.insert(value);
                self.len += 1;
            }
        }
    }

    /// Removes `key` (no-op if absent).
    pub fn delete(&mut self, key: &[u8]) {
        let p = self.partition_of(key) as usize;
        let part = &mut self.parts[p];
        if let Some(old) = part.leaves.remove(key) {
            touch(&mut part.stale, key, Some(&old));
            self.len -= 1;
            log_undo(&mut self.checkpoints, p, key, Some(old));
        }
    }

    /// Number of live keys.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no live keys.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Digests of the live partitions, from the maintained sums: O(partitions), plus one
    /// leaf hash per key written since the latest checkpoint (see the module docs).
    pub fn current_digests(&self) -> Vec<Digest> {
        self.parts
            .iter()
            .enumerate()
            .map(|(i, p)| partition_digest(i as u32, &p.exact_sum()))
            .collect()
    }

    /// Records a checkpoint of the live state at `seq` and returns its partition digests.
    /// O(partitions): the copy-on-write cost was paid by the writes.
    ///
    /// Sequence numbers are expected to increase. If checkpoints at `>= seq` are held they are
    /// first dropped (their undo entries merged into the previous checkpoint, so older
    /// checkpoints stay exact) and replaced by this one.
    pub fn checkpoint(&mut self, seq: Seq) -> Vec<Digest> {
        while self.checkpoints.last().is_some_and(|c| c.seq >= seq) {
            if let Some(dropped) = self.checkpoints.pop() {
                if let Some(prev) = self.checkpoints.last_mut() {
                    merge_undo(prev, dropped.undo);
                }
            }
        }
        for part in &mut self.parts {
            part.settle();
        }
        let digests = self.current_digests();
        self.checkpoints.push(Checkpoint {
            seq,
            digests: digests.clone(),
            undo: vec![UndoLog::new(); self.parts.len()],
        });
        digests
    }

    /// The sequence number of the most recent held checkpoint.
    pub fn latest_checkpoint(&self) -> Option<Seq> {
        self.checkpoints.last().map(|c| c.seq)
    }

    /// Partition digests of held checkpoint `seq`.
    pub fn checkpoint_digests(&self, seq: Seq) -> Option<Vec<Digest>> {
        self.find(seq).map(|i| self.checkpoints[i].digests.clone())
    }

    /// Forgets every checkpoint with sequence number `< seq`. Their undo logs are only needed
    /// to reconstruct those checkpoints themselves, so newer ones stay exact.
    pub fn discard_checkpoints_below(&mut self, seq: Seq) {
        let keep_from = self.checkpoints.partition_point(|c| c.seq < seq);
        self.checkpoints.drain(..keep_from);
    }

    /// Restores the live state to the latest checkpoint (undoing tentative execution) and
    /// returns its sequence number; the checkpoint stays held. `None` (and no change) if no
    /// checkpoint is held. Cost: O(changes since that checkpoint).
    pub fn rollback(&mut self) -> Option<Seq> {
        let n_parts = self.parts.len();
        let cp = self.checkpoints.last_mut()?;
        let seq = cp.seq;
        let undo = std::mem::replace(&mut cp.undo, vec![UndoLog::new(); n_parts]);
        for (p, log) in undo.into_iter().enumerate() {
            for (key, old) in log {
                self.set_unlogged(p, key, old);
            }
        }
        debug_assert_eq!(
            Some(self.current_digests()),
            self.checkpoint_digests(seq),
            "rollback must restore the checkpoint's digests"
        );
        Some(seq)
    }

    /// The content of partition `part` as of held checkpoint `seq`, encoded for transfer as
    /// postcard of `Vec<(Vec<u8>, Vec<u8>)>` sorted by key. `None` if `seq` is not held or
    /// `part` is out of range.
    ///
    /// Built from the live leaves with the undo entries of every checkpoint from the latest
    /// down to `seq` applied, newest first.
    pub fn export_partition(&self, seq: Seq, part: u32) -> Option<Vec<u8>> {
        let p = part as usize;
        let live = &self.parts.get(p)?.leaves;
        let from = self.find(seq)?;
        // Value at `seq` of every key changed since: iterating newest first, older entries
        // overwrite newer ones.
        let mut overrides: BTreeMap<&[u8], Option<&[u8]>> = BTreeMap::new();
        for cp in self.checkpoints[from..].iter().rev() {
            for (k, old) in &cp.undo[p] {
                overrides.insert(k.as_slice(), old.as_deref());
            }
        }
        // Merge the live leaves (minus overridden keys) with the overrides, both sorted.
        let mut items: Vec<(RawBytes<'_>, RawBytes<'_>)> =
            Vec::with_capacity(live.len() + overrides.len());
        let mut live_it = live
            .iter()
            .filter(|(k, _)| !overrides.contains_key(k.as_slice()))
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
            .peekable();
        let mut over_it = overrides
            .iter()
            .filter_map(|(k, v)| v.map(|v| (*k, v)))
            .peekable();
        loop {
            let take_live = match (live_it.peek(), over_it.peek()) {
                (Some(a), Some(b)) => a.0 < b.0,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            let next = if take_live {
                live_it.next()
            } else {
                over_it.next()
            };
            if let Some((k, v)) = next {
                items.push((RawBytes(k), RawBytes(v)));
            }
        }
        postcard::to_allocvec(&items).ok()
    }

    /// Replaces live partition `part` with `data` (as produced by [`Self::export_partition`])
    /// if it decodes canonically (no trailing bytes, keys strictly increasing, every key in
    /// `part`) and its recomputed digest equals `expected`. Returns whether it did; on `false`
    /// nothing changed.
    ///
    /// The replacement is recorded in the latest checkpoint's undo log like ordinary writes,
    /// so held checkpoints and [`Self::rollback`] stay exact.
    pub fn import_partition(&mut self, part: u32, data: &[u8], expected: Digest) -> bool {
        let p = part as usize;
        if p >= self.parts.len() {
            return false;
        }
        let Ok((items, rest)) = postcard::take_from_bytes::<Vec<(&[u8], &[u8])>>(data) else {
            return false;
        };
        if !rest.is_empty() {
            return false;
        }
        let mut sum = Sum::ZERO;
        let mut prev: Option<&[u8]> = None;
        for (k, v) in &items {
            if prev.is_some_and(|pk| pk >= *k) || self.partition_of(k) != part {
                return false;
            }
            prev = Some(k);
            sum.add(&leaf_hash(k, v));
        }
        if partition_digest(part, &sum) != expected {
            return false;
        }
        let new: BTreeMap<Vec<u8>, Vec<u8>> = items
            .into_iter()
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect();
        let new_len = new.len();
        let old = std::mem::replace(&mut self.parts[p].leaves, new);
        let old_len = old.len();
        if !self.checkpoints.is_empty() {
            let new = &self.parts[p].leaves;
            for k in new.keys() {
                if !old.contains_key(k) {
                    log_undo(&mut self.checkpoints, p, k, None);
                }
            }
            for (k, v) in old {
                if new.get(&k) != Some(&v) {
                    log_undo(&mut self.checkpoints, p, &k, Some(v));
                }
            }
        }
        self.parts[p].sum = sum;
        self.parts[p].stale.clear();
        self.len = self.len - old_len + new_len;
        true
    }

    /// Ends a state transfer: the live state is now checkpoint `seq`. Drops every held
    /// checkpoint, records this one, and returns its partition digests.
    pub fn finish_import(&mut self, seq: Seq) -> Vec<Digest> {
        self.checkpoints.clear();
        self.checkpoint(seq)
    }

    /// Index in `checkpoints` of checkpoint `seq`.
    fn find(&self, seq: Seq) -> Option<usize> {
        self.checkpoints.binary_search_by_key(&seq, |c| c.seq).ok()
    }

    /// Sets `key` of partition `p` to `value` (`None` = delete) without undo logging.
    fn set_unlogged(&mut self, p: usize, key: Vec<u8>, value: Option<Vec<u8>>) {
        let part = &mut self.parts[p];
        touch(
            &mut part.stale,
            &key,
            part.leaves.get(&key).map(Vec::as_slice),
        );
        if part.leaves.remove(&key).is_some() {
            self.len -= 1;
        }
        if let Some(v) = value {
            part.leaves.insert(key, v);
            self.len += 1;
        }
    }
}

/// Records `old` as the value of `key` (partition `p`) at the latest checkpoint, unless the
/// key was already modified since (then the recorded value is the right one).
fn log_undo(checkpoints: &mut [Checkpoint], p: usize, key: &[u8], old: Option<Vec<u8>>) {
    if let Some(cp) = checkpoints.last_mut() {
        if !cp.undo[p].contains_key(key) {
            cp.undo[p].insert(key.to_vec(), old);
        }
    }
}

/// Folds the undo log of a dropped checkpoint into the previous one: keys the previous
/// checkpoint has not logged had, at the previous checkpoint, the value they had at the
/// dropped one.
fn merge_undo(prev: &mut Checkpoint, dropped: Vec<UndoLog>) {
    for (mine, theirs) in prev.undo.iter_mut().zip(dropped) {
        for (k, v) in theirs {
            mine.entry(k).or_insert(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn kv(i: u32) -> (Vec<u8>, Vec<u8>) {
        (
            format!("key{i}").into_bytes(),
            format!("value{i}").into_bytes(),
        )
    }

    /// A fresh state holding exactly `model`.
    fn from_model(parts: u32, model: &BTreeMap<Vec<u8>, Vec<u8>>) -> PartitionedState {
        let mut s = PartitionedState::new(parts);
        for (k, v) in model {
            s.put(k.clone(), v.clone());
        }
        s
    }

    /// Decodes an exported partition.
    fn decode(data: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        postcard::from_bytes(data).expect("export decodes")
    }

    #[test]
    fn sum_add_sub_carry() {
        let mut a = Sum::ZERO;
        let mut one = Sum::ZERO;
        one.0[0] = 1;
        a.sub(&one);
        assert!(
            a.0.iter().all(|&l| l == u64::MAX),
            "0 - 1 wraps to all ones"
        );
        a.add(&one);
        assert_eq!(a, Sum::ZERO, "carry propagates through every limb");
    }

    #[test]
    fn digest_independent_of_insertion_order() {
        let mut a = PartitionedState::new(8);
        let mut b = PartitionedState::new(8);
        for i in 0..50 {
            let (k, v) = kv(i);
            a.put(k, v);
        }
        for i in (0..50).rev() {
            let (k, v) = kv(i);
            b.put(k, v);
        }
        assert_eq!(a.current_digests(), b.current_digests());
        assert_eq!(a.len(), 50);
        // Different content, different digests.
        b.put(b"key3".to_vec(), b"other".to_vec());
        assert_ne!(a.current_digests(), b.current_digests());
    }

    #[test]
    fn put_then_delete_restores_digest() {
        let mut s = PartitionedState::new(4);
        s.put(b"a".to_vec(), b"1".to_vec());
        let before = s.current_digests();
        s.put(b"b".to_vec(), b"2".to_vec());
        assert_ne!(s.current_digests(), before);
        s.delete(b"b");
        assert_eq!(s.current_digests(), before);
        assert_eq!(s.get(b"b"), None);
        assert_eq!(s.len(), 1);
        // Overwrite and restore.
        s.put(b"a".to_vec(), b"x".to_vec());
        s.put(b"a".to_vec(), b"1".to_vec());
        assert_eq!(s.current_digests(), before);
        // Empty state equals a fresh one.
        s.delete(b"a");
        assert!(s.is_empty());
        assert_eq!(
            s.current_digests(),
            PartitionedState::new(4).current_digests()
        );
    }

    #[test]
    fn partition_digests_differ_by_index() {
        let d = PartitionedState::new(3).current_digests();
        assert_eq!(d.len(), 3);
        assert_ne!(d[0], d[1]);
        assert_ne!(d[1], d[2]);
    }

    #[test]
    fn zero_partitions_means_one() {
        let mut s = PartitionedState::new(0);
        assert_eq!(s.partition_count(), 1);
        s.put(b"k".to_vec(), b"v".to_vec());
        assert_eq!(s.get(b"k"), Some(&b"v"[..]));
    }

    #[test]
    fn rollback_without_checkpoint_is_noop() {
        let mut s = PartitionedState::new(2);
        s.put(b"k".to_vec(), b"v".to_vec());
        assert_eq!(s.rollback(), None);
        assert_eq!(s.get(b"k"), Some(&b"v"[..]));
        assert_eq!(s.latest_checkpoint(), None);
    }

    #[test]
    fn checkpoint_and_rollback_restore_exactly() {
        let mut s = PartitionedState::new(4);
        for i in 0..10 {
            let (k, v) = kv(i);
            s.put(k, v);
        }
        let d = s.checkpoint(128);
        assert_eq!(d, s.current_digests());
        assert_eq!(s.latest_checkpoint(), Some(128));
        assert_eq!(s.checkpoint_digests(128), Some(d.clone()));
        s.put(b"key1".to_vec(), b"changed".to_vec());
        s.put(b"key1".to_vec(), b"changed twice".to_vec());
        s.delete(b"key2");
        s.put(b"new".to_vec(), b"n".to_vec());
        assert_ne!(s.current_digests(), d);
        assert_eq!(s.rollback(), Some(128));
        assert_eq!(s.current_digests(), d);
        assert_eq!(s.get(b"key1"), Some(&b"value1"[..]));
        assert_eq!(s.get(b"key2"), Some(&b"value2"[..]));
        assert_eq!(s.get(b"new"), None);
        assert_eq!(s.len(), 10);
        // The checkpoint is still held and a second rollback is a no-op on content.
        s.put(b"key5".to_vec(), b"x".to_vec());
        assert_eq!(s.rollback(), Some(128));
        assert_eq!(s.current_digests(), d);
    }

    #[test]
    fn export_older_checkpoint_after_modifications() {
        let mut s = PartitionedState::new(2);
        for i in 0..20 {
            let (k, v) = kv(i);
            s.put(k, v);
        }
        let at1 = s.clone();
        let d1 = s.checkpoint(1);
        s.put(b"key0".to_vec(), b"A".to_vec());
        s.delete(b"key1");
        s.put(b"fresh".to_vec(), b"F".to_vec());
        s.checkpoint(2);
        s.put(b"key0".to_vec(), b"B".to_vec());
        s.delete(b"key4");
        s.put(b"key1".to_vec(), b"back".to_vec());
        s.checkpoint(3);
        s.put(b"later".to_vec(), b"L".to_vec());
        let mut scrambled = PartitionedState::new(2);
        scrambled.put(b"key0".to_vec(), b"junk".to_vec());
        scrambled.put(b"other".to_vec(), b"junk".to_vec());
        for part in 0..2 {
            let data = s.export_partition(1, part).expect("held");
            let got = decode(&data);
            let want: Vec<_> = at1.parts[part as usize]
                .leaves
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            assert_eq!(got, want, "partition {part} at checkpoint 1");
            // Importing it elsewhere reproduces the checkpoint's digest.
            assert!(scrambled.import_partition(part, &data, d1[part as usize]));
        }
        assert_eq!(scrambled.current_digests(), d1);
        assert_eq!(scrambled.len(), at1.len());
        // Checkpoint 2 content: key0 = A, key1 absent, fresh present, key4 present.
        let all2: Vec<_> = (0..2)
            .flat_map(|p| decode(&s.export_partition(2, p).unwrap()))
            .collect();
        let m2: BTreeMap<_, _> = all2.into_iter().collect();
        assert_eq!(m2.get(&b"key0"[..]), Some(&b"A".to_vec()));
        assert_eq!(m2.get(&b"key1"[..]), None);
        assert_eq!(m2.get(&b"fresh"[..]), Some(&b"F".to_vec()));
        assert!(m2.contains_key(&b"key4"[..]));
        assert!(!m2.contains_key(&b"later"[..]));
        assert_eq!(s.export_partition(7, 0), None, "not held");
        assert_eq!(s.export_partition(1, 2), None, "partition out of range");
    }

    #[test]
    fn import_into_fresh_state_reproduces_digests() {
        let mut src = PartitionedState::new(16);
        for i in 0..200 {
            let (k, v) = kv(i);
            src.put(k, v);
        }
        let digests = src.checkpoint(256);
        let mut dst = PartitionedState::new(16);
        dst.put(b"stale".to_vec(), b"junk".to_vec());
        dst.checkpoint(0);
        for p in 0..16 {
            let data = src.export_partition(256, p).unwrap();
            assert!(dst.import_partition(p, &data, digests[p as usize]));
        }
        assert_eq!(dst.current_digests(), digests);
        assert_eq!(dst.len(), 200);
        assert_eq!(dst.get(b"key7"), Some(&b"value7"[..]));
        assert_eq!(dst.get(b"stale"), None);
        assert_eq!(dst.finish_import(256), digests);
        assert_eq!(dst.latest_checkpoint(), Some(256));
        assert_eq!(dst.checkpoint_digests(0), None, "older checkpoints dropped");
        assert_eq!(dst.rollback(), Some(256));
        assert_eq!(dst.current_digests(), digests);
    }

    #[test]
    fn import_rolls_back_like_writes() {
        let mut src = PartitionedState::new(1);
        src.put(b"a".to_vec(), b"new".to_vec());
        let d = src.checkpoint(5);
        let mut dst = PartitionedState::new(1);
        dst.put(b"a".to_vec(), b"old".to_vec());
        dst.put(b"b".to_vec(), b"gone".to_vec());
        let before = dst.checkpoint(3);
        assert!(dst.import_partition(0, &src.export_partition(5, 0).unwrap(), d[0]));
        assert_eq!(dst.current_digests(), d);
        assert_eq!(dst.rollback(), Some(3));
        assert_eq!(dst.current_digests(), before);
        assert_eq!(dst.get(b"b"), Some(&b"gone"[..]));
    }

    #[test]
    fn import_rejects_tampered_data() {
        let mut src = PartitionedState::new(2);
        for i in 0..30 {
            let (k, v) = kv(i);
            src.put(k, v);
        }
        let d = src.checkpoint(1);
        let good = src.export_partition(1, 0).unwrap();
        let items = decode(&good);
        assert!(items.len() >= 2, "test needs several keys in partition 0");
        let mut dst = PartitionedState::new(2);
        dst.put(b"mine".to_vec(), b"x".to_vec());
        let before = dst.current_digests();
        let enc = |v: &Vec<(Vec<u8>, Vec<u8>)>| postcard::to_allocvec(v).unwrap();

        // A flipped byte in a value.
        let mut bad = good.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(!dst.import_partition(0, &bad, d[0]));
        // Truncated and trailing bytes.
        assert!(!dst.import_partition(0, &good[..good.len() - 1], d[0]));
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(!dst.import_partition(0, &trailing, d[0]));
        // Garbage.
        assert!(!dst.import_partition(0, &[0xff; 7], d[0]));
        // Unsorted and duplicate keys (same multiset of leaves, so the sum would match).
        let mut unsorted = items.clone();
        unsorted.swap(0, 1);
        assert!(!dst.import_partition(0, &enc(&unsorted), d[0]));
        let mut dup = items.clone();
        dup.insert(1, items[0].clone());
        assert!(!dst.import_partition(0, &enc(&dup), d[0]));
        // A key of another partition, with the digest it would produce.
        let foreign = (0..)
            .map(|i| format!("foreign{i}").into_bytes())
            .find(|k| src.partition_of(k) == 1)
            .unwrap();
        let mut sum = src.parts[0].sum.clone();
        sum.add(&leaf_hash(&foreign, b"v"));
        let mut forged = items.clone();
        forged.push((foreign, b"v".to_vec()));
        forged.sort();
        assert!(!dst.import_partition(0, &enc(&forged), partition_digest(0, &sum)));
        // Right data, wrong digest or partition.
        assert!(!dst.import_partition(0, &good, d[1]));
        assert!(!dst.import_partition(1, &good, d[0]));
        assert!(!dst.import_partition(2, &good, d[0]));

        assert_eq!(
            dst.current_digests(),
            before,
            "rejected imports change nothing"
        );
        assert_eq!(dst.len(), 1);
        // The honest data is accepted, and equals plain postcard of Vec<(Vec<u8>, Vec<u8>)>.
        assert_eq!(enc(&items), good);
        assert!(dst.import_partition(0, &good, d[0]));
        assert_eq!(dst.current_digests()[0], d[0]);
    }

    #[test]
    fn discard_keeps_newer_checkpoints_exact() {
        let mut s = PartitionedState::new(2);
        s.put(b"a".to_vec(), b"1".to_vec());
        s.checkpoint(10);
        s.put(b"a".to_vec(), b"2".to_vec());
        let d20 = s.checkpoint(20);
        s.put(b"a".to_vec(), b"3".to_vec());
        s.checkpoint(30);
        s.put(b"a".to_vec(), b"4".to_vec());
        s.discard_checkpoints_below(20);
        assert_eq!(s.checkpoint_digests(10), None);
        assert_eq!(s.export_partition(10, 0), None);
        assert_eq!(s.checkpoint_digests(20), Some(d20));
        let p = s.partition_of(b"a");
        assert_eq!(
            decode(&s.export_partition(20, p).unwrap()),
            vec![(b"a".to_vec(), b"2".to_vec())]
        );
        assert_eq!(
            decode(&s.export_partition(30, p).unwrap()),
            vec![(b"a".to_vec(), b"3".to_vec())]
        );
        s.discard_checkpoints_below(31);
        assert_eq!(s.latest_checkpoint(), None);
        assert_eq!(s.rollback(), None);
        assert_eq!(s.get(b"a"), Some(&b"4"[..]));
    }

    #[test]
    fn recheckpoint_at_same_or_lower_seq_keeps_older_exact() {
        let mut s = PartitionedState::new(1);
        s.put(b"a".to_vec(), b"1".to_vec());
        s.checkpoint(10);
        s.put(b"b".to_vec(), b"1".to_vec());
        s.checkpoint(20);
        s.put(b"a".to_vec(), b"2".to_vec());
        let d = s.checkpoint(20);
        assert_eq!(s.checkpoint_digests(20), Some(d));
        assert_eq!(
            decode(&s.export_partition(10, 0).unwrap()),
            vec![(b"a".to_vec(), b"1".to_vec())]
        );
        assert_eq!(s.rollback(), Some(20));
        assert_eq!(s.get(b"a"), Some(&b"2"[..]));
    }

    type Model = BTreeMap<Vec<u8>, Vec<u8>>;

    #[derive(Clone, Debug)]
    enum Op {
        Put(u8, u8),
        Delete(u8),
        Checkpoint,
        Rollback,
        Discard(u8),
    }

    fn op_strategy() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u8..24, any::<u8>()).prop_map(|(k, v)| Op::Put(k, v)),
            3 => (0u8..24).prop_map(Op::Delete),
            1 => Just(Op::Checkpoint),
            1 => Just(Op::Rollback),
            1 => (0u8..4).prop_map(Op::Discard),
        ]
    }

    proptest! {
        #[test]
        fn random_ops_match_model(ops in proptest::collection::vec(op_strategy(), 1..120)) {
            const P: u32 = 3;
            let mut s = PartitionedState::new(P);
            let mut live: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
            let mut cps: Vec<(Seq, Model)> = Vec::new();
            let mut next_seq: Seq = 1;
            for op in ops {
                match op {
                    Op::Put(k, v) => {
                        s.put(vec![k], vec![v; (v % 5) as usize]);
                        live.insert(vec![k], vec![v; (v % 5) as usize]);
                    }
                    Op::Delete(k) => {
                        s.delete(&[k]);
                        live.remove(&vec![k]);
                    }
                    Op::Checkpoint => {
                        let d = s.checkpoint(next_seq);
                        prop_assert_eq!(d, from_model(P, &live).current_digests());
                        cps.push((next_seq, live.clone()));
                        next_seq += 1;
                    }
                    Op::Rollback => {
                        let got = s.rollback();
                        prop_assert_eq!(got, cps.last().map(|c| c.0));
                        if let Some((_, m)) = cps.last() {
                            live = m.clone();
                        }
                    }
                    Op::Discard(back) => {
                        let below = next_seq.saturating_sub(back as Seq);
                        s.discard_checkpoints_below(below);
                        cps.retain(|c| c.0 >= below);
                    }
                }
                prop_assert_eq!(s.len(), live.len());
                for k in 0u8..24 {
                    prop_assert_eq!(s.get(&[k]), live.get(&vec![k]).map(Vec::as_slice));
                }
                prop_assert_eq!(s.current_digests(), from_model(P, &live).current_digests());
                prop_assert_eq!(s.latest_checkpoint(), cps.last().map(|c| c.0));
                for (seq, m) in &cps {
                    let want = from_model(P, m);
                    prop_assert_eq!(s.checkpoint_digests(*seq), Some(want.current_digests()));
                    for p in 0..P {
                        let data = s.export_partition(*seq, p).unwrap();
                        let got: BTreeMap<_, _> = decode(&data).into_iter().collect();
                        prop_assert_eq!(&got, &want.parts[p as usize].leaves);
                    }
                }
            }
        }
    }
}
