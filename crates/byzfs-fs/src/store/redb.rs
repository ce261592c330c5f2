//! [`RedbStore`]: the on-disk [`Store`] backend, in one redb database file.
//!
//! Everything a replica's state holds lives on disk, so files of many GB cost disk, not
//! memory. In memory stay only the per-partition AdHASH sums and digests (4096 × ~0.5 KiB)
//! and the digests of held checkpoints.
//!
//! | table | key | value |
//! |---|---|---|
//! | `live` | `partition (u32 BE) ‖ key` | value (its first [`SPLIT_BYTES`] if longer) |
//! | `tail` | the same | the rest of a value longer than [`SPLIT_BYTES`] |
//! | `undo` | `checkpoint seq (u64 BE) ‖ partition (u32 BE) ‖ key` | `0` (absent) or `1 ‖ old value` |
//! | `sums` | partition | its 512-byte AdHASH sum |
//! | `checkpoints` | seq | the checkpoint's partition digests, concatenated |
//! | `meta` | `"partitions"`, `"format"` | partition count, on-disk format ([`FORMAT`]) |
//!
//! * **Checkpoints are undo records**, like [`MemStore`](super::MemStore)'s undo logs but in
//!   redb: the first change of a key after the latest checkpoint records the key's value at
//!   that checkpoint. A rollback replays the latest checkpoint's records; an export of an
//!   older held checkpoint overlays the records of every checkpoint from it to the latest on
//!   the live partition. All of this is O(changes), and partition-local (the partition is in
//!   the key), so exporting one partition reads only that partition.
//! * **Write-back.** [`Store::apply`] does not open a redb write transaction: it reads the
//!   old values it needs, then stages the new values, undo records and sums in memory (all
//!   or nothing), where `get` and `range` see them. The staged writes go to redb in one
//!   write transaction at the next checkpoint, before any other method that works on the
//!   tables, when they exceed [`DEFAULT_WRITE_BACK_BYTES`], and when the store is dropped.
//!   A redb commit cost about two thirds of an operation's execution at a replica (profile
//!   of PostMark, docs/BENCHMARKS.md), and one every 128 operations costs next to nothing.
//! * **Durability.** Staged flushes commit with `Durability::None`; each checkpoint commits
//!   with `Durability::Immediate`, which makes it and everything before it durable: one
//!   fsync per checkpoint rather than per operation. After a crash the database reopens at a
//!   consistent state no older than the last checkpoint (the sums are in the same
//!   transactions as the data, so digests stay exact). A replica does not use this mode: in
//!   `memory` mode it catches up by state transfer, so it opens the store with
//!   [`RedbStore::create_scratch`], whose file is never synced at all (the fsync at each
//!   checkpoint stalled every replica at the same sequence number); in `disk` mode it opens
//!   a persistent store (below), synced once per stable checkpoint.
//! * **Checkpoints on a scratch store** do not flush either: the checkpoint's record joins
//!   the staged writes, and everything goes to redb only past the write-back limit (or
//!   before a method that works on the tables). A checkpoint discarded while its undo
//!   records are still staged (the common case: checkpoints become stable and are discarded
//!   one interval later) drops them from memory, so they never reach redb at all. Only
//!   checkpoints held at a flush (`in_tables`) cost a write transaction when discarded. A
//!   redb commit per checkpoint and another per discard took 14 % of a replica's CPU in
//!   PostMark (`perf`, docs/bench/HISTORY.md "the per-object read-only floor, checkpoints without flushes, and more"). A durable store keeps one commit
//!   per checkpoint: it promises to reopen at the last checkpoint.
//! * **Errors.** `get`, `range` and `apply` report failures (a full disk is
//!   [`StoreError::Full`]). The other methods have no error channel in the `Service` trait:
//!   a disk failure inside them is recorded ([`Store::failure`], surfaced as
//!   `Service::failure`), the method returns what it can, and the driver stops the replica
//!   with that message before anything of the step leaves: it cannot continue consistently
//!   (restarted with free space, it recovers from its log and by state transfer). No panic.
//!   A failed `apply` is recorded too: redb refuses every later write after an I/O error
//!   until reopened, and the operation's local `ENOSPC`/`EIO` answer must not leave.
//! * **Persistent stores** ([`RedbStore::open_persistent`]: a replica in `disk` mode) are
//!   reopened at start instead of rebuilt, so a restart costs O(changes since the last
//!   stable checkpoint), not O(state), and the replica's own database stores only the
//!   checkpoint's digests, not a second copy of the state. The replica records which
//!   stable checkpoint it relies on in its own database; two files cannot be synced at
//!   once, so this store keeps that checkpoint through every commit until the replica has
//!   recorded a newer one:
//!   - [`RedbStore::persist`] (the replica calls it just before its own commit that records
//!     a new stable checkpoint) is the only synced commit: everything before it, with every
//!     held checkpoint, becomes durable. Other commits are `Durability::None`, which redb
//!     does not keep across a crash (it reopens at the last synced commit).
//!   - Discards never drop the checkpoint named at the last `persist` (the replica's record
//!     may still name it), nor does the end of a state transfer: imports are recorded as
//!     writes after the latest checkpoint, so the chain of undo records still leads back.
//!   - [`RedbStore::reopen_at`] rolls back through every later checkpoint to the recorded
//!     one and checks its digests. A crash between this store's sync and the replica's
//!     commit leaves the store one checkpoint ahead, which the rollback undoes.

use super::{
    encode_partition, partition_of, verify_partition, Entries, Store, StoreError, WriteSet,
};
use byzfs_bft::state::{leaf_hash, partition_digest, Sum, SUM_BYTES};
use byzfs_bft::{Digest, Seq};
use redb::backends::FileBackend;
use redb::{
    BackendError, Database, Durability, ReadOnlyTable, ReadableDatabase, ReadableTable,
    StorageBackend, Table, TableDefinition,
};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::path::Path;
use std::sync::OnceLock;

/// On-disk format of a [`RedbStore`] (`meta` key `format`); stores written before the key
/// existed are format 1. Bump it with any incompatible change of the tables or encodings.
/// Format 2 splits long values ([`SPLIT_BYTES`]); it reads format 1 (which has none) and
/// marks it format 2 at open, so that an older byzfs refuses it rather than misread it.
/// Format 3 is the file service's, not the tables': a file's blocks may be under another
/// data id than its inode number, and removals may wait in a reclaim queue
/// (`crate::reclaim`). A format-1 or format-2 store holds neither, so it opens as it is and
/// is marked format 3; an older byzfs would read such a file as empty, so it must refuse.
pub const FORMAT: u64 = 3;

/// A `live` value longer than this is stored as its first `SPLIT_BYTES` bytes in `live` and
/// the rest in `tail`. redb keeps a leaf in a power-of-two number of pages, so one 16 KiB
/// file block (the file service's block size) with its key took a 32 KiB leaf: the store
/// was twice the data. 256 bytes below 16 KiB leave room for the key and the leaf's header.
pub const SPLIT_BYTES: usize = 16 * 1024 - 256;

/// Default page cache of a [`RedbStore`]: 64 MiB.
pub const DEFAULT_CACHE_BYTES: usize = 64 << 20;

/// Default bound on the writes a [`RedbStore`] stages in memory before it commits them to
/// redb (keys, values and undo records): 16 MiB.
pub const DEFAULT_WRITE_BACK_BYTES: usize = 16 << 20;

const LIVE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("live");
/// The bytes of a `live` value past [`SPLIT_BYTES`], under the same key.
const TAIL: TableDefinition<&[u8], &[u8]> = TableDefinition::new("tail");
const UNDO: TableDefinition<&[u8], &[u8]> = TableDefinition::new("undo");
const SUMS: TableDefinition<u32, &[u8]> = TableDefinition::new("sums");
const CHECKPOINTS: TableDefinition<u64, &[u8]> = TableDefinition::new("checkpoints");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

/// Maps any redb error to a [`StoreError`]; a full disk is [`StoreError::Full`].
fn err(e: impl Into<redb::Error>) -> StoreError {
    match e.into() {
        redb::Error::Io(io) if io.kind() == std::io::ErrorKind::StorageFull => StoreError::Full,
        other => StoreError::Io(other.to_string()),
    }
}

fn live_key(part: u32, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + key.len());
    k.extend_from_slice(&part.to_be_bytes());
    k.extend_from_slice(key);
    k
}

fn undo_prefix(seq: Seq, part: Option<u32>) -> Vec<u8> {
    let mut k = Vec::with_capacity(12);
    k.extend_from_slice(&seq.to_be_bytes());
    if let Some(p) = part {
        k.extend_from_slice(&p.to_be_bytes());
    }
    k
}

fn undo_key(seq: Seq, part: u32, key: &[u8]) -> Vec<u8> {
    let mut k = undo_prefix(seq, Some(part));
    k.extend_from_slice(key);
    k
}

fn encode_old(old: Option<&[u8]>) -> Vec<u8> {
    match old {
        None => vec![0],
        Some(v) => {
            let mut b = Vec::with_capacity(1 + v.len());
            b.push(1);
            b.extend_from_slice(v);
            b
        }
    }
}

fn decode_old(b: &[u8]) -> Result<Option<&[u8]>, StoreError> {
    match b.split_first() {
        Some((0, [])) => Ok(None),
        Some((1, v)) => Ok(Some(v)),
        _ => Err(StoreError::Io("corrupt undo record".into())),
    }
}

fn encode_digests(d: &[Digest]) -> Vec<u8> {
    d.iter().flat_map(|d| d.0).collect()
}

fn decode_digests(b: &[u8]) -> Vec<Digest> {
    b.chunks_exact(32)
        .map(|c| {
            let mut d = [0u8; 32];
            d.copy_from_slice(c);
            Digest(d)
        })
        .collect()
}

/// Entries of `table` whose key starts with `prefix`, in key order.
fn scan_prefix<T: ReadableTable<&'static [u8], &'static [u8]>>(
    table: &T,
    prefix: &[u8],
) -> Result<Entries, StoreError> {
    let mut out = Vec::new();
    for row in table.range::<&[u8]>(prefix..).map_err(err)? {
        let (k, v) = row.map_err(err)?;
        if !k.value().starts_with(prefix) {
            break;
        }
        out.push((k.value().to_vec(), v.value().to_vec()));
    }
    Ok(out)
}

/// The whole value of live key `lk` (partition ‖ key): its stored head and, when the head
/// is [`SPLIT_BYTES`] long, its tail if it has one.
fn read_live<L, T>(live: &L, tail: &T, lk: &[u8]) -> Result<Option<Vec<u8>>, StoreError>
where
    L: ReadableTable<&'static [u8], &'static [u8]>,
    T: ReadableTable<&'static [u8], &'static [u8]>,
{
    let Some(head) = live.get(lk).map_err(err)? else {
        return Ok(None);
    };
    let mut v = head.value().to_vec();
    join_tail(tail, lk, &mut v)?;
    Ok(Some(v))
}

/// Appends the tail of live key `lk` to `v`, its head, if it has one.
fn join_tail<T>(tail: &T, lk: &[u8], v: &mut Vec<u8>) -> Result<(), StoreError>
where
    T: ReadableTable<&'static [u8], &'static [u8]>,
{
    if v.len() == SPLIT_BYTES {
        if let Some(t) = tail.get(lk).map_err(err)? {
            v.extend_from_slice(t.value());
        }
    }
    Ok(())
}

/// Live entries whose key starts with `prefix`, whole (see [`read_live`]).
fn scan_live<L, T>(live: &L, tail: &T, prefix: &[u8]) -> Result<Entries, StoreError>
where
    L: ReadableTable<&'static [u8], &'static [u8]>,
    T: ReadableTable<&'static [u8], &'static [u8]>,
{
    let mut out = scan_prefix(live, prefix)?;
    for (k, v) in &mut out {
        join_tail(tail, k, v)?;
    }
    Ok(out)
}

/// Sets (`Some`) or deletes (`None`) live key `lk`, splitting a value longer than
/// [`SPLIT_BYTES`] between `live` and `tail`. `had_tail`: whether the stored value has a
/// tail, which must then go (a value of exactly [`SPLIT_BYTES`] would read it back). Most
/// writes replace short values, so knowing this saves a `tail` lookup per write (about 2 %
/// of a NO-REP server's CPU in PostMark).
fn write_live(
    live: &mut Table<&[u8], &[u8]>,
    tail: &mut Table<&[u8], &[u8]>,
    lk: &[u8],
    value: Option<&[u8]>,
    had_tail: bool,
) -> Result<(), StoreError> {
    match value {
        Some(v) if v.len() > SPLIT_BYTES => {
            live.insert(lk, &v[..SPLIT_BYTES]).map_err(err)?;
            tail.insert(lk, &v[SPLIT_BYTES..]).map_err(err)?;
            return Ok(());
        }
        Some(v) => {
            live.insert(lk, v).map_err(err)?;
        }
        None => {
            live.remove(lk).map_err(err)?;
        }
    }
    if had_tail {
        tail.remove(lk).map_err(err)?;
    }
    Ok(())
}

/// Whether a whole value read back was stored with a tail.
fn has_tail(v: Option<&[u8]>) -> bool {
    v.is_some_and(|v| v.len() > SPLIT_BYTES)
}

/// Sums being changed by one write transaction, applied to the store's copy on commit.
struct SumEdits<'s> {
    base: &'s [Sum],
    changed: BTreeMap<u32, Sum>,
}

impl SumEdits<'_> {
    fn get(&mut self, p: u32) -> &mut Sum {
        let base = self.base;
        self.changed
            .entry(p)
            .or_insert_with(|| base[p as usize].clone())
    }
}

/// Sets (`Some`) or deletes (`None`) `key` of partition `p` in `live`, keeping the sum, and
/// recording the old value in checkpoint `undo_at`'s undo log if it is the first change.
#[allow(clippy::too_many_arguments)]
fn set(
    live: &mut Table<&[u8], &[u8]>,
    tail: &mut Table<&[u8], &[u8]>,
    undo: &mut Table<&[u8], &[u8]>,
    undo_at: Option<Seq>,
    sums: &mut SumEdits<'_>,
    p: u32,
    key: &[u8],
    value: Option<&[u8]>,
) -> Result<(), StoreError> {
    let lk = live_key(p, key);
    let old = read_live(live, tail, &lk)?;
    if old.as_deref() == value {
        return Ok(());
    }
    let sum = sums.get(p);
    if let Some(o) = &old {
        sum.sub(&leaf_hash(key, o));
    }
    if let Some(v) = value {
        sum.add(&leaf_hash(key, v));
    }
    if let Some(seq) = undo_at {
        let uk = undo_key(seq, p, key);
        if undo.get(uk.as_slice()).map_err(err)?.is_none() {
            undo.insert(uk.as_slice(), encode_old(old.as_deref()).as_slice())
                .map_err(err)?;
        }
    }
    write_live(live, tail, &lk, value, has_tail(old.as_deref()))
}

/// Writes applied but not yet committed to redb (see "Write-back" in the module docs).
#[derive(Default)]
struct Staged {
    /// `live` keys (partition ‖ key) → new value, or `None` for a deletion.
    live: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// `undo` keys → encoded old value (always `Some`; an `Option` to share [`merged`]).
    undo: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// Partitions whose sum changed.
    sums: BTreeSet<u32>,
    /// `live` keys above whose value in the tables has a tail (recorded when a key is first
    /// staged, from the value it replaces), so the flush removes only those tails.
    tailed: BTreeSet<Vec<u8>>,
    /// `checkpoints` records not written yet (scratch stores: see "Checkpoints on a scratch
    /// store" in the module docs): seq → encoded digests.
    cps: BTreeMap<Seq, Vec<u8>>,
    /// Bytes held by the maps above (keys and values).
    bytes: usize,
}

impl Staged {
    /// Drops what is staged for checkpoint `seq` (its undo records and its record), which
    /// is being discarded: it never needs to reach redb.
    fn discard_checkpoint(&mut self, seq: Seq) {
        let prefix = undo_prefix(seq, None);
        let keys: Vec<Vec<u8>> = self
            .undo
            .range::<[u8], _>((Bound::Included(prefix.as_slice()), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(k, _)| k.clone())
            .collect();
        for k in keys {
            if let Some(v) = self.undo.remove(&k) {
                self.bytes = self
                    .bytes
                    .saturating_sub(k.len() + v.as_ref().map_or(0, Vec::len));
            }
        }
        if let Some(d) = self.cps.remove(&seq) {
            self.bytes = self.bytes.saturating_sub(8 + d.len());
        }
    }
}

/// `stored` (the entries of a table whose key starts with `prefix`) with `staged` laid over
/// them.
fn merged(
    stored: Entries,
    staged: &BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    prefix: &[u8],
) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, StoreError> {
    let mut items: BTreeMap<Vec<u8>, Vec<u8>> = stored.into_iter().collect();
    for (k, v) in staged.range::<[u8], _>((Bound::Included(prefix), Bound::Unbounded)) {
        if !k.starts_with(prefix) {
            break;
        }
        match v {
            Some(v) => items.insert(k.clone(), v.clone()),
            None => items.remove(k),
        };
    }
    Ok(items)
}

/// A redb file backend that never syncs ([`RedbStore::create_scratch`]); everything else is
/// redb's own [`FileBackend`].
#[derive(Debug)]
struct ScratchBackend(FileBackend);

impl StorageBackend for ScratchBackend {
    fn len(&self) -> std::io::Result<u64> {
        self.0.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        self.0.read(offset, out)
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.0.set_len(len)
    }
    /// The point of this backend: the file is rebuilt at every start, a sync protects nothing.
    fn sync_data(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.0.write(offset, data)
    }
    fn close(&self) -> std::io::Result<()> {
        self.0.close()
    }
    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.0.try_lock_range(start, end)
    }
    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.0.try_lock_shared_range(start, end)
    }
    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.0.lock_range(start, end)
    }
    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.0.lock_shared_range(start, end)
    }
    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.0.unlock_range(start, end)
    }
    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.0.query_lock_range(start, end)
    }
}

/// A partitioned, checkpointed store in a redb database file.
pub struct RedbStore {
    db: Database,
    staged: Staged,
    /// Flush `staged` once it holds more than this many bytes.
    write_back_bytes: usize,
    sums: Vec<Sum>,
    digests: Vec<Digest>,
    /// Held checkpoints (seq, digests), increasing.
    checkpoints: Vec<(Seq, Vec<Digest>)>,
    /// The first failure where the trait has no error channel (see the module docs).
    failed: OnceLock<String>,
    /// A scratch store ([`RedbStore::create_scratch`]): every commit is `Immediate` (free
    /// without a sync), so redb frees pages at every commit, not only at checkpoints; and a
    /// checkpoint does not flush.
    scratch: bool,
    /// Checkpoints whose undo records or record may be in the tables (held at a flush or
    /// written directly); the others' are all staged.
    in_tables: BTreeSet<Seq>,
    /// A persistent store ([`RedbStore::open_persistent`]): the checkpoint its owner's own
    /// record names, which every commit keeps (see "Persistent stores" in the module docs).
    keep: Option<Seq>,
    /// The `live` and `undo` tables of one read transaction, reused by `get`, `range` and
    /// `apply` until the next write transaction (which drops it first: it would pin the
    /// old pages, and it would not see the commit). Opening a read transaction and its
    /// tables per key cost ~5 % of a backup's CPU in PostMark.
    reader: RefCell<Option<Reader>>,
    /// The database file, for its size ([`RedbStore::compact_if_wasteful`]).
    path: std::path::PathBuf,
    /// When a persistent store may compact its file ([`RedbStore::set_compaction`]).
    compaction: Option<Compaction>,
    /// What the tables held at the last look ([`RedbStore::compact_if_wasteful`]).
    last_held: u64,
}

/// Which stable checkpoints a replica's store may compact its file at
/// ([`RedbStore::set_compaction`]): those whose number of checkpoint intervals is
/// `index` modulo `replicas`, so the replicas of a cluster take turns and at most one pauses
/// for it at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compaction {
    /// Sequence numbers between checkpoints.
    pub interval: u64,
    /// Replicas in the cluster.
    pub replicas: u64,
    /// This replica's turn.
    pub index: u64,
}

/// A file smaller than this is never compacted.
pub const COMPACT_MIN_BYTES: u64 = 64 << 20;

/// Tables of one write transaction.
struct Tables<'t> {
    live: Table<'t, &'static [u8], &'static [u8]>,
    tail: Table<'t, &'static [u8], &'static [u8]>,
    undo: Table<'t, &'static [u8], &'static [u8]>,
    cps: Table<'t, u64, &'static [u8]>,
}

/// Tables of one read transaction.
struct Reader {
    live: ReadOnlyTable<&'static [u8], &'static [u8]>,
    tail: ReadOnlyTable<&'static [u8], &'static [u8]>,
    undo: ReadOnlyTable<&'static [u8], &'static [u8]>,
}

impl RedbStore {
    /// Opens the store at `path` with a [`DEFAULT_CACHE_BYTES`] page cache, creating it with
    /// `partitions` partitions (0 counts as 1) if it does not exist. An existing store must
    /// have the same partition count.
    pub fn open(path: impl AsRef<Path>, partitions: u32) -> Result<RedbStore, StoreError> {
        Self::open_with_cache(path, partitions, DEFAULT_CACHE_BYTES)
    }

    /// [`RedbStore::open`] with a page cache of `cache_bytes` (redb's own default is 1 GiB,
    /// too much for several replicas on one machine).
    pub fn open_with_cache(
        path: impl AsRef<Path>,
        partitions: u32,
        cache_bytes: usize,
    ) -> Result<RedbStore, StoreError> {
        let db = Database::builder()
            .set_cache_size(cache_bytes)
            .create(path.as_ref())
            .map_err(err)?;
        let mut store = Self::init(db, partitions)?;
        store.path = path.as_ref().to_path_buf();
        Ok(store)
    }

    /// A new, empty store at `path` (replacing any file there) that is scratch space: it never
    /// calls `fsync`. For a store its owner rebuilds at every start — a replica's file service
    /// restores its state from the replica's own checkpoint and log, and deletes this file
    /// first — so a sync protects nothing. Every commit is `Immediate`, free without the sync,
    /// so redb frees pages at every commit (it frees them only at durable commits), even for
    /// an owner that never takes a checkpoint (NO-REP in `memory` mode); each checkpoint no
    /// longer stalls the replica on a disk flush. The file is still written, so the state
    /// need not fit in memory.
    pub fn create_scratch(
        path: impl AsRef<Path>,
        partitions: u32,
        cache_bytes: usize,
    ) -> Result<RedbStore, StoreError> {
        // Unlinked, not truncated: a process still holding the old file keeps its own copy.
        match std::fs::remove_file(path.as_ref()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(err(e)),
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path.as_ref())
            .map_err(err)?;
        let backend = ScratchBackend(FileBackend::new(file).map_err(err)?);
        let path = path.as_ref().to_path_buf();
        let db = Database::builder()
            .set_cache_size(cache_bytes)
            .create_with_backend(backend)
            .map_err(err)?;
        let mut store = Self::init(db, partitions)?;
        store.scratch = true;
        store.path = path;
        Ok(store)
    }

    /// Creates the tables (or checks them) and loads the sums and held checkpoints.
    fn init(db: Database, partitions: u32) -> Result<RedbStore, StoreError> {
        let parts = partitions.max(1);
        let tx = db.begin_write().map_err(err)?;
        {
            let mut meta = tx.open_table(META).map_err(err)?;
            let stored = meta.get("partitions").map_err(err)?.map(|g| g.value());
            match stored {
                None => {
                    meta.insert("partitions", u64::from(parts)).map_err(err)?;
                }
                Some(n) if n == u64::from(parts) => {}
                Some(n) => {
                    return Err(StoreError::Io(format!(
                        "store has {n} partitions, configuration says {parts}"
                    )))
                }
            }
            let format = meta.get("format").map_err(err)?.map(|g| g.value());
            match format {
                Some(FORMAT) => {}
                Some(1 | 2) => {
                    meta.insert("format", FORMAT).map_err(err)?;
                }
                Some(n) => {
                    return Err(StoreError::Io(format!(
                        "store is in on-disk format {n}, this byzfs reads format {FORMAT}; \
                         run the byzfs that wrote it, or delete the data directory"
                    )))
                }
                // New, or written before the key existed (format 1).
                None => {
                    meta.insert("format", FORMAT).map_err(err)?;
                }
            }
            tx.open_table(LIVE).map_err(err)?;
            tx.open_table(TAIL).map_err(err)?;
            tx.open_table(UNDO).map_err(err)?;
            tx.open_table(SUMS).map_err(err)?;
            tx.open_table(CHECKPOINTS).map_err(err)?;
        }
        tx.commit().map_err(err)?;
        let mut sums = vec![Sum::ZERO; parts as usize];
        let mut checkpoints = Vec::new();
        {
            let rx = db.begin_read().map_err(err)?;
            let t = rx.open_table(SUMS).map_err(err)?;
            for row in t.iter().map_err(err)? {
                let (p, s) = row.map_err(err)?;
                let bytes: &[u8; SUM_BYTES] = s
                    .value()
                    .try_into()
                    .map_err(|_| StoreError::Io("corrupt sum".into()))?;
                if let Some(slot) = sums.get_mut(p.value() as usize) {
                    *slot = Sum::from_bytes(bytes);
                }
            }
            let t = rx.open_table(CHECKPOINTS).map_err(err)?;
            for row in t.iter().map_err(err)? {
                let (seq, d) = row.map_err(err)?;
                checkpoints.push((seq.value(), decode_digests(d.value())));
            }
        }
        let digests = sums
            .iter()
            .enumerate()
            .map(|(i, s)| partition_digest(i as u32, s))
            .collect();
        let in_tables = checkpoints.iter().map(|c| c.0).collect();
        Ok(RedbStore {
            db,
            staged: Staged::default(),
            write_back_bytes: DEFAULT_WRITE_BACK_BYTES,
            sums,
            digests,
            checkpoints,
            failed: OnceLock::new(),
            scratch: false,
            in_tables,
            keep: None,
            reader: RefCell::new(None),
            path: std::path::PathBuf::new(),
            compaction: None,
            last_held: 0,
        })
    }

    /// A persistent store at `path` for an owner that records which checkpoint it relies on
    /// elsewhere (a replica, in its own database): commits are durable only in
    /// [`RedbStore::persist`], and [`RedbStore::reopen_at`] returns a reopened store to the
    /// checkpoint the owner recorded. `fresh` replaces any file at `path` with an empty
    /// store (the owner recorded no checkpoint yet). See "Persistent stores" in the module
    /// docs.
    pub fn open_persistent(
        path: impl AsRef<Path>,
        partitions: u32,
        cache_bytes: usize,
        fresh: bool,
    ) -> Result<RedbStore, StoreError> {
        if fresh {
            match std::fs::remove_file(path.as_ref()) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(err(e)),
            }
        }
        let mut store = Self::open_with_cache(path, partitions, cache_bytes)?;
        store.keep = Some(store.checkpoints.first().map_or(0, |c| c.0));
        Ok(store)
    }

    /// [`RedbStore::open_persistent`] over a redb storage `backend` the caller supplies
    /// instead of a file: the simulator's disk, which keeps what was synced apart from what
    /// was only written, so that a power cut can lose the latter (`byzfs-sim`, families
    /// `fs-disk-crash` and `fs-disk-power-cuts`). An empty backend is a fresh store. No
    /// compaction (it measures the file by its path).
    pub fn open_persistent_on(
        backend: impl StorageBackend,
        partitions: u32,
        cache_bytes: usize,
    ) -> Result<RedbStore, StoreError> {
        let db = Database::builder()
            .set_cache_size(cache_bytes)
            .create_with_backend(backend)
            .map_err(err)?;
        let mut store = Self::init(db, partitions)?;
        store.keep = Some(store.checkpoints.first().map_or(0, |c| c.0));
        Ok(store)
    }

    /// Makes everything applied so far durable, with every held checkpoint, in one synced
    /// commit; `stored` is the checkpoint the owner is about to record as its own (the one
    /// [`RedbStore::reopen_at`] will be asked for). Until the next call, checkpoints are
    /// kept from the one named at the previous call, which the owner's record still names
    /// until its own commit. A no-op on other stores.
    pub fn persist(&mut self, stored: Seq) -> Result<(), StoreError> {
        let Some(keep) = self.keep else {
            return Ok(());
        };
        debug_assert!(self.checkpoints.iter().any(|c| c.0 == stored));
        self.flush()?;
        // Durable: an otherwise empty commit with a sync, which also makes every earlier
        // non-durable commit durable (redb frees pages only at such commits).
        self.reader.get_mut().take();
        let mut tx = self.db.begin_write().map_err(err)?;
        tx.set_durability(Durability::Immediate)
            .map_err(|e| StoreError::Io(e.to_string()))?;
        tx.commit().map_err(err)?;
        self.keep = Some(stored.max(keep));
        if let Some(c) = self.compaction {
            if c.interval > 0 && (stored / c.interval) % c.replicas.max(1) == c.index {
                self.compact_if_wasteful()?;
            }
        }
        Ok(())
    }

    /// Lets this persistent store compact its file at its turns among the cluster's
    /// replicas ([`Compaction`]), right after a stable checkpoint's synced commit
    /// ([`RedbStore::persist`]). redb reuses freed pages but gives the file's space back
    /// only when its end is free, so after a large file is written and removed the file
    /// stays as large as it grew; compaction moves the live pages to its front and cuts
    /// the rest. It costs time in proportion to the file, during which this replica
    /// executes nothing: the turns keep the other replicas, a quorum, going meanwhile.
    pub fn set_compaction(&mut self, c: Compaction) {
        self.compaction = Some(c);
    }

    /// Compacts the file if it is at least [`COMPACT_MIN_BYTES`], more than half as large
    /// again as what its tables hold (plus a quarter of that minimum, so a small store is
    /// not compacted over and over), and what they hold settled since the last look (it
    /// neither grew nor fell by more than an eighth).
    /// Returns whether it did.
    pub fn compact_if_wasteful(&mut self) -> Result<bool, StoreError> {
        let file = match std::fs::metadata(&self.path) {
            Ok(m) => m.len(),
            Err(_) => return Ok(false),
        };
        if file < COMPACT_MIN_BYTES {
            return Ok(false);
        }
        self.flush()?;
        self.reader.get_mut().take();
        let tx = self.db.begin_write().map_err(err)?;
        let stats = tx.stats().map_err(err)?;
        tx.abort().map_err(err)?;
        // What the tables hold; `fragmented_bytes` is the free space compaction gives back.
        let held = stats.stored_bytes() + stats.metadata_bytes();
        // Only once the data settled. A growing file has free pages ahead of its writes
        // (redb grows it by regions: 35-60 % of it while a 1 GiB file was written), which
        // it reuses at once. A shrinking one (the reclaim queue at work) would be compacted
        // again at every turn, each time moving the pages still live: with a 2 GiB file
        // being deleted, that kept two replicas behind the others and stalled a busy
        // mount for 4 s. Once the deletions end, most of the file is free and compaction
        // moves little.
        let grew = held > self.last_held;
        let shrinking = held + held / 8 + COMPACT_MIN_BYTES / 4 < self.last_held;
        self.last_held = held;
        if grew || shrinking || file <= held + held / 2 + COMPACT_MIN_BYTES / 4 {
            return Ok(false);
        }
        self.db
            .compact()
            .map_err(|e| StoreError::Io(format!("compacting the store: {e}")))
    }

    /// Returns a reopened persistent store to held checkpoint `seq`: rolls back every later
    /// checkpoint and what was executed after it, drops the earlier ones, and returns the
    /// checkpoint's partition digests. An error if `seq` is not held, or if the rolled-back
    /// state does not match the digests recorded for it (a damaged file).
    pub fn reopen_at(&mut self, seq: Seq) -> Result<Vec<Digest>, StoreError> {
        let held: Vec<Seq> = self.checkpoints.iter().map(|c| c.0).collect();
        let Some(want) = self.checkpoint_digests(seq) else {
            return Err(StoreError::Io(format!(
                "the store holds no checkpoint {seq} (it holds {held:?})"
            )));
        };
        while let Some(latest) = self.rollback() {
            if latest == seq {
                break;
            }
            // Its undo records were just replayed and removed; drop its record too.
            self.delete_checkpoints(&[latest], "reopening");
            self.in_tables.remove(&latest);
            self.checkpoints.pop();
        }
        let older = self.held_below(seq);
        if !older.is_empty() {
            self.delete_checkpoints(&older, "reopening");
            self.checkpoints.retain(|c| c.0 >= seq);
        }
        if let Some(f) = self.failure() {
            return Err(StoreError::Io(f));
        }
        if self.latest() != Some(seq) || self.digests != want {
            return Err(StoreError::Io(format!(
                "rolled back to checkpoint {seq}, the store does not match its digests"
            )));
        }
        self.keep = Some(seq);
        Ok(want)
    }

    /// The durability a commit asks for: `wanted`, always `Immediate` on a scratch store,
    /// and `None` on a persistent one (durable only in [`RedbStore::persist`]).
    fn durability(&self, wanted: Durability) -> Durability {
        if self.scratch {
            Durability::Immediate
        } else if self.keep.is_some() {
            Durability::None
        } else {
            wanted
        }
    }

    /// Records a disk failure where the trait has no error channel (the first one wins;
    /// see the module docs); `None` on failure.
    fn fatal<T>(&self, what: &str, r: Result<T, StoreError>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                let msg = match e {
                    StoreError::Full => format!(
                        "the file service's store ran out of disk space during {what}; \
                         free space and restart the replica (it recovers from its log and \
                         by state transfer)"
                    ),
                    StoreError::Io(m) => format!(
                        "the file service's store failed during {what}: {m}; check the disk \
                         and restart the replica (or delete its data directory so it \
                         rejoins by state transfer)"
                    ),
                };
                let _ = self.failed.set(msg);
                None
            }
        }
    }

    /// Sets how many bytes of writes the store stages in memory before committing them to
    /// redb (16 MiB by default; 0 commits every `apply` at once).
    pub fn set_write_back_bytes(&mut self, bytes: usize) {
        self.write_back_bytes = bytes;
    }

    fn latest(&self) -> Option<Seq> {
        self.checkpoints.last().map(|c| c.0)
    }

    /// Held checkpoints older than `seq`, oldest first.
    fn held_below(&self, seq: Seq) -> Vec<Seq> {
        self.checkpoints
            .iter()
            .map(|c| c.0)
            .filter(|&s| s < seq)
            .collect()
    }

    /// Commits the staged writes to redb in one transaction (no fsync).
    fn flush(&mut self) -> Result<(), StoreError> {
        if self.staged.live.is_empty()
            && self.staged.undo.is_empty()
            && self.staged.sums.is_empty()
            && self.staged.cps.is_empty()
        {
            return Ok(());
        }
        let staged = std::mem::take(&mut self.staged);
        self.reader.get_mut().take();
        let mut tx = self.db.begin_write().map_err(err)?;
        tx.set_durability(self.durability(Durability::None))
            .map_err(|e| StoreError::Io(e.to_string()))?;
        {
            let mut live = tx.open_table(LIVE).map_err(err)?;
            let mut tail = tx.open_table(TAIL).map_err(err)?;
            for (k, v) in &staged.live {
                write_live(
                    &mut live,
                    &mut tail,
                    k,
                    v.as_deref(),
                    staged.tailed.contains(k),
                )?;
            }
            let mut undo = tx.open_table(UNDO).map_err(err)?;
            for (k, v) in &staged.undo {
                if let Some(v) = v {
                    undo.insert(k.as_slice(), v.as_slice()).map_err(err)?;
                }
            }
            let mut sums = tx.open_table(SUMS).map_err(err)?;
            for &p in &staged.sums {
                sums.insert(p, self.sums[p as usize].to_bytes().as_slice())
                    .map_err(err)?;
            }
            let mut cps = tx.open_table(CHECKPOINTS).map_err(err)?;
            for (seq, d) in &staged.cps {
                cps.insert(*seq, d.as_slice()).map_err(err)?;
            }
        }
        tx.commit().map_err(err)?;
        // Every staged undo record and checkpoint record belonged to a held checkpoint.
        self.in_tables.extend(self.checkpoints.iter().map(|c| c.0));
        Ok(())
    }

    /// [`RedbStore::flush`], recording a failure (for methods without an error channel).
    fn flush_or_fail(&mut self, what: &str) -> Option<()> {
        let r = self.flush();
        self.fatal(what, r)
    }

    /// Deletes the undo records and records of checkpoints `seqs` from the tables (not
    /// what is staged), recording a failure during `what`.
    fn delete_checkpoints(&mut self, seqs: &[Seq], what: &str) {
        let r = self.write(Durability::None, |t, _| {
            for s in seqs {
                for (k, _) in scan_prefix(&t.undo, &undo_prefix(*s, None))? {
                    t.undo.remove(k.as_slice()).map_err(err)?;
                }
                t.cps.remove(*s).map_err(err)?;
            }
            Ok(())
        });
        let _ = self.fatal(what, r);
    }

    /// Runs `f` on the cached read tables, opening them first if needed.
    fn read<R>(&self, f: impl FnOnce(&Reader) -> Result<R, StoreError>) -> Result<R, StoreError> {
        let mut cached = self.reader.borrow_mut();
        if cached.is_none() {
            let rx = self.db.begin_read().map_err(err)?;
            *cached = Some(Reader {
                live: rx.open_table(LIVE).map_err(err)?,
                tail: rx.open_table(TAIL).map_err(err)?,
                undo: rx.open_table(UNDO).map_err(err)?,
            });
        }
        match cached.as_ref() {
            Some(r) => f(r),
            None => Err(StoreError::Io("no read transaction".into())),
        }
    }

    /// Stages `writes` (see "Write-back" in the module docs): reads every old value first,
    /// so a read error leaves nothing changed.
    fn stage(&mut self, writes: WriteSet) -> Result<(), StoreError> {
        let parts = self.partition_count();
        let undo_at = self.latest();
        // Taken out of the cache for the loop (the loop mutates `self`), put back after.
        self.read(|_| Ok(()))?;
        let reader = self.reader.get_mut().take();
        let Some(Reader { live, tail, undo }) = reader else {
            return Err(StoreError::Io("no read transaction".into()));
        };
        let tables = Reader { live, tail, undo };
        let r = self.stage_with(writes, parts, undo_at, &tables);
        *self.reader.get_mut() = Some(tables);
        r
    }

    /// [`RedbStore::stage`] over the given read tables.
    fn stage_with(
        &mut self,
        writes: WriteSet,
        parts: u32,
        undo_at: Option<Seq>,
        tables: &Reader,
    ) -> Result<(), StoreError> {
        let Reader { live, tail, undo } = tables;
        let mut edits = SumEdits {
            base: &self.sums,
            changed: BTreeMap::new(),
        };
        let mut live_new = Vec::new();
        let mut undo_new = Vec::new();
        let mut tailed = Vec::new();
        for (key, value) in writes {
            let p = partition_of(&key, parts);
            let lk = live_key(p, &key);
            let old: Option<Vec<u8>> = match self.staged.live.get(&lk) {
                Some(v) => v.clone(),
                None => {
                    // First staged since the last flush: what the tables hold.
                    let stored = read_live(live, tail, &lk)?;
                    if has_tail(stored.as_deref()) {
                        tailed.push(lk.clone());
                    }
                    stored
                }
            };
            if old == value {
                continue;
            }
            let sum = edits.get(p);
            if let Some(o) = &old {
                sum.sub(&leaf_hash(&key, o));
            }
            if let Some(v) = &value {
                sum.add(&leaf_hash(&key, v));
            }
            if let Some(seq) = undo_at {
                let uk = undo_key(seq, p, &key);
                if !self.staged.undo.contains_key(&uk)
                    && undo.get(uk.as_slice()).map_err(err)?.is_none()
                {
                    undo_new.push((uk, encode_old(old.as_deref())));
                }
            }
            live_new.push((lk, value));
        }
        let changed = edits.changed;
        let staged = &mut self.staged;
        staged.tailed.extend(tailed);
        for (k, v) in live_new {
            staged.bytes += k.len() + v.as_ref().map_or(0, Vec::len);
            staged.live.insert(k, v);
        }
        for (k, v) in undo_new {
            staged.bytes += k.len() + v.len();
            staged.undo.insert(k, Some(v));
        }
        for (p, s) in changed {
            self.digests[p as usize] = partition_digest(p, &s);
            self.sums[p as usize] = s;
            staged.sums.insert(p);
        }
        Ok(())
    }

    /// Runs `f` in one write transaction with `durability`; on success installs the changed
    /// sums.
    fn write<R>(
        &mut self,
        durability: Durability,
        f: impl FnOnce(&mut Tables<'_>, &mut SumEdits<'_>) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        self.reader.get_mut().take();
        let mut tx = self.db.begin_write().map_err(err)?;
        tx.set_durability(self.durability(durability))
            .map_err(|e| StoreError::Io(e.to_string()))?;
        let mut edits = SumEdits {
            base: &self.sums,
            changed: BTreeMap::new(),
        };
        let r = {
            let mut t = Tables {
                live: tx.open_table(LIVE).map_err(err)?,
                tail: tx.open_table(TAIL).map_err(err)?,
                undo: tx.open_table(UNDO).map_err(err)?,
                cps: tx.open_table(CHECKPOINTS).map_err(err)?,
            };
            let r = f(&mut t, &mut edits)?;
            let mut sums = tx.open_table(SUMS).map_err(err)?;
            for (p, s) in &edits.changed {
                sums.insert(*p, s.to_bytes().as_slice()).map_err(err)?;
            }
            r
        };
        tx.commit().map_err(err)?;
        let changed = edits.changed;
        for (p, s) in changed {
            self.digests[p as usize] = partition_digest(p, &s);
            self.sums[p as usize] = s;
        }
        Ok(r)
    }
}

impl Store for RedbStore {
    fn failure(&self) -> Option<String> {
        self.failed.get().cloned()
    }

    fn partition_count(&self) -> u32 {
        // Built from a `u32` in `open`.
        self.sums.len() as u32
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let p = partition_of(key, self.partition_count());
        let lk = live_key(p, key);
        if let Some(v) = self.staged.live.get(&lk) {
            return Ok(v.clone());
        }
        self.read(|r| read_live(&r.live, &r.tail, &lk))
    }

    fn range(&self, start: &[u8], end: &[u8], limit: usize) -> Result<Entries, StoreError> {
        if start >= end {
            return Ok(Vec::new());
        }
        let p = partition_of(start, self.partition_count());
        let (s, e) = (live_key(p, start), live_key(p, end));
        let staged: Vec<(&Vec<u8>, &Option<Vec<u8>>)> =
            self.staged.live.range(s.clone()..e.clone()).collect();
        // Staged deletions may hide up to `staged.len()` of the stored entries.
        let mut items: BTreeMap<Vec<u8>, Vec<u8>> = self.read(|r| {
            let mut items = BTreeMap::new();
            for row in r
                .live
                .range::<&[u8]>(s.as_slice()..e.as_slice())
                .map_err(err)?
                .take(limit.saturating_add(staged.len()))
            {
                let (k, v) = row.map_err(err)?;
                let mut v = v.value().to_vec();
                join_tail(&r.tail, k.value(), &mut v)?;
                items.insert(k.value().to_vec(), v);
            }
            Ok(items)
        })?;
        for (k, v) in staged {
            match v {
                Some(v) => items.insert(k.clone(), v.clone()),
                None => items.remove(k),
            };
        }
        Ok(items
            .into_iter()
            .take(limit)
            .map(|(k, v)| (k[4..].to_vec(), v))
            .collect())
    }

    fn apply(&mut self, writes: WriteSet) -> Result<(), StoreError> {
        let mut r = self.stage(writes);
        if r.is_ok() && self.staged.bytes > self.write_back_bytes {
            r = self.flush();
        }
        if let Err(e) = &r {
            // redb refuses every later write after an I/O error ("close and re-open the
            // database"), and the operation's answer already differs from the other
            // replicas': record it, so the driver stops before that answer leaves.
            let _ = self.fatal("a write", Err::<(), _>(e.clone()));
        }
        r
    }

    fn current_digests(&self) -> Vec<Digest> {
        self.digests.clone()
    }

    fn checkpoint(&mut self, seq: Seq) -> Vec<Digest> {
        // Checkpoints at >= seq are replaced; their undo records fold into the previous one.
        let mut dropped = Vec::new();
        while self.checkpoints.last().is_some_and(|c| c.0 >= seq) {
            if let Some((s, _)) = self.checkpoints.pop() {
                dropped.push(s);
            }
        }
        let digests = self.digests.clone();
        if (self.scratch || self.keep.is_some()) && dropped.is_empty() {
            // Nothing to move between checkpoints, and nothing to make durable: stage the
            // record, and let the staged writes reach redb when they exceed the write-back
            // limit (or before a method that works on the tables).
            let d = encode_digests(&digests);
            self.staged.bytes += 8 + d.len();
            self.staged.cps.insert(seq, d);
            self.checkpoints.push((seq, digests.clone()));
            return digests;
        }
        let _ = self.flush_or_fail("checkpoint");
        let prev = self.latest();
        let r = self.write(Durability::Immediate, |t, _| {
            for s in dropped {
                for (k, v) in scan_prefix(&t.undo, &undo_prefix(s, None))? {
                    t.undo.remove(k.as_slice()).map_err(err)?;
                    if let Some(p) = prev {
                        let mut nk = undo_prefix(p, None);
                        nk.extend_from_slice(&k[8..]);
                        if t.undo.get(nk.as_slice()).map_err(err)?.is_none() {
                            t.undo.insert(nk.as_slice(), v.as_slice()).map_err(err)?;
                        }
                    }
                }
                t.cps.remove(s).map_err(err)?;
            }
            t.cps
                .insert(seq, encode_digests(&digests).as_slice())
                .map_err(err)?;
            Ok(())
        });
        let _ = self.fatal("checkpoint", r);
        self.checkpoints.push((seq, digests.clone()));
        self.in_tables.insert(seq);
        digests
    }

    fn checkpoint_digests(&self, seq: Seq) -> Option<Vec<Digest>> {
        self.checkpoints
            .iter()
            .find(|c| c.0 == seq)
            .map(|c| c.1.clone())
    }

    fn latest_checkpoint(&self) -> Option<Seq> {
        self.latest()
    }

    fn discard_checkpoints_below(&mut self, seq: Seq) {
        // A persistent store keeps the checkpoint its owner's record names.
        let seq = self.keep.map_or(seq, |k| seq.min(k));
        let gone = self.held_below(seq);
        if gone.is_empty() {
            return;
        }
        // What is still staged for them never needs to reach redb.
        for &s in &gone {
            self.staged.discard_checkpoint(s);
        }
        let in_tables: Vec<Seq> = gone
            .iter()
            .copied()
            .filter(|s| self.in_tables.contains(s))
            .collect();
        if !in_tables.is_empty() {
            // No flush first: nothing staged belongs to these checkpoints any more, and a
            // flush would mark the checkpoints still held as in the tables, so that every
            // later discard would flush again.
            self.delete_checkpoints(&in_tables, "discarding checkpoints");
            for s in &in_tables {
                self.in_tables.remove(s);
            }
        }
        self.checkpoints.retain(|c| c.0 >= seq);
    }

    fn rollback(&mut self) -> Option<Seq> {
        let seq = self.latest()?;
        self.flush_or_fail("rollback")?;
        let r = self.write(Durability::None, |t, sums| {
            for (k, v) in scan_prefix(&t.undo, &undo_prefix(seq, None))? {
                t.undo.remove(k.as_slice()).map_err(err)?;
                let mut p = [0u8; 4];
                p.copy_from_slice(&k[8..12]);
                let old = decode_old(&v)?;
                let p = u32::from_be_bytes(p);
                set(
                    &mut t.live,
                    &mut t.tail,
                    &mut t.undo,
                    None,
                    sums,
                    p,
                    &k[12..],
                    old,
                )?;
            }
            Ok(())
        });
        self.fatal("rollback", r)?;
        debug_assert_eq!(
            Some(self.current_digests()),
            self.checkpoint_digests(seq),
            "rollback must restore the checkpoint's digests"
        );
        Some(seq)
    }

    fn export_partition(&self, seq: Seq, part: u32) -> Option<Vec<u8>> {
        if part >= self.partition_count() {
            return None;
        }
        let from = self.checkpoints.iter().position(|c| c.0 == seq)?;
        let read = || -> Result<Option<Vec<u8>>, StoreError> {
            let rx = self.db.begin_read().map_err(err)?;
            let live = rx.open_table(LIVE).map_err(err)?;
            let tail = rx.open_table(TAIL).map_err(err)?;
            let undo = rx.open_table(UNDO).map_err(err)?;
            let prefix = part.to_be_bytes();
            let mut items: BTreeMap<Vec<u8>, Vec<u8>> = merged(
                scan_live(&live, &tail, &prefix)?,
                &self.staged.live,
                &prefix,
            )?
            .into_iter()
            .map(|(k, v)| (k[4..].to_vec(), v))
            .collect();
            // Newest checkpoint first, so the oldest record (the value at `seq`) wins.
            for (s, _) in self.checkpoints[from..].iter().rev() {
                let prefix = undo_prefix(*s, Some(part));
                for (k, v) in merged(scan_prefix(&undo, &prefix)?, &self.staged.undo, &prefix)? {
                    let key = k[12..].to_vec();
                    match decode_old(&v)? {
                        Some(old) => items.insert(key, old.to_vec()),
                        None => items.remove(&key),
                    };
                }
            }
            Ok(encode_partition(
                items.iter().map(|(k, v)| (k.as_slice(), v.as_slice())),
            ))
        };
        self.fatal("export", read()).flatten()
    }

    fn import_partition(&mut self, part: u32, data: &[u8], expected: Digest) -> bool {
        let Some(items) = verify_partition(data, part, self.partition_count(), expected) else {
            return false;
        };
        if self.flush_or_fail("import").is_none() {
            return false;
        }
        let undo_at = self.latest();
        let r = self.write(Durability::None, |t, sums| {
            let new: BTreeMap<&[u8], &[u8]> = items.iter().copied().collect();
            let Tables {
                live, tail, undo, ..
            } = t;
            for (k, _) in scan_prefix(live, &part.to_be_bytes())? {
                if !new.contains_key(&k[4..]) {
                    set(live, tail, undo, undo_at, sums, part, &k[4..], None)?;
                }
            }
            for (k, v) in &items {
                set(live, tail, undo, undo_at, sums, part, k, Some(v))?;
            }
            Ok(())
        });
        if self.fatal("import", r).is_none() {
            return false;
        }
        debug_assert_eq!(self.digests[part as usize], expected);
        true
    }

    fn finish_import(&mut self, seq: Seq) -> Vec<Digest> {
        // A persistent store keeps the checkpoint its owner's record names, and those after
        // it: the imports were recorded as writes after the latest, so rolling back through
        // them still reaches it.
        let keep = self.keep.unwrap_or(Seq::MAX);
        let all = self.held_below(keep);
        let _ = self.flush_or_fail("finishing an import");
        self.delete_checkpoints(&all, "finishing an import");
        self.checkpoints.retain(|c| c.0 >= keep);
        self.in_tables.retain(|&s| s >= keep);
        self.checkpoint(seq)
    }

    fn persists(&self) -> bool {
        self.keep.is_some()
    }

    fn persist(&mut self, stored: Seq) -> Result<(), StoreError> {
        RedbStore::persist(self, stored)
    }

    fn reopen_at(&mut self, seq: Seq) -> Result<Vec<Digest>, StoreError> {
        RedbStore::reopen_at(self, seq)
    }
}

/// Commits what is staged, so a store closed cleanly reopens with every write (as redb's
/// own non-durable commits do). A failure here loses only writes after the last checkpoint,
/// which a replica rebuilds from its log at start anyway.
impl Drop for RedbStore {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}
