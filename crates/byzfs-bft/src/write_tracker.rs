//! [`WriteTracker`]: which batch last wrote each key, for reads answered while a batch is
//! executed only tentatively (docs/PROTOCOL.md §1.8, "per-object floor").
//!
//! A replica answers a read-only request at once only if its result equals the result on the
//! committed state. With tentative execution, the live state may hold one uncommitted batch
//! (`last_executed < seq ≤ last_tentative`); a read that touched no key that batch wrote sees
//! exactly what it would see on the committed state. A service records every key it writes
//! under the batch being executed ([`WriteTracker::begin_batch`], [`WriteTracker::record`])
//! and asks, for each key or key range a read touched, whether a batch after the committed
//! point wrote it.
//!
//! Entries are dropped once their batch is at or below the committed point, so the tracker
//! holds only the keys of the uncommitted suffix (and of batches undone by a rollback, which
//! stay until the committed point passes them: harmless, a read of such a key just waits).
//!
//! ```
//! use byzfs_bft::write_tracker::WriteTracker;
//!
//! let mut t = WriteTracker::new();
//! t.begin_batch(7, 6); // batch 7 runs tentatively; 6 is committed
//! t.record(b"a");
//! assert!(t.written_after(b"a", 6)); // a read of `a` must wait for 7 to commit
//! assert!(!t.written_after(b"b", 6)); // a read of `b` may run now
//! assert!(t.written_in_range_after(b"a", b"b", 6));
//! t.begin_batch(8, 7); // 7 committed: its entries go
//! assert!(!t.written_after(b"a", 7));
//! ```

use crate::ids::Seq;
use std::collections::BTreeMap;

/// Last writer of each key written after the committed point.
#[derive(Clone, Debug)]
pub struct WriteTracker {
    /// The batch being executed. `Seq::MAX` until the first [`WriteTracker::begin_batch`], so
    /// writes made outside any batch count as uncommitted for ever (never wrongly as
    /// committed).
    current: Seq,
    /// Key → the last batch that wrote it.
    last: BTreeMap<Vec<u8>, Seq>,
    /// Batch → the keys it wrote (for pruning).
    by_seq: BTreeMap<Seq, Vec<Vec<u8>>>,
}

impl Default for WriteTracker {
    fn default() -> Self {
        WriteTracker::new()
    }
}

impl WriteTracker {
    /// An empty tracker.
    pub fn new() -> WriteTracker {
        WriteTracker {
            current: Seq::MAX,
            last: BTreeMap::new(),
            by_seq: BTreeMap::new(),
        }
    }

    /// Batch `seq` starts executing; every batch up to `committed` is committed.
    pub fn begin_batch(&mut self, seq: Seq, committed: Seq) {
        self.prune(committed);
        self.current = seq;
    }

    /// The current batch wrote (or deleted) `key`.
    pub fn record(&mut self, key: &[u8]) {
        match self.last.get_mut(key) {
            Some(s) if *s == self.current => {}
            Some(s) => {
                *s = self.current;
                self.by_seq
                    .entry(self.current)
                    .or_default()
                    .push(key.to_vec());
            }
            None => {
                self.last.insert(key.to_vec(), self.current);
                self.by_seq
                    .entry(self.current)
                    .or_default()
                    .push(key.to_vec());
            }
        }
    }

    /// Whether a batch after `committed` wrote `key`.
    pub fn written_after(&self, key: &[u8], committed: Seq) -> bool {
        self.last.get(key).is_some_and(|&s| s > committed)
    }

    /// Whether a batch after `committed` wrote any key `k` with `start <= k < end`.
    pub fn written_in_range_after(&self, start: &[u8], end: &[u8], committed: Seq) -> bool {
        if start >= end {
            return false;
        }
        self.last
            .range::<[u8], _>((
                std::ops::Bound::Included(start),
                std::ops::Bound::Excluded(end),
            ))
            .any(|(_, &s)| s > committed)
    }

    /// Forgets everything (the state was replaced, e.g. by state transfer, and is committed).
    pub fn clear(&mut self) {
        self.last.clear();
        self.by_seq.clear();
    }

    /// Keys tracked (for tests and metrics).
    pub fn len(&self) -> usize {
        self.last.len()
    }

    /// Whether nothing is tracked.
    pub fn is_empty(&self) -> bool {
        self.last.is_empty()
    }

    /// Drops the entries of batches at or below `committed`.
    fn prune(&mut self, committed: Seq) {
        while let Some(entry) = self.by_seq.first_entry() {
            if *entry.key() > committed {
                break;
            }
            let (seq, keys) = entry.remove_entry();
            for k in keys {
                if self.last.get(&k) == Some(&seq) {
                    self.last.remove(&k);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_written_again_belongs_to_its_last_batch() {
        let mut t = WriteTracker::new();
        t.begin_batch(5, 4);
        t.record(b"k");
        t.begin_batch(6, 4);
        t.record(b"k");
        // 5 commits: `k` is still uncommitted (6 wrote it).
        t.begin_batch(7, 5);
        assert!(t.written_after(b"k", 5));
        t.begin_batch(8, 6);
        assert!(!t.written_after(b"k", 6));
        assert!(t.is_empty());
    }

    #[test]
    fn writes_outside_a_batch_never_count_as_committed() {
        let mut t = WriteTracker::new();
        t.record(b"k");
        assert!(t.written_after(b"k", Seq::MAX - 1));
    }

    #[test]
    fn ranges_are_half_open() {
        let mut t = WriteTracker::new();
        t.begin_batch(2, 1);
        t.record(b"b");
        assert!(t.written_in_range_after(b"a", b"c", 1));
        assert!(t.written_in_range_after(b"b", b"c", 1));
        assert!(!t.written_in_range_after(b"a", b"b", 1));
        assert!(!t.written_in_range_after(b"c", b"a", 1));
        assert!(!t.written_in_range_after(b"a", b"c", 2));
    }

    #[test]
    fn clear_forgets_everything() {
        let mut t = WriteTracker::new();
        t.begin_batch(2, 1);
        t.record(b"b");
        t.clear();
        assert!(!t.written_after(b"b", 1));
    }
}
