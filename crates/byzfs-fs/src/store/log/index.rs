//! The in-memory half of a [`LogStore`](super::LogStore): where each key's value lies in the
//! log, held checkpoints as undo logs of those places, and the partition sums.
//!
//! The rules are [`MemStore`](crate::store::MemStore)'s (copy-on-write checkpoints as undo
//! logs, AdHASH sums), over [`Leaf`]s instead of values: an undo entry is its key and a
//! 56-byte [`Leaf`] however large the value it restores, because the old value stays where it is in the log.
//!
//! Every method that changes the index is one the store also writes to its log as a frame
//! (`frame.rs`), and replaying the log calls the same method with the same arguments: the
//! index after a replay is the index before the restart. So nothing here may depend on
//! anything but its arguments and the index.

use crate::store::partition_of;
use byzfs_bft::state::{leaf_sum, partition_digest, Sum};
use byzfs_bft::{Digest, Seq};
use std::collections::BTreeMap;

/// The segment number of a staged value's place: not in the log yet (the store appends the
/// staged writes as one frame before any other).
pub(crate) const STAGED: u64 = u64::MAX;

/// Where a value lies: segment, byte offset in it, length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Loc {
    pub seg: u64,
    pub off: u64,
    pub len: u32,
}

/// A live value: where it lies, and its leaf seed (`byzfs_bft::state::leaf_seed` of its key
/// and bytes), from which its summand is expanded when it leaves the sum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Leaf {
    pub loc: Loc,
    pub seed: [u8; 32],
}

/// Undo entries of one partition: key → its leaf at the checkpoint (`None` = absent).
type UndoLog = BTreeMap<Vec<u8>, Option<Leaf>>;

#[derive(Clone, Debug)]
struct Part {
    leaves: BTreeMap<Vec<u8>, Leaf>,
    sum: Sum,
    digest: Digest,
}

#[derive(Clone, Debug)]
struct Checkpoint {
    seq: Seq,
    digests: Vec<Digest>,
    /// `undo[p]`: the leaf at this checkpoint of every key of partition `p` changed after
    /// it and before the next checkpoint.
    undo: BTreeMap<u32, UndoLog>,
}

/// Bytes of the values a checkpoint's undo entries hold.
fn undo_bytes(c: &Checkpoint) -> u64 {
    c.undo
        .values()
        .flat_map(|log| log.values().flatten())
        .map(|l| u64::from(l.loc.len))
        .sum()
}

/// The index of a log store.
#[derive(Clone, Debug)]
pub(crate) struct Index {
    parts: Vec<Part>,
    /// Held checkpoints, strictly increasing `seq`.
    checkpoints: Vec<Checkpoint>,
    /// A persistent store's owner records this checkpoint as the one it reopens at: discards
    /// and the end of a state transfer keep it (see "Persistent stores" in the module docs).
    keep: Option<Seq>,
    /// Bytes of values that left the live state (overwritten or deleted) or a dropped
    /// checkpoint so far: garbage if nothing else holds them (compaction looks again when
    /// this grew).
    released: u64,
    /// A deliberately broken rule (test-only).
    #[cfg(feature = "mutations")]
    pub mutation: Option<crate::mutation::StoreMutation>,
}

impl Index {
    #[cfg(feature = "mutations")]
    fn mutated(&self, m: crate::mutation::StoreMutation) -> bool {
        self.mutation == Some(m)
    }

    pub fn new(partitions: u32) -> Index {
        let p = partitions.max(1);
        Index {
            parts: (0..p)
                .map(|i| Part {
                    leaves: BTreeMap::new(),
                    sum: Sum::ZERO,
                    digest: partition_digest(i, &Sum::ZERO),
                })
                .collect(),
            checkpoints: Vec::new(),
            keep: None,
            released: 0,
            #[cfg(feature = "mutations")]
            mutation: None,
        }
    }

    pub fn released(&self) -> u64 {
        self.released
    }

    pub fn partition_count(&self) -> u32 {
        // `new` built `parts` from a `u32`.
        self.parts.len() as u32
    }

    pub fn part_of(&self, key: &[u8]) -> u32 {
        partition_of(key, self.partition_count())
    }

    pub fn get(&self, key: &[u8]) -> Option<Leaf> {
        self.parts[self.part_of(key) as usize]
            .leaves
            .get(key)
            .copied()
    }

    /// Live keys with `start <= key < end` in `start`'s partition, at most `limit`.
    pub fn range(&self, start: &[u8], end: &[u8], limit: usize) -> Vec<(Vec<u8>, Leaf)> {
        if start >= end {
            return Vec::new();
        }
        self.parts[self.part_of(start) as usize]
            .leaves
            .range(start.to_vec()..end.to_vec())
            .take(limit)
            .map(|(k, l)| (k.clone(), *l))
            .collect()
    }

    pub fn current_digests(&self) -> Vec<Digest> {
        self.parts.iter().map(|p| p.digest).collect()
    }

    pub fn keep(&self) -> Option<Seq> {
        self.keep
    }

    /// Sets `key` of partition `p` to `leaf` (`None`: deletes it), logging its old leaf in
    /// the latest checkpoint if `log`. A leaf with the old one's seed (the same bytes)
    /// changes nothing. Does not refresh the digest.
    fn set(&mut self, p: u32, key: Vec<u8>, leaf: Option<Leaf>, log: bool) {
        let part = &mut self.parts[p as usize];
        let old = part.leaves.get(&key).copied();
        if old.map(|l| l.seed) == leaf.map(|l| l.seed) {
            return;
        }
        if let Some(o) = &old {
            part.sum.sub(&leaf_sum(&o.seed));
            self.released += u64::from(o.loc.len);
        }
        match leaf {
            Some(l) => {
                part.sum.add(&leaf_sum(&l.seed));
                part.leaves.insert(key.clone(), l);
            }
            None => {
                part.leaves.remove(&key);
            }
        }
        if log {
            if let Some(cp) = self.checkpoints.last_mut() {
                cp.undo.entry(p).or_default().entry(key).or_insert(old);
            }
        }
    }

    fn refresh(&mut self, touched: Vec<u32>) {
        let mut touched = touched;
        touched.sort_unstable();
        touched.dedup();
        for p in touched {
            let part = &mut self.parts[p as usize];
            part.digest = partition_digest(p, &part.sum);
        }
    }

    /// One operation's (or one imported partition's) writes.
    pub fn apply(&mut self, writes: Vec<(Vec<u8>, Option<Leaf>)>) {
        let mut touched = Vec::new();
        for (k, l) in writes {
            let p = self.part_of(&k);
            touched.push(p);
            self.set(p, k, l, true);
        }
        self.refresh(touched);
    }

    /// A checkpoint of the live state at `seq`; held ones at `>= seq` are replaced (their
    /// undo entries fold into the one before).
    pub fn checkpoint(&mut self, seq: Seq) -> Vec<Digest> {
        while self.checkpoints.last().is_some_and(|c| c.seq >= seq) {
            if let Some(dropped) = self.checkpoints.pop() {
                #[cfg(feature = "mutations")]
                if self.mutated(crate::mutation::StoreMutation::CheckpointDropsUndo) {
                    continue;
                }
                if let Some(prev) = self.checkpoints.last_mut() {
                    // Keys `prev` has not logged had, at `prev`, their leaf at `dropped`.
                    for (p, log) in dropped.undo {
                        let mine = prev.undo.entry(p).or_default();
                        for (k, v) in log {
                            mine.entry(k).or_insert(v);
                        }
                    }
                }
            }
        }
        let digests = self.current_digests();
        self.checkpoints.push(Checkpoint {
            seq,
            digests: digests.clone(),
            undo: BTreeMap::new(),
        });
        digests
    }

    pub fn checkpoint_digests(&self, seq: Seq) -> Option<Vec<Digest>> {
        self.find(seq).map(|i| self.checkpoints[i].digests.clone())
    }

    pub fn latest_checkpoint(&self) -> Option<Seq> {
        self.checkpoints.last().map(|c| c.seq)
    }

    pub fn held(&self) -> Vec<Seq> {
        self.checkpoints.iter().map(|c| c.seq).collect()
    }

    fn find(&self, seq: Seq) -> Option<usize> {
        self.checkpoints.binary_search_by_key(&seq, |c| c.seq).ok()
    }

    /// Forgets checkpoints older than `seq`, but never the one to keep.
    pub fn discard_below(&mut self, seq: Seq) {
        let seq = self.keep.map_or(seq, |k| seq.min(k));
        let keep_from = self.checkpoints.partition_point(|c| c.seq < seq);
        for c in self.checkpoints.drain(..keep_from) {
            self.released += undo_bytes(&c);
        }
    }

    /// Returns the live state to the latest checkpoint (still held).
    pub fn rollback(&mut self) -> Option<Seq> {
        let cp = self.checkpoints.last_mut()?;
        let seq = cp.seq;
        let undo = std::mem::take(&mut cp.undo);
        let mut touched = Vec::new();
        for (p, log) in undo {
            for (k, old) in log {
                #[cfg(feature = "mutations")]
                if old.is_none()
                    && self.mutated(crate::mutation::StoreMutation::RollbackKeepsCreated)
                {
                    // Out of the sum, left in the partition.
                    let part = &mut self.parts[p as usize];
                    if let Some(l) = part.leaves.get(&k) {
                        part.sum.sub(&leaf_sum(&l.seed));
                    }
                    continue;
                }
                self.set(p, k, old, false);
            }
            touched.push(p);
        }
        self.refresh(touched);
        Some(seq)
    }

    /// Ends a state transfer: drops the checkpoints below the one to keep (all of them
    /// without one) and records the live state as `seq`.
    pub fn finish_import(&mut self, seq: Seq) -> Vec<Digest> {
        let keep = self.keep.unwrap_or(Seq::MAX);
        let (kept, gone) = std::mem::take(&mut self.checkpoints)
            .into_iter()
            .partition(|c| c.seq >= keep);
        self.checkpoints = kept;
        self.released += gone.iter().map(undo_bytes).sum::<u64>();
        self.checkpoint(seq)
    }

    /// The owner is about to record checkpoint `stored`: keep it from now on (and nothing
    /// older than the one kept so far is needed once it has).
    pub fn set_keep(&mut self, stored: Seq) {
        self.keep = Some(self.keep.map_or(stored, |k| k.max(stored)));
    }

    /// Rolls back through every checkpoint after `seq` to `seq`, drops the older ones and
    /// keeps `seq`; its digests, or why not.
    pub fn reopen_at(&mut self, seq: Seq) -> Result<Vec<Digest>, String> {
        let Some(want) = self.checkpoint_digests(seq) else {
            return Err(format!(
                "the store holds no checkpoint {seq} (it holds {:?})",
                self.held()
            ));
        };
        while let Some(latest) = self.rollback() {
            if latest == seq {
                break;
            }
            self.checkpoints.pop();
        }
        self.checkpoints.retain(|c| c.seq >= seq);
        self.keep = Some(seq);
        if self.current_digests() != want {
            return Err(format!(
                "rolled back to checkpoint {seq}, the store does not match its digests"
            ));
        }
        Ok(want)
    }

    /// Partition `part` as it was at held checkpoint `seq`, in key order.
    pub fn at(&self, seq: Seq, part: u32) -> Option<BTreeMap<&[u8], Leaf>> {
        let live = &self.parts.get(part as usize)?.leaves;
        let from = self.find(seq)?;
        #[cfg(feature = "mutations")]
        let from = if self.mutated(crate::mutation::StoreMutation::ExportLive) {
            self.checkpoints.len()
        } else {
            from
        };
        // Leaf at `seq` of every key changed since: newest first, so older entries win.
        let mut overrides: BTreeMap<&[u8], Option<Leaf>> = BTreeMap::new();
        for cp in self.checkpoints[from..].iter().rev() {
            if let Some(log) = cp.undo.get(&part) {
                for (k, old) in log {
                    overrides.insert(k.as_slice(), *old);
                }
            }
        }
        let mut merged: BTreeMap<&[u8], Leaf> = live
            .iter()
            .filter(|(k, _)| !overrides.contains_key(k.as_slice()))
            .map(|(k, l)| (k.as_slice(), *l))
            .collect();
        merged.extend(overrides.into_iter().filter_map(|(k, l)| l.map(|l| (k, l))));
        Some(merged)
    }

    /// Live keys of partition `part`, in order.
    pub fn keys_of(&self, part: u32) -> Vec<Vec<u8>> {
        self.parts
            .get(part as usize)
            .map(|p| p.leaves.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// A staged live value of `key` was appended at `loc`. Only a leaf still staged moves:
    /// a write of the bytes a key already had left its leaf where it was (`set`), and so
    /// does the replay of that write, so the index a replay rebuilds names the same places
    /// as this one (compaction removes segments by what this one names:
    /// `tests/log_store.rs` `a_persistent_log_store_reopens_at_the_recorded_checkpoint`).
    pub fn place(&mut self, key: &[u8], loc: Loc) {
        let p = self.part_of(key) as usize;
        if let Some(l) = self.parts[p].leaves.get_mut(key) {
            if l.loc.seg == STAGED {
                l.loc = loc;
            }
        }
    }

    /// Every place a live value or a held checkpoint's value lies.
    pub fn referenced(&self) -> impl Iterator<Item = Loc> + '_ {
        let live = self
            .parts
            .iter()
            .flat_map(|p| p.leaves.values().map(|l| l.loc));
        let undo = self.checkpoints.iter().flat_map(|c| {
            c.undo
                .values()
                .flat_map(|log| log.values().filter_map(|l| l.map(|l| l.loc)))
        });
        live.chain(undo)
    }

    /// Points every reference to a value at `from` to `to` (the value was copied there).
    pub fn relocate(&mut self, moved: &BTreeMap<Loc, Loc>) {
        let fix = |l: &mut Leaf| {
            if let Some(to) = moved.get(&l.loc) {
                l.loc = *to;
            }
        };
        for p in &mut self.parts {
            p.leaves.values_mut().for_each(fix);
        }
        for c in &mut self.checkpoints {
            for log in c.undo.values_mut() {
                log.values_mut().flatten().for_each(fix);
            }
        }
    }
}

/// Writes and reads an [`Index`] whole: the `Base` frame compaction starts a segment with
/// (see "Compaction" in the module docs). Sums and digests are not written; they follow
/// from the seeds.
impl Index {
    /// The bytes [`Index::encode`] writes (a walk, no copy: compaction weighs a `Base`
    /// frame's cost before it writes one).
    pub fn encoded_len(&self) -> u64 {
        const LEAF: u64 = 8 + 8 + 4 + 32;
        let key = |k: &Vec<u8>| 4 + k.len() as u64;
        let mut n = 4 + 1 + if self.keep.is_some() { 8 } else { 0 };
        for p in &self.parts {
            n += 4 + p.leaves.keys().map(|k| key(k) + LEAF).sum::<u64>();
        }
        n += 4;
        for c in &self.checkpoints {
            n += 8 + 32 * c.digests.len() as u64 + 4;
            for log in c.undo.values() {
                n += 4 + 4;
                n += log
                    .iter()
                    .map(|(k, l)| key(k) + 1 + if l.is_some() { LEAF } else { 0 })
                    .sum::<u64>();
            }
        }
        n
    }

    pub fn encode(&self, b: &mut Vec<u8>) {
        fn put_key(b: &mut Vec<u8>, k: &[u8]) {
            // Keys come from write sets whose frames were written, so they are below 4 GiB.
            b.extend_from_slice(&(k.len() as u32).to_le_bytes());
            b.extend_from_slice(k);
        }
        fn put_leaf(b: &mut Vec<u8>, l: &Leaf) {
            b.extend_from_slice(&l.loc.seg.to_le_bytes());
            b.extend_from_slice(&l.loc.off.to_le_bytes());
            b.extend_from_slice(&l.loc.len.to_le_bytes());
            b.extend_from_slice(&l.seed);
        }
        let count = |n: usize| (n as u32).to_le_bytes();
        b.extend_from_slice(&self.partition_count().to_le_bytes());
        match self.keep {
            Some(k) => {
                b.push(1);
                b.extend_from_slice(&k.to_le_bytes());
            }
            None => b.push(0),
        }
        for p in &self.parts {
            b.extend_from_slice(&count(p.leaves.len()));
            for (k, l) in &p.leaves {
                put_key(b, k);
                put_leaf(b, l);
            }
        }
        b.extend_from_slice(&count(self.checkpoints.len()));
        for c in &self.checkpoints {
            b.extend_from_slice(&c.seq.to_le_bytes());
            for d in &c.digests {
                b.extend_from_slice(&d.0);
            }
            b.extend_from_slice(&count(c.undo.len()));
            for (p, log) in &c.undo {
                b.extend_from_slice(&p.to_le_bytes());
                b.extend_from_slice(&count(log.len()));
                for (k, l) in log {
                    put_key(b, k);
                    match l {
                        Some(l) => {
                            b.push(1);
                            put_leaf(b, l);
                        }
                        None => b.push(0),
                    }
                }
            }
        }
    }

    /// The index `encode` wrote, if `b` is exactly one of `partitions` partitions whose
    /// every key lies in its partition, in order.
    pub fn decode(b: &[u8], partitions: u32) -> Option<Index> {
        let mut r = super::frame::Reader::new(b);
        if r.u32()? != partitions.max(1) {
            return None;
        }
        let mut index = Index::new(partitions);
        index.keep = match r.u8()? {
            0 => None,
            1 => Some(r.u64()?),
            _ => return None,
        };
        let leaf = |r: &mut super::frame::Reader<'_>| -> Option<Leaf> {
            let seg = r.u64()?;
            let off = r.u64()?;
            let len = r.u32()?;
            let seed: [u8; 32] = r.take(32)?.try_into().ok()?;
            Some(Leaf {
                loc: Loc { seg, off, len },
                seed,
            })
        };
        for p in 0..index.partition_count() {
            let n = r.u32()?;
            let part = &mut index.parts[p as usize];
            for _ in 0..n {
                let k = r.bytes()?;
                if partition_of(k, partitions) != p
                    || part
                        .leaves
                        .last_key_value()
                        .is_some_and(|(last, _)| last.as_slice() >= k)
                {
                    return None;
                }
                let l = leaf(&mut r)?;
                part.sum.add(&leaf_sum(&l.seed));
                part.leaves.insert(k.to_vec(), l);
            }
            part.digest = partition_digest(p, &part.sum);
        }
        let ncp = r.u32()?;
        for _ in 0..ncp {
            let seq = r.u64()?;
            if index.checkpoints.last().is_some_and(|c| c.seq >= seq) {
                return None;
            }
            let mut digests = Vec::new();
            for _ in 0..index.partition_count() {
                digests.push(Digest(r.take(32)?.try_into().ok()?));
            }
            let mut undo = BTreeMap::new();
            for _ in 0..r.u32()? {
                let p = r.u32()?;
                if p >= index.partition_count() {
                    return None;
                }
                let mut log = UndoLog::new();
                for _ in 0..r.u32()? {
                    let k = r.bytes()?.to_vec();
                    let l = match r.u8()? {
                        0 => None,
                        1 => Some(leaf(&mut r)?),
                        _ => return None,
                    };
                    log.insert(k, l);
                }
                undo.insert(p, log);
            }
            index.checkpoints.push(Checkpoint { seq, digests, undo });
        }
        (r.left() == 0).then_some(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn leaf(i: u8) -> Leaf {
        Leaf {
            loc: Loc {
                seg: u64::from(i),
                off: 7,
                len: 3,
            },
            seed: [i; 32],
        }
    }

    /// An index with live keys in two partitions, a held checkpoint and undo entries.
    fn sample() -> Index {
        let mut x = Index::new(4);
        let key = |p: u8, s: u8| vec![0, 0, 0, 0, 0, 0, 0, p, s];
        x.apply(vec![(key(1, 1), Some(leaf(1))), (key(2, 1), Some(leaf(2)))]);
        x.checkpoint(5);
        x.apply(vec![(key(1, 1), None), (key(3, 9), Some(leaf(3)))]);
        x.set_keep(5);
        x
    }

    #[test]
    fn an_index_reads_back_as_written() {
        let x = sample();
        let mut b = Vec::new();
        x.encode(&mut b);
        assert_eq!(x.encoded_len(), b.len() as u64);
        let y = Index::decode(&b, 4).expect("decodes");
        assert_eq!(y.current_digests(), x.current_digests());
        assert_eq!(y.held(), vec![5]);
        assert_eq!(y.keep(), Some(5));
        assert_eq!(y.at(5, 1), x.at(5, 1));
        assert!(Index::decode(&b, 8).is_none(), "another partition count");
        assert!(Index::decode(&b[..b.len() - 1], 4).is_none(), "cut short");
    }

    proptest! {
        /// Random and mutated bytes decode or are refused, never panic.
        #[test]
        fn hostile_indexes_never_panic(
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
            cut in any::<usize>(),
            random in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let mut b = Vec::new();
            sample().encode(&mut b);
            for (i, x) in flips {
                let n = b.len();
                b[i % n] ^= x;
            }
            let cut = cut % (b.len() + 1);
            let _ = Index::decode(&b[..cut], 4);
            let _ = Index::decode(&b, 4);
            let _ = Index::decode(&random, 4);
        }
    }
}
