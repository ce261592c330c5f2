//! [`MemStore`]: the in-memory [`Store`] backend.
//!
//! The design of `byzfs_bft::state::PartitionedState` (copy-on-write checkpoints as undo logs,
//! AdHASH partition sums), with the placement of keys chosen by the caller
//! ([`partition_of`]), range scans, atomic write sets, and a cached digest per partition so
//! `current_digests` and `checkpoint` hash only the partitions that changed.

use super::{
    encode_partition, partition_of, verify_partition, Entries, Store, StoreError, WriteSet,
};
use byzfs_bft::state::{leaf_hash, partition_digest, Sum};
use byzfs_bft::{Digest, Seq};
use std::collections::BTreeMap;

/// Undo entries of one partition: key → value at the checkpoint (`None` = absent).
type UndoLog = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// One live partition.
#[derive(Clone, Debug)]
struct Part {
    leaves: BTreeMap<Vec<u8>, Vec<u8>>,
    sum: Sum,
    /// `partition_digest(index, sum)`, refreshed after every change.
    digest: Digest,
}

/// A held checkpoint.
#[derive(Clone, Debug)]
struct Checkpoint {
    seq: Seq,
    digests: Vec<Digest>,
    /// `undo[p]`: value at this checkpoint of every key of partition `p` changed after it
    /// and before the next checkpoint. Sparse: only touched partitions have an entry.
    undo: BTreeMap<u32, UndoLog>,
}

/// In-memory partitioned store with checkpoints. Deterministic in the sequence of calls.
#[derive(Clone, Debug)]
pub struct MemStore {
    parts: Vec<Part>,
    /// Held checkpoints, strictly increasing `seq`.
    checkpoints: Vec<Checkpoint>,
    /// A deliberately broken rule (test-only).
    #[cfg(feature = "mutations")]
    mutation: Option<crate::mutation::StoreMutation>,
}

impl MemStore {
    /// An empty store of `partitions` partitions (0 counts as 1).
    pub fn new(partitions: u32) -> MemStore {
        let p = partitions.max(1);
        MemStore {
            parts: (0..p)
                .map(|i| Part {
                    leaves: BTreeMap::new(),
                    sum: Sum::ZERO,
                    digest: partition_digest(i, &Sum::ZERO),
                })
                .collect(),
            checkpoints: Vec::new(),
            #[cfg(feature = "mutations")]
            mutation: None,
        }
    }

    /// Switches a deliberately broken rule on (test-only).
    #[cfg(feature = "mutations")]
    pub fn set_mutation(&mut self, m: Option<crate::mutation::StoreMutation>) {
        self.mutation = m;
    }

    #[cfg(feature = "mutations")]
    fn mutated(&self, m: crate::mutation::StoreMutation) -> bool {
        self.mutation == Some(m)
    }

    /// Number of live keys (O(partitions)).
    pub fn len(&self) -> usize {
        self.parts.iter().map(|p| p.leaves.len()).sum()
    }

    /// Whether the store holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn part_of(&self, key: &[u8]) -> u32 {
        partition_of(key, self.partition_count())
    }

    /// Sets (or with `None` deletes) `key` in partition `p`, logging the old value in the
    /// latest checkpoint if `log`. Does not refresh the digest.
    fn set(&mut self, p: u32, key: Vec<u8>, value: Option<Vec<u8>>, log: bool) {
        let part = &mut self.parts[p as usize];
        let old = part.leaves.remove(&key);
        if old == value {
            if let Some(v) = old {
                part.leaves.insert(key, v);
            }
            return;
        }
        if let Some(o) = &old {
            part.sum.sub(&leaf_hash(&key, o));
        }
        if let Some(v) = &value {
            part.sum.add(&leaf_hash(&key, v));
        }
        if log {
            if let Some(cp) = self.checkpoints.last_mut() {
                cp.undo
                    .entry(p)
                    .or_default()
                    .entry(key.clone())
                    .or_insert(old);
            }
        }
        if let Some(v) = value {
            self.parts[p as usize].leaves.insert(key, v);
        }
    }

    fn refresh_digest(&mut self, p: u32) {
        let part = &mut self.parts[p as usize];
        part.digest = partition_digest(p, &part.sum);
    }

    fn find(&self, seq: Seq) -> Option<usize> {
        self.checkpoints.binary_search_by_key(&seq, |c| c.seq).ok()
    }
}

impl Store for MemStore {
    fn partition_count(&self) -> u32 {
        // `new` built `parts` from a `u32`.
        self.parts.len() as u32
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let p = self.part_of(key) as usize;
        Ok(self.parts[p].leaves.get(key).cloned())
    }

    fn range(&self, start: &[u8], end: &[u8], limit: usize) -> Result<Entries, StoreError> {
        if start >= end {
            return Ok(Vec::new());
        }
        let p = self.part_of(start) as usize;
        Ok(self.parts[p]
            .leaves
            .range(start.to_vec()..end.to_vec())
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn apply(&mut self, writes: WriteSet) -> Result<(), StoreError> {
        let mut touched = Vec::new();
        for (k, v) in writes {
            let p = self.part_of(&k);
            if touched.last() != Some(&p) {
                touched.push(p);
            }
            self.set(p, k, v, true);
        }
        touched.sort_unstable();
        touched.dedup();
        for p in touched {
            self.refresh_digest(p);
        }
        Ok(())
    }

    fn current_digests(&self) -> Vec<Digest> {
        self.parts.iter().map(|p| p.digest).collect()
    }

    fn checkpoint(&mut self, seq: Seq) -> Vec<Digest> {
        while self.checkpoints.last().is_some_and(|c| c.seq >= seq) {
            if let Some(dropped) = self.checkpoints.pop() {
                #[cfg(feature = "mutations")]
                if self.mutated(crate::mutation::StoreMutation::CheckpointDropsUndo) {
                    continue;
                }
                if let Some(prev) = self.checkpoints.last_mut() {
                    // Keys `prev` has not logged had, at `prev`, their value at `dropped`.
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

    fn checkpoint_digests(&self, seq: Seq) -> Option<Vec<Digest>> {
        self.find(seq).map(|i| self.checkpoints[i].digests.clone())
    }

    fn latest_checkpoint(&self) -> Option<Seq> {
        self.checkpoints.last().map(|c| c.seq)
    }

    fn discard_checkpoints_below(&mut self, seq: Seq) {
        let keep_from = self.checkpoints.partition_point(|c| c.seq < seq);
        self.checkpoints.drain(..keep_from);
    }

    fn rollback(&mut self) -> Option<Seq> {
        let cp = self.checkpoints.last_mut()?;
        let seq = cp.seq;
        let undo = std::mem::take(&mut cp.undo);
        for (p, log) in undo {
            for (k, old) in log {
                #[cfg(feature = "mutations")]
                if old.is_none()
                    && self.mutated(crate::mutation::StoreMutation::RollbackKeepsCreated)
                {
                    let part = &mut self.parts[p as usize];
                    if let Some(v) = part.leaves.get(&k) {
                        part.sum.sub(&leaf_hash(&k, v));
                    }
                    continue;
                }
                self.set(p, k, old, false);
            }
            self.refresh_digest(p);
        }
        debug_assert_eq!(
            Some(self.current_digests()),
            self.checkpoint_digests(seq),
            "rollback must restore the checkpoint's digests"
        );
        Some(seq)
    }

    fn export_partition(&self, seq: Seq, part: u32) -> Option<Vec<u8>> {
        let live = &self.parts.get(part as usize)?.leaves;
        let from = self.find(seq)?;
        // Value at `seq` of every key changed since: newest first, so older entries win.
        let mut overrides: BTreeMap<&[u8], Option<&[u8]>> = BTreeMap::new();
        #[cfg(feature = "mutations")]
        let from = if self.mutated(crate::mutation::StoreMutation::ExportLive) {
            self.checkpoints.len()
        } else {
            from
        };
        for cp in self.checkpoints[from..].iter().rev() {
            if let Some(log) = cp.undo.get(&part) {
                for (k, old) in log {
                    overrides.insert(k.as_slice(), old.as_deref());
                }
            }
        }
        let mut merged: BTreeMap<&[u8], &[u8]> = live
            .iter()
            .filter(|(k, _)| !overrides.contains_key(k.as_slice()))
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
            .collect();
        merged.extend(overrides.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))));
        encode_partition(merged.into_iter())
    }

    fn import_partition(&mut self, part: u32, data: &[u8], expected: Digest) -> bool {
        let Some(items) = verify_partition(data, part, self.partition_count(), expected) else {
            return false;
        };
        let new: BTreeMap<Vec<u8>, Vec<u8>> = items
            .into_iter()
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect();
        let old_keys: Vec<Vec<u8>> = self.parts[part as usize]
            .leaves
            .keys()
            .filter(|k| !new.contains_key(*k))
            .cloned()
            .collect();
        for k in old_keys {
            self.set(part, k, None, true);
        }
        for (k, v) in new {
            self.set(part, k, Some(v), true);
        }
        self.refresh_digest(part);
        debug_assert_eq!(self.parts[part as usize].digest, expected);
        true
    }

    fn finish_import(&mut self, seq: Seq) -> Vec<Digest> {
        self.checkpoints.clear();
        self.checkpoint(seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A key of partition `p` (of 4) with suffix `s`.
    fn key(p: u8, s: u8) -> Vec<u8> {
        vec![0, 0, 0, 0, 0, 0, 0, p, s]
    }

    fn put(s: &mut MemStore, k: Vec<u8>, v: Option<Vec<u8>>) {
        s.apply(WriteSet::from([(k, v)])).unwrap();
    }

    fn decode(data: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        postcard::from_bytes(data).expect("export decodes")
    }

    #[test]
    fn same_digests_as_partitioned_state_formula() {
        let mut s = MemStore::new(4);
        put(&mut s, key(1, 1), Some(b"v".to_vec()));
        let mut sum = Sum::ZERO;
        sum.add(&leaf_hash(&key(1, 1), b"v"));
        assert_eq!(s.current_digests()[1], partition_digest(1, &sum));
        assert_eq!(s.current_digests()[0], partition_digest(0, &Sum::ZERO));
    }

    #[test]
    fn range_scans_one_partition_in_order() {
        let mut s = MemStore::new(4);
        for i in (0..10).rev() {
            put(&mut s, key(2, i), Some(vec![i]));
        }
        put(&mut s, key(3, 5), Some(vec![99]));
        let r = s.range(&key(2, 3), &key(2, 7), 100).unwrap();
        assert_eq!(
            r.iter().map(|(_, v)| v[0]).collect::<Vec<_>>(),
            vec![3, 4, 5, 6]
        );
        assert_eq!(s.range(&key(2, 3), &key(2, 7), 2).unwrap().len(), 2);
        assert!(s.range(&key(2, 7), &key(2, 3), 9).unwrap().is_empty());
    }

    #[test]
    fn import_rejects_foreign_and_unsorted() {
        let mut a = MemStore::new(4);
        put(&mut a, key(1, 1), Some(b"x".to_vec()));
        put(&mut a, key(1, 2), Some(b"y".to_vec()));
        let d = a.checkpoint(1);
        let good = a.export_partition(1, 1).unwrap();
        let mut b = MemStore::new(4);
        assert!(
            !b.import_partition(2, &good, d[1]),
            "keys of another partition"
        );
        let mut items = decode(&good);
        items.swap(0, 1);
        let bad = postcard::to_allocvec(&items).unwrap();
        assert!(!b.import_partition(1, &bad, d[1]), "unsorted");
        assert!(!b.import_partition(1, &good[..good.len() - 1], d[1]));
        assert!(b.import_partition(1, &good, d[1]));
        assert_eq!(b.current_digests(), d);
    }

    #[derive(Clone, Debug)]
    enum Step {
        Write(Vec<(u8, u8, Option<u8>)>),
        Checkpoint,
        Rollback,
        Discard(u8),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            6 => proptest::collection::vec((0u8..4, 0u8..6, proptest::option::of(any::<u8>())), 1..4)
                .prop_map(Step::Write),
            1 => Just(Step::Checkpoint),
            1 => Just(Step::Rollback),
            1 => (0u8..4).prop_map(Step::Discard),
        ]
    }

    type Model = BTreeMap<Vec<u8>, Vec<u8>>;

    fn from_model(m: &Model) -> MemStore {
        let mut s = MemStore::new(4);
        s.apply(
            m.iter()
                .map(|(k, v)| (k.clone(), Some(v.clone())))
                .collect(),
        )
        .unwrap();
        s
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
        #[test]
        fn random_steps_match_model(steps in proptest::collection::vec(step(), 1..80)) {
            let mut s = MemStore::new(4);
            let mut live = Model::new();
            let mut cps: Vec<(Seq, Model)> = Vec::new();
            let mut next: Seq = 1;
            for st in steps {
                match st {
                    Step::Write(ws) => {
                        let mut set = WriteSet::new();
                        for (p, k, v) in ws {
                            let v = v.map(|b| vec![b; usize::from(b % 3)]);
                            set.insert(key(p, k), v.clone());
                        }
                        for (k, v) in &set {
                            match v {
                                Some(v) => { live.insert(k.clone(), v.clone()); }
                                None => { live.remove(k); }
                            }
                        }
                        s.apply(set).unwrap();
                    }
                    Step::Checkpoint => {
                        s.checkpoint(next);
                        cps.push((next, live.clone()));
                        next += 1;
                    }
                    Step::Rollback => {
                        prop_assert_eq!(s.rollback(), cps.last().map(|c| c.0));
                        if let Some((_, m)) = cps.last() { live = m.clone(); }
                    }
                    Step::Discard(back) => {
                        let below = next.saturating_sub(Seq::from(back));
                        s.discard_checkpoints_below(below);
                        cps.retain(|c| c.0 >= below);
                    }
                }
                prop_assert_eq!(s.current_digests(), from_model(&live).current_digests());
                for (seq, m) in &cps {
                    let want = from_model(m);
                    prop_assert_eq!(s.checkpoint_digests(*seq), Some(want.current_digests()));
                    for p in 0..4 {
                        let got: Model = decode(&s.export_partition(*seq, p).unwrap()).into_iter().collect();
                        prop_assert_eq!(&got, &want.parts[p as usize].leaves);
                    }
                }
            }
        }
    }
}
