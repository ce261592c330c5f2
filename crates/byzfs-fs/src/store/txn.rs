//! [`Txn`]: one operation's view of the store — its own writes buffered over the store's
//! live state, handed to [`Store::apply`] only if the operation succeeds.
//!
//! This makes every operation atomic without a "check everything, then mutate" discipline:
//! an operation that fails with an errno half-way simply drops its transaction, so no replica
//! ever keeps a partial effect.

use super::{Entries, Store, StoreError, WriteSet};
use std::cell::RefCell;

/// What a transaction read from the store: single keys, and half-open key ranges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadLog {
    /// Keys read with [`Txn::get`].
    pub keys: Vec<Vec<u8>>,
    /// `[start, end)` ranges read with [`Txn::range`] (whatever the limit: a range read may
    /// depend on any key in it).
    pub ranges: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Buffered writes over a read-only store.
pub struct Txn<'a, S: Store + ?Sized> {
    store: &'a S,
    writes: WriteSet,
    /// Set by [`Txn::recording`]: every store read is logged (reads take `&self`).
    reads: Option<RefCell<ReadLog>>,
}

impl<'a, S: Store + ?Sized> Txn<'a, S> {
    /// An empty transaction over `store`.
    pub fn new(store: &'a S) -> Self {
        Txn {
            store,
            writes: WriteSet::new(),
            reads: None,
        }
    }

    /// An empty transaction over `store` that logs what it reads ([`Txn::into_reads`]).
    pub fn recording(store: &'a S) -> Self {
        Txn {
            reads: Some(RefCell::new(ReadLog::default())),
            ..Txn::new(store)
        }
    }

    /// What was read, if recording.
    pub fn into_reads(self) -> Option<ReadLog> {
        self.reads.map(RefCell::into_inner)
    }

    /// The value of `key` as this transaction sees it.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        if let Some(log) = &self.reads {
            log.borrow_mut().keys.push(key.to_vec());
        }
        match self.writes.get(key) {
            Some(v) => Ok(v.clone()),
            None => self.store.get(key),
        }
    }

    /// Sets `key`.
    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.writes.insert(key, Some(value));
    }

    /// Deletes `key`.
    pub fn delete(&mut self, key: Vec<u8>) {
        self.writes.insert(key, None);
    }

    /// Entries with `start <= key < end` as this transaction sees them, in key order, at
    /// most `limit` (same placement rule as [`Store::range`]).
    pub fn range(&self, start: &[u8], end: &[u8], limit: usize) -> Result<Entries, StoreError> {
        if start >= end {
            return Ok(Vec::new());
        }
        if let Some(log) = &self.reads {
            log.borrow_mut().ranges.push((start.to_vec(), end.to_vec()));
        }
        let local: Vec<(&Vec<u8>, &Option<Vec<u8>>)> =
            self.writes.range(start.to_vec()..end.to_vec()).collect();
        // Every buffered delete can hide one stored entry: fetch that many more.
        let hidden = local.iter().filter(|(_, v)| v.is_none()).count();
        let stored = self.store.range(start, end, limit.saturating_add(hidden))?;
        let mut merged: std::collections::BTreeMap<Vec<u8>, Vec<u8>> = stored.into_iter().collect();
        for (k, v) in local {
            match v {
                Some(v) => {
                    merged.insert(k.clone(), v.clone());
                }
                None => {
                    merged.remove(k);
                }
            }
        }
        Ok(merged.into_iter().take(limit).collect())
    }

    /// The keys this transaction wrote (or deleted), in key order.
    pub fn written_keys(&self) -> impl Iterator<Item = &[u8]> {
        self.writes.keys().map(Vec::as_slice)
    }

    /// The value of `key` in the store, before this transaction's writes.
    pub fn get_before(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.store.get(key)
    }

    /// The buffered writes, for [`Store::apply`].
    pub fn into_writes(self) -> WriteSet {
        self.writes
    }
}
