//! Durability of the core's promises and state (ARCHITECTURE.md "Durability"; the `Persist`
//! contract of [`byzfs_bft::action`]).
//!
//! The event loop collects every [`PersistRecord`] and [`StoreRecord`] of one drain (one or
//! more handled inputs) and hands them to [`Durability::commit`] in one call — a group
//! commit — before it performs any send of that drain. Delaying sends is always safe; sending
//! before the commit is not.
//!
//! Two modes:
//! * [`MemoryDurability`] (`memory`, the BFT library's BFS choice: stability through
//!   replication): the commit is a no-op; a restarted replica starts empty and rejoins through
//!   state transfer, counting as one of the `f` faults meanwhile.
//! * [`DiskDurability`] (`disk`, the default): the promises, the `Executed` records and the
//!   bodies of batches voted for go to a write-ahead log, one appended frame and one
//!   `fdatasync` per drain (`storage/wal.rs`); the image of the last stable checkpoint (partition by
//!   partition, only changed partitions rewritten), the highest view and the owner go to a
//!   redb database. At start both load into a [`DurableState`] for
//!   [`byzfs_bft::Replica::restore`].
//!
//! **Records that may wait.** A drain whose only records are `Executed`, the primary's
//! `Proposed` and a backup's `Voted` (with the batch bodies voted for) is appended without
//! an `fdatasync`: it becomes durable with the next drain that holds a promise, or at
//! [`Durability::sync`] (before a CHECKPOINT). Being written before the drain's sends, it
//! survives a crash of the process; only a power cut or a kernel crash can lose it. That
//! saves the primary's and the backups' `fdatasync`s before PRE-PREPARE and PREPARE, so
//! a read-write request waits for one (before COMMIT). After such a loss the restored
//! primary must not propose again in the view it restarts in, nor any replica prepare
//! again in it ([`byzfs_bft::PersistRecord::Proposed`], [`byzfs_bft::PersistRecord::Voted`]),
//! so the store says whether its unsynced votes can
//! be trusted to be all there ([`DurableState::proposals_durable`]): yes for a data
//! directory created by this start; after a clean stop ([`Durability::close`] syncs the
//! log and leaves a mark in the database that the next start consumes); and when the
//! machine has not restarted since the last start (the kernel's boot id, stored at each
//! start, is unchanged), because then every write the last run made reached the file, even
//! if the process was killed. Only after a power cut or a kernel crash does a restored
//! primary give its view up (its backups follow at once, into the next view), and a
//! restored backup abstain from PREPAREs in its view up to its vote horizon (`abstain` in
//! the database keeps that across later restarts).

mod counters;
mod wal;

pub use counters::DiskCounters;

use byzfs_bft::message::BatchBody;
use byzfs_bft::replica::{record_seq, DurableState, StoredBatch, StoredCheckpoint};
use byzfs_bft::{CheckpointImage, Digest, PersistRecord, Seq, StoreRecord};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use std::path::{Path, PathBuf};

/// Where promises go.
pub trait Durability: Send {
    /// Makes every record durable before returning, except that a call whose only records
    /// are `Executed` may leave them to become durable with a later call (nothing sent
    /// depends on them: see [`PersistRecord::Executed`]). An error stops the replica: it must
    /// not send votes it could forget. Within one call, records and stores are applied in
    /// this order: promises, then stores (a stored checkpoint then drops what it covers).
    fn commit(&mut self, records: &[PersistRecord], stores: &[StoreRecord]) -> std::io::Result<()>;

    /// Makes every record of earlier calls durable, the `Executed` ones left unsynced
    /// included ([`byzfs_bft::Action::Sync`]).
    fn sync(&mut self) -> std::io::Result<()> {
        Ok(())
    }

    /// The replica stopped cleanly (nothing more will be committed or sent): makes every
    /// record durable and notes that nothing was lost, so the next start may trust its
    /// proposals ([`DurableState::proposals_durable`]).
    fn close(&mut self) -> std::io::Result<()> {
        Ok(())
    }

    /// The mode's name, as shown by `byzfs status`.
    fn name(&self) -> &'static str;

    /// The data directory, for `byzfs status` to show its size; `None` when nothing is kept.
    fn dir(&self) -> Option<&Path> {
        None
    }

    /// What was stored before this start, for [`byzfs_bft::Replica::restore`]; `None` when
    /// the mode stores nothing (the replica then starts fresh). Taken once.
    fn take_loaded(&mut self) -> Option<DurableState> {
        None
    }

    /// What this mode wrote since it was opened. Default: nothing.
    fn counters(&self) -> DiskCounters {
        DiskCounters::default()
    }
}

/// Memory mode: nothing is written.
#[derive(Clone, Copy, Debug, Default)]
pub struct MemoryDurability;

impl Durability for MemoryDurability {
    fn commit(
        &mut self,
        _records: &[PersistRecord],
        _stores: &[StoreRecord],
    ) -> std::io::Result<()> {
        Ok(())
    }

    fn name(&self) -> &'static str {
        "memory"
    }
}

/// The database file inside a replica's data directory.
pub const DB_FILE: &str = "replica.redb";

/// `meta`: "identity" → who owns the store; "view" → highest view (u64 LE); "abstain" →
/// the highest [`PersistRecord::AbstainUpTo`] (view and seq, u64 LE each; a format-2
/// store's 8 bytes are a [`PersistRecord::Abstain`]'s view); "horizon" → the highest
/// [`PersistRecord::VoteHorizon`] (u64 LE: kept here, not in the log, so that pruning the
/// log never drops it and it never holds a segment back); "checkpoint" → postcard
/// `(seq, digest, partitions)` of the stored stable checkpoint.
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

/// On-disk format of a replica's data directory (`replica.redb` and its log), stored in
/// `meta` as `format` (u32 LE). Directories written before the key existed are format 1.
/// Bump it with any incompatible change of the tables or the log's frames. Format 2 (durable
/// checkpoint certificates) adds the log record `Certified`, which a format-1 binary cannot decode: it opens format
/// 1 directories and marks them 2, so an older binary refuses them instead of misreading
/// them. Format 3 (the vote horizon, ARCHITECTURE.md Deviations 25) adds the `meta` key `horizon` and stores `abstain` as
/// `(view, seq)`; it opens formats 1 and 2 (which have neither) and marks them 3. Format 4
/// changes every state digest (a leaf's summand is expanded from a 32-byte seed,
/// `byzfs_bft::state::leaf_seed`) and keeps the file service's state in a log store
/// (`fs-state/`, `byzfs_fs::store::LogStore`) instead of `fs-state.redb`: the checkpoints a
/// format-3 directory holds no longer match any replica's, so formats 1 to 3 are refused.
pub const FORMAT: u32 = 4;
/// `meta` key present after a clean stop ([`Durability::close`]).
const CLEAN: &str = "clean";
/// `meta` key: the kernel's boot id at the last start.
const BOOT: &str = "boot";
/// `meta` key: see [`META`].
const ABSTAIN: &str = "abstain";
/// `meta` key: see [`META`].
const HORIZON: &str = "horizon";

/// Records kept in the database rather than the log.
fn outside_log(r: &PersistRecord) -> bool {
    matches!(
        r,
        PersistRecord::View(_)
            | PersistRecord::Abstain(_)
            | PersistRecord::AbstainUpTo { .. }
            | PersistRecord::VoteHorizon(_)
    )
}

/// The running kernel's boot id (`None` if it cannot be read: then only a new directory or
/// a clean stop vouches for the log).
fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}
/// `records`: (seq, postcard record) → () for `Prepared`, `Committed` and `Executed`. Written
/// by data directories made before the log ([`wal`]); moved into the log at open.
const RECORDS: TableDefinition<(u64, &[u8]), ()> = TableDefinition::new("records");
/// `batches`: digest → seq (u64 LE) ‖ postcard `(BatchBody, big frames)`. As `records`.
const BATCHES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("batches");
/// `parts`: partition index → digest (32 bytes) ‖ content, as of the stored checkpoint.
const PARTS: TableDefinition<u32, &[u8]> = TableDefinition::new("parts");

/// Why the disk store cannot be used. Each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The directory or database file cannot be created or opened.
    #[error("cannot use the data directory {}: {error}; check its permissions and free space, or pass another --data", path.display())]
    Unusable {
        /// The directory.
        path: PathBuf,
        /// What failed.
        error: String,
    },
    /// Another process holds the database.
    #[error("the database {} is in use by another process; stop the other replica or pass another --data", path.display())]
    InUse {
        /// The database file.
        path: PathBuf,
    },
    /// The database does not decode or does not restore.
    #[error("the database {} is corrupt ({what}); delete the data directory to rejoin through state transfer", path.display())]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// The data directory was written in another on-disk format.
    #[error("the database {} is in on-disk format {found}, this byzfs reads format {supported}; run the byzfs that wrote it, or delete the data directory to rejoin through state transfer", path.display())]
    Format {
        /// The database file.
        path: PathBuf,
        /// Its format.
        found: u32,
        /// The format this build reads and writes.
        supported: u32,
    },
    /// The database belongs to another replica, cluster or service.
    #[error("the database {} belongs to {found}, not to {expected}; pass the right --data or delete that directory", path.display())]
    Foreign {
        /// The database file.
        path: PathBuf,
        /// Its owner.
        found: String,
        /// Who opened it.
        expected: String,
    },
}

/// Bytes the files in `dir` and in its directories take on disk (allocated blocks, not
/// apparent sizes: what `du` counts), one level down (a data directory holds the file
/// service's store in `fs-state/`); symbolic links are not followed; 0 for what cannot be
/// read.
pub fn disk_bytes(dir: &Path) -> u64 {
    files_bytes(dir, 1)
}

fn files_bytes(dir: &Path, depth: u32) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .filter_map(Result::ok)
            .map(|e| match e.metadata() {
                // `DirEntry::metadata` does not follow a symbolic link.
                Ok(m) if m.is_file() => m.blocks() * 512,
                Ok(m) if m.is_dir() && depth > 0 => files_bytes(&e.path(), depth - 1),
                _ => 0,
            })
            .sum()
    })
}

/// Disk mode: a write-ahead log, one fsync'd frame per drain (group commit), and a redb
/// database for checkpoints and views.
pub struct DiskDurability {
    db: Database,
    wal: wal::Wal,
    path: PathBuf,
    loaded: Option<DurableState>,
    /// Highest view written (to skip rewriting it).
    view: u64,
    /// Durable database transactions since open ([`DiskCounters::db_commits`]).
    db_commits: u64,
}

impl std::fmt::Debug for DiskDurability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiskDurability")
            .field("path", &self.path)
            .finish()
    }
}

impl DiskDurability {
    /// Opens (creating if needed) the database in `dir` and loads what it holds.
    /// `identity` names the owner (cluster, replica, service); a database created by another
    /// owner is refused.
    pub fn open(dir: &Path, identity: &str) -> Result<Self, StorageError> {
        let unusable = |e: &dyn std::fmt::Display| StorageError::Unusable {
            path: dir.to_path_buf(),
            error: e.to_string(),
        };
        std::fs::create_dir_all(dir).map_err(|e| unusable(&e))?;
        let path = dir.join(DB_FILE);
        let corrupt = |what: String| StorageError::Corrupt {
            path: path.clone(),
            what,
        };
        let db = match Database::create(&path) {
            Ok(db) => db,
            Err(redb::DatabaseError::DatabaseAlreadyOpen) => {
                return Err(StorageError::InUse { path })
            }
            Err(redb::DatabaseError::Storage(redb::StorageError::Io(e)))
                if e.kind() != std::io::ErrorKind::InvalidData
                    && e.kind() != std::io::ErrorKind::UnexpectedEof =>
            {
                return Err(unusable(&e))
            }
            Err(e) => return Err(corrupt(e.to_string())),
        };
        // Create the tables and check (or write) the owner.
        let txn = db.begin_write().map_err(|e| corrupt(e.to_string()))?;
        let trusted;
        {
            let mut meta = txn.open_table(META).map_err(|e| corrupt(e.to_string()))?;
            txn.open_table(RECORDS)
                .map_err(|e| corrupt(e.to_string()))?;
            txn.open_table(BATCHES)
                .map_err(|e| corrupt(e.to_string()))?;
            txn.open_table(PARTS).map_err(|e| corrupt(e.to_string()))?;
            let found = meta
                .get("identity")
                .map_err(|e| corrupt(e.to_string()))?
                .map(|g| String::from_utf8_lossy(g.value()).into_owned());
            match found {
                Some(found) if found != identity => {
                    return Err(StorageError::Foreign {
                        path,
                        found,
                        expected: identity.to_string(),
                    })
                }
                Some(_) => {}
                None => {
                    meta.insert("identity", identity.as_bytes())
                        .map_err(|e| corrupt(e.to_string()))?;
                }
            }
            // A new directory holds no proposal; the mark of a clean stop is consumed here,
            // durably, before this run can propose anything.
            let clean = meta
                .remove(CLEAN)
                .map_err(|e| corrupt(e.to_string()))?
                .is_some();
            let boot = boot_id();
            let same_boot = match (&boot, meta.get(BOOT).map_err(|e| corrupt(e.to_string()))?) {
                (Some(now), Some(before)) => before.value() == now.as_bytes(),
                _ => false,
            };
            if let Some(now) = &boot {
                meta.insert(BOOT, now.as_bytes())
                    .map_err(|e| corrupt(e.to_string()))?;
            }
            trusted = found.is_none() || clean || same_boot;
            let format = meta
                .get("format")
                .map_err(|e| corrupt(e.to_string()))?
                .map(|g| <[u8; 4]>::try_from(g.value()).map_or(u32::MAX, u32::from_le_bytes));
            match (format, &found) {
                (Some(FORMAT), _) => {}
                // A new directory.
                (None, None) => {
                    meta.insert("format", FORMAT.to_le_bytes().as_slice())
                        .map_err(|e| corrupt(e.to_string()))?;
                }
                // Written before the key existed (format 1), or in another format.
                (found, _) => {
                    return Err(StorageError::Format {
                        path,
                        found: found.unwrap_or(1),
                        supported: FORMAT,
                    })
                }
            }
        }
        txn.commit().map_err(|e| corrupt(e.to_string()))?;
        let mut loaded = load(&db).map_err(corrupt)?;
        let (mut wal, frames) = wal::Wal::open(dir).map_err(&corrupt)?;
        migrate_tables(&db, &mut wal, &loaded).map_err(&corrupt)?;
        let stable = loaded.checkpoint.as_ref().map_or(0, |c| c.seq);
        apply_frames(&mut loaded, frames, stable);
        loaded.proposals_durable = trusted;
        let view = loaded
            .records
            .iter()
            .filter_map(|r| match r {
                PersistRecord::View(v) => Some(*v),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        Ok(DiskDurability {
            db,
            wal,
            path,
            loaded: Some(loaded),
            view,
            db_commits: 0,
        })
    }

    /// The sequence number of the stored stable checkpoint, if any (until
    /// [`Durability::take_loaded`]): a service that persists its own state reopens at it,
    /// and starts empty when there is none.
    pub fn stored_checkpoint(&self) -> Option<Seq> {
        self.loaded.as_ref()?.checkpoint.as_ref().map(|c| c.seq)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of log segment files (see `storage/wal.rs`).
    pub fn log_segments(&self) -> usize {
        self.wal.segments()
    }

    fn write(&mut self, records: &[PersistRecord], stores: &[StoreRecord]) -> Result<(), String> {
        let s = |e: &dyn std::fmt::Display| e.to_string();
        // Promises and batch bodies: one log frame.
        // `Proposed` and `Voted` are stored as the `Prepared` they mean (the log's format is
        // unchanged). Views and abstentions go to the database.
        let votes: Vec<PersistRecord> = records
            .iter()
            .filter(|r| !outside_log(r))
            .map(|r| r.as_promise())
            .collect();
        let batches: Vec<wal::BatchRef<'_>> = stores
            .iter()
            .filter_map(|st| match st {
                StoreRecord::Batch {
                    seq,
                    digest,
                    body,
                    big,
                } => Some(wal::BatchRef {
                    seq: *seq,
                    digest: *digest,
                    body,
                    big: big.iter().map(|f| &f[..]).collect(),
                }),
                StoreRecord::Checkpoint(_) => None,
            })
            .collect();
        // A turn whose only records may wait (see the module docs) does not wait for the
        // disk: the frame becomes durable with the next promise. That is one `fdatasync`
        // fewer per read-write request at every replica (`Executed`), and one fewer on its
        // critical path at the primary (`Proposed`) and at each backup (`Voted`).
        // Bodies wait only with such a vote: stored with `Executed` records alone they are
        // what the unreplicated server's replies rest on (`node::oplog`).
        let voting = records.iter().any(|r| r.is_lazy_vote());
        let lazy = (stores.is_empty() || (voting && batches.len() == stores.len()))
            && records
                .iter()
                .filter(|r| !outside_log(r))
                .all(|r| r.may_wait());
        if lazy && (!votes.is_empty() || !batches.is_empty()) {
            self.wal
                .append_unsynced(&votes, &batches)
                .map_err(|e| s(&e))?;
        } else if !votes.is_empty() || !batches.is_empty() {
            self.wal.append(&votes, &batches).map_err(|e| s(&e))?;
        }
        // Views and checkpoints (rare): one redb transaction.
        let view = records
            .iter()
            .filter_map(|r| match r {
                PersistRecord::View(v) => Some(*v),
                _ => None,
            })
            .max()
            .filter(|v| *v > self.view);
        // The core writes each abstention at or above the last (its view, then its bound).
        let abstain = records
            .iter()
            .filter_map(|r| match r {
                PersistRecord::Abstain(v) => Some((*v, Seq::MAX)),
                PersistRecord::AbstainUpTo { view, seq } => Some((*view, *seq)),
                _ => None,
            })
            .max();
        let images: Vec<&CheckpointImage> = stores
            .iter()
            .filter_map(|st| match st {
                StoreRecord::Checkpoint(img) => Some(&**img),
                StoreRecord::Batch { .. } => None,
            })
            .collect();
        let horizon = records
            .iter()
            .filter_map(|r| match r {
                PersistRecord::VoteHorizon(h) => Some(*h),
                _ => None,
            })
            .max();
        if view.is_none() && abstain.is_none() && horizon.is_none() && images.is_empty() {
            return Ok(());
        }
        let mut txn = self.db.begin_write().map_err(|e| s(&e))?;
        txn.set_durability(redb::Durability::Immediate)
            .map_err(|e| s(&e))?;
        {
            let mut meta = txn.open_table(META).map_err(|e| s(&e))?;
            let mut parts = txn.open_table(PARTS).map_err(|e| s(&e))?;
            if let Some(v) = view {
                meta.insert("view", &v.to_le_bytes()[..])
                    .map_err(|e| s(&e))?;
            }
            if let Some(h) = horizon {
                meta.insert(HORIZON, &h.to_le_bytes()[..])
                    .map_err(|e| s(&e))?;
            }
            if let Some((v, up_to)) = abstain {
                let mut b = [0u8; 16];
                b[..8].copy_from_slice(&v.to_le_bytes());
                b[8..].copy_from_slice(&up_to.to_le_bytes());
                meta.insert(ABSTAIN, &b[..]).map_err(|e| s(&e))?;
            }
            for img in &images {
                for (i, d, data) in &img.changed {
                    let mut v = Vec::with_capacity(32 + data.len());
                    v.extend_from_slice(&d.0);
                    v.extend_from_slice(data);
                    parts.insert(*i, v.as_slice()).map_err(|e| s(&e))?;
                }
                let head = postcard::to_allocvec(&(img.seq, img.digest, img.partitions))
                    .map_err(|e| s(&e))?;
                meta.insert("checkpoint", head.as_slice())
                    .map_err(|e| s(&e))?;
            }
        }
        txn.commit().map_err(|e| s(&e))?;
        self.db_commits += 1;
        if let Some(v) = view {
            self.view = v;
        }
        // Everything a stored stable checkpoint covers is never needed again.
        if let Some(stable) = images.iter().map(|i| i.seq).max() {
            self.wal.prune(stable).map_err(|e| s(&e))?;
        }
        Ok(())
    }
}

/// Moves records and batches that a data directory made before the log keeps in redb tables
/// into the log (one frame), then empties the tables.
fn migrate_tables(db: &Database, wal: &mut wal::Wal, loaded: &DurableState) -> Result<(), String> {
    let s = |e: &dyn std::fmt::Display| e.to_string();
    let votes: Vec<PersistRecord> = loaded
        .records
        .iter()
        .filter(|r| !outside_log(r))
        .copied()
        .collect();
    if votes.is_empty() && loaded.batches.is_empty() {
        return Ok(());
    }
    let batches: Vec<wal::BatchRef<'_>> = loaded
        .batches
        .iter()
        .map(|b| wal::BatchRef {
            seq: b.seq,
            digest: b.digest,
            body: &b.body,
            big: b.big.iter().map(Vec::as_slice).collect(),
        })
        .collect();
    wal.append(&votes, &batches).map_err(|e| s(&e))?;
    let mut txn = db.begin_write().map_err(|e| s(&e))?;
    txn.set_durability(redb::Durability::Immediate)
        .map_err(|e| s(&e))?;
    {
        let mut recs = txn.open_table(RECORDS).map_err(|e| s(&e))?;
        recs.retain(|_, _| false).map_err(|e| s(&e))?;
        let mut batches = txn.open_table(BATCHES).map_err(|e| s(&e))?;
        batches.retain(|_, _| false).map_err(|e| s(&e))?;
    }
    txn.commit().map_err(|e| s(&e))
}

/// Adds what the log holds to `out` (records once each, the highest `seq` of each batch),
/// leaving out everything at or below the stored checkpoint `stable`.
fn apply_frames(out: &mut DurableState, frames: Vec<wal::Frame>, stable: Seq) {
    let mut records: std::collections::BTreeSet<(Seq, PersistRecord)> =
        std::collections::BTreeSet::new();
    let mut views = Vec::new();
    for r in out.records.drain(..) {
        match record_seq(r) {
            Some(seq) => {
                records.insert((seq, r));
            }
            None => views.push(r),
        }
    }
    let mut batches: std::collections::HashMap<Digest, StoredBatch> =
        out.batches.drain(..).map(|b| (b.digest, b)).collect();
    for f in frames {
        for r in f.records {
            records.insert((record_seq(r).unwrap_or(0), r));
        }
        for b in f.batches {
            match batches.get_mut(&b.digest) {
                Some(old) => old.seq = old.seq.max(b.seq),
                None => {
                    batches.insert(
                        b.digest,
                        StoredBatch {
                            seq: b.seq,
                            digest: b.digest,
                            body: b.body,
                            big: b.big,
                        },
                    );
                }
            }
        }
    }
    out.records = views;
    out.records.extend(
        records
            .into_iter()
            .filter(|(seq, _)| *seq > stable)
            .map(|(_, r)| r),
    );
    let mut batches: Vec<StoredBatch> = batches.into_values().filter(|b| b.seq > stable).collect();
    batches.sort_by_key(|b| (b.seq, b.digest));
    out.batches = batches;
}

impl Durability for DiskDurability {
    fn commit(&mut self, records: &[PersistRecord], stores: &[StoreRecord]) -> std::io::Result<()> {
        self.write(records, stores)
            .map_err(|e| std::io::Error::other(format!("writing {}: {e}", self.path.display())))
    }

    fn sync(&mut self) -> std::io::Result<()> {
        self.wal
            .sync()
            .map_err(|e| std::io::Error::other(format!("syncing {}: {e}", self.path.display())))
    }

    fn close(&mut self) -> std::io::Result<()> {
        self.sync()?;
        let mut mark = || -> Result<(), String> {
            let s = |e: &dyn std::fmt::Display| e.to_string();
            let mut txn = self.db.begin_write().map_err(|e| s(&e))?;
            txn.set_durability(redb::Durability::Immediate)
                .map_err(|e| s(&e))?;
            {
                let mut meta = txn.open_table(META).map_err(|e| s(&e))?;
                meta.insert(CLEAN, [1u8].as_slice()).map_err(|e| s(&e))?;
            }
            txn.commit().map_err(|e| s(&e))?;
            self.db_commits += 1;
            Ok(())
        };
        mark().map_err(|e| {
            std::io::Error::other(format!("marking {} clean: {e}", self.path.display()))
        })
    }

    fn name(&self) -> &'static str {
        "disk"
    }

    fn dir(&self) -> Option<&Path> {
        // `path` is the database file, in the data directory.
        self.path.parent()
    }

    fn take_loaded(&mut self) -> Option<DurableState> {
        Some(self.loaded.take().unwrap_or_default())
    }

    fn counters(&self) -> DiskCounters {
        DiskCounters {
            db_commits: self.db_commits,
            ..self.wal.counters()
        }
    }
}

fn batch_seq(v: &[u8]) -> Option<Seq> {
    let b: [u8; 8] = v.get(..8)?.try_into().ok()?;
    Some(u64::from_le_bytes(b))
}

/// Reads everything the database holds.
fn load(db: &Database) -> Result<DurableState, String> {
    let s = |e: &dyn std::fmt::Display| e.to_string();
    let txn = db.begin_read().map_err(|e| s(&e))?;
    let meta = txn.open_table(META).map_err(|e| s(&e))?;
    let mut out = DurableState::default();
    if let Some(g) = meta.get("view").map_err(|e| s(&e))? {
        let b: [u8; 8] = g
            .value()
            .try_into()
            .map_err(|_| "bad view entry".to_string())?;
        out.records.push(PersistRecord::View(u64::from_le_bytes(b)));
    }
    if let Some(g) = meta.get(ABSTAIN).map_err(|e| s(&e))? {
        let b = g.value();
        let word = |i: usize| {
            b.get(i..i + 8)
                .and_then(|w| <[u8; 8]>::try_from(w).ok())
                .map(u64::from_le_bytes)
        };
        let rec = match (b.len(), word(0), word(8)) {
            // Format 2: every sequence number of the view.
            (8, Some(v), _) => PersistRecord::Abstain(v),
            (16, Some(view), Some(seq)) => PersistRecord::AbstainUpTo { view, seq },
            _ => return Err("bad abstain entry".to_string()),
        };
        out.records.push(rec);
    }
    if let Some(g) = meta.get(HORIZON).map_err(|e| s(&e))? {
        let b: [u8; 8] = g
            .value()
            .try_into()
            .map_err(|_| "bad horizon entry".to_string())?;
        out.records
            .push(PersistRecord::VoteHorizon(u64::from_le_bytes(b)));
    }
    let recs = txn.open_table(RECORDS).map_err(|e| s(&e))?;
    for item in recs.iter().map_err(|e| s(&e))? {
        let (k, _) = item.map_err(|e| s(&e))?;
        let (_, bytes) = k.value();
        let rec: PersistRecord =
            postcard::from_bytes(bytes).map_err(|e| format!("bad record: {e}"))?;
        out.records.push(rec);
    }
    let batches = txn.open_table(BATCHES).map_err(|e| s(&e))?;
    for item in batches.iter().map_err(|e| s(&e))? {
        let (k, v) = item.map_err(|e| s(&e))?;
        let digest = Digest(
            k.value()
                .try_into()
                .map_err(|_| "bad batch key".to_string())?,
        );
        let v = v.value();
        let seq = batch_seq(v).ok_or("bad batch entry")?;
        let (body, big): (BatchBody, Vec<Vec<u8>>) =
            postcard::from_bytes(&v[8..]).map_err(|e| format!("bad batch: {e}"))?;
        out.batches.push(StoredBatch {
            seq,
            digest,
            body,
            big,
        });
    }
    if let Some(g) = meta.get("checkpoint").map_err(|e| s(&e))? {
        let (seq, digest, partitions): (Seq, Digest, u32) =
            postcard::from_bytes(g.value()).map_err(|e| format!("bad checkpoint: {e}"))?;
        let table = txn.open_table(PARTS).map_err(|e| s(&e))?;
        let mut parts = Vec::with_capacity(partitions as usize);
        for i in 0..partitions {
            let g = table
                .get(i)
                .map_err(|e| s(&e))?
                .ok_or_else(|| format!("checkpoint {seq} lacks partition {i}"))?;
            let v = g.value();
            if v.len() < 32 {
                return Err(format!("bad partition {i}"));
            }
            let mut d = [0u8; 32];
            d.copy_from_slice(&v[..32]);
            parts.push((Digest(d), v[32..].to_vec()));
        }
        out.checkpoint = Some(StoredCheckpoint { seq, digest, parts });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use redb::ReadableTableMetadata as _;
    use std::sync::Arc;

    fn batch(n: u8) -> (Digest, Arc<BatchBody>) {
        let body = BatchBody {
            requests: vec![],
            big: vec![Digest([n; 32])],
            nondet: vec![n],
        };
        (Digest([n.wrapping_add(100); 32]), Arc::new(body))
    }

    fn sorted(mut s: DurableState) -> DurableState {
        s.records.sort();
        s.batches.sort_by_key(|b| b.digest);
        s
    }

    fn same(a: DurableState, b: DurableState) {
        let (a, b) = (sorted(a), sorted(b));
        assert_eq!(a.records, b.records);
        let key = |s: &DurableState| {
            s.batches
                .iter()
                .map(|b| (b.seq, b.digest, b.body.clone(), b.big.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(key(&a), key(&b));
        let ck = |s: &DurableState| {
            s.checkpoint
                .as_ref()
                .map(|c| (c.seq, c.digest, c.parts.clone()))
        };
        assert_eq!(ck(&a), ck(&b));
    }

    /// What is written, reopened, equals the reference semantics of `DurableState::apply_*`.
    #[test]
    fn reopened_store_matches_the_reference_semantics() {
        let dir = tempfile::tempdir().unwrap();
        let mut reference = DurableState::default();
        let groups: Vec<(Vec<PersistRecord>, Vec<StoreRecord>)> = {
            let (d1, b1) = batch(1);
            let (d2, b2) = batch(2);
            let (d3, b3) = batch(3);
            let img = |seq, changed: Vec<(u32, Digest, Vec<u8>)>| {
                StoreRecord::Checkpoint(Arc::new(CheckpointImage {
                    seq,
                    digest: Digest([seq as u8; 32]),
                    partitions: 3,
                    changed,
                }))
            };
            vec![
                (
                    vec![
                        PersistRecord::View(1),
                        PersistRecord::Prepared {
                            view: 1,
                            seq: 3,
                            digest: d1,
                        },
                    ],
                    vec![StoreRecord::Batch {
                        seq: 3,
                        digest: d1,
                        body: b1.clone(),
                        big: vec![Arc::from(&b"big frame"[..])],
                    }],
                ),
                (
                    vec![
                        PersistRecord::Committed {
                            view: 1,
                            seq: 3,
                            digest: d1,
                        },
                        PersistRecord::Executed { seq: 3, digest: d1 },
                        PersistRecord::Prepared {
                            view: 1,
                            seq: 5,
                            digest: d2,
                        },
                        PersistRecord::View(0),
                    ],
                    vec![
                        StoreRecord::Batch {
                            seq: 5,
                            digest: d2,
                            body: b2,
                            big: vec![Arc::from(&b"x"[..])],
                        },
                        // Re-proposed higher: the seq moves up.
                        StoreRecord::Batch {
                            seq: 6,
                            digest: d1,
                            body: b1,
                            big: vec![Arc::from(&b"big frame"[..])],
                        },
                    ],
                ),
                (
                    vec![PersistRecord::Executed { seq: 5, digest: d2 }],
                    vec![img(
                        4,
                        vec![
                            (0, Digest([10; 32]), b"p0".to_vec()),
                            (1, Digest([11; 32]), b"p1".to_vec()),
                            (2, Digest([12; 32]), b"p2".to_vec()),
                        ],
                    )],
                ),
                (
                    vec![PersistRecord::Prepared {
                        view: 2,
                        seq: 9,
                        digest: d3,
                    }],
                    vec![
                        StoreRecord::Batch {
                            seq: 9,
                            digest: d3,
                            body: b3,
                            big: vec![Arc::from(&b"y"[..])],
                        },
                        img(5, vec![(1, Digest([21; 32]), b"p1 v2".to_vec())]),
                    ],
                ),
            ]
        };
        {
            let mut disk = DiskDurability::open(dir.path(), "me").unwrap();
            assert_eq!(disk.take_loaded().unwrap().records, vec![]);
            for (recs, stores) in &groups {
                disk.commit(recs, stores).unwrap();
                for r in recs {
                    reference.apply_persist(*r);
                }
                for s in stores {
                    reference.apply_store(s);
                }
            }
        }
        // The reference keeps every View record; the disk only the highest.
        reference
            .records
            .retain(|r| !matches!(r, PersistRecord::View(v) if *v < 1));
        let mut disk = DiskDurability::open(dir.path(), "me").unwrap();
        let loaded = disk.take_loaded().unwrap();
        let ck = loaded.checkpoint.as_ref().unwrap();
        assert_eq!(ck.seq, 5);
        assert_eq!(ck.parts[1], (Digest([21; 32]), b"p1 v2".to_vec()));
        assert_eq!(ck.parts[2], (Digest([12; 32]), b"p2".to_vec()));
        assert_eq!(loaded.batches.len(), 2, "batches at or below 5 dropped");
        same(loaded, reference);
    }

    /// A data directory from before the log keeps records and batches in redb tables: they
    /// move into the log at open and stay there.
    #[test]
    fn records_in_the_old_tables_move_into_the_log() {
        let dir = tempfile::tempdir().unwrap();
        drop(DiskDurability::open(dir.path(), "me").unwrap());
        let (d1, b1) = batch(1);
        let rec = PersistRecord::Prepared {
            view: 0,
            seq: 7,
            digest: d1,
        };
        {
            let db = Database::create(dir.path().join(DB_FILE)).unwrap();
            let txn = db.begin_write().unwrap();
            {
                let key = postcard::to_allocvec(&rec).unwrap();
                let mut recs = txn.open_table(RECORDS).unwrap();
                recs.insert((7, key.as_slice()), ()).unwrap();
                let mut v = 7u64.to_le_bytes().to_vec();
                let frames: Vec<&[u8]> = vec![b"f"];
                v.extend_from_slice(&postcard::to_allocvec(&(&*b1, frames)).unwrap());
                let mut batches = txn.open_table(BATCHES).unwrap();
                batches.insert(&d1.0[..], v.as_slice()).unwrap();
            }
            txn.commit().unwrap();
        }
        for _ in 0..2 {
            let mut disk = DiskDurability::open(dir.path(), "me").unwrap();
            let loaded = disk.take_loaded().unwrap();
            assert_eq!(loaded.records, vec![rec]);
            assert_eq!(loaded.batches.len(), 1);
            assert_eq!(loaded.batches[0].big, vec![b"f".to_vec()]);
            let txn = disk.db.begin_read().unwrap();
            assert!(txn.open_table(RECORDS).unwrap().is_empty().unwrap());
            assert!(txn.open_table(BATCHES).unwrap().is_empty().unwrap());
        }
    }

    /// Log segments do not pile up: each stored checkpoint deletes those it covers.
    #[test]
    fn checkpoints_prune_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut disk = DiskDurability::open(dir.path(), "me").unwrap();
        for round in 1..=20u64 {
            let seq = round * 4;
            let (d, b) = batch(round as u8);
            // A vote horizon far above every checkpoint holds no segment back.
            let recs = [
                PersistRecord::Executed { seq, digest: d },
                PersistRecord::VoteHorizon(seq + 256),
            ];
            let batch = StoreRecord::Batch {
                seq,
                digest: d,
                body: b,
                big: vec![Arc::from(&b"x"[..])],
            };
            disk.commit(&recs, &[batch]).unwrap();
            let img = StoreRecord::Checkpoint(Arc::new(CheckpointImage {
                seq,
                digest: Digest([1; 32]),
                partitions: 1,
                changed: vec![(0, Digest([round as u8; 32]), vec![round as u8])],
            }));
            disk.commit(&[], &[img]).unwrap();
            assert!(
                disk.log_segments() <= 2,
                "round {round}: {}",
                disk.log_segments()
            );
        }
        drop(disk);
        let segments = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("wal-")
            })
            .count();
        assert!(segments <= 2, "{segments} segment files");
        let mut disk = DiskDurability::open(dir.path(), "me").unwrap();
        let loaded = disk.take_loaded().unwrap();
        assert_eq!(loaded.checkpoint.unwrap().seq, 80);
        assert_eq!(
            loaded.records,
            vec![PersistRecord::VoteHorizon(336)],
            "only the highest horizon, which no checkpoint drops"
        );
        assert!(loaded.batches.is_empty());
    }

    #[test]
    fn another_owner_or_a_second_opener_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let disk = DiskDurability::open(dir.path(), "replica 1").unwrap();
        let e = DiskDurability::open(dir.path(), "replica 1").unwrap_err();
        assert!(matches!(e, StorageError::InUse { .. }), "{e}");
        drop(disk);
        let e = DiskDurability::open(dir.path(), "replica 2").unwrap_err();
        assert!(e.to_string().contains("belongs to replica 1"), "{e}");
        assert!(DiskDurability::open(dir.path(), "replica 1").is_ok());
    }

    #[test]
    fn proposals_are_trusted_only_when_new_or_after_a_clean_stop() {
        let dir = tempfile::tempdir().unwrap();
        let d = Digest([7; 32]);
        let open = || DiskDurability::open(dir.path(), "replica 0").unwrap();
        let trusted = |mut disk: DiskDurability| disk.take_loaded().unwrap().proposals_durable;
        let mut disk = open();
        assert!(
            disk.loaded.as_ref().unwrap().proposals_durable,
            "a new directory"
        );
        // The primary's proposal: appended without a sync, read back as the promise it is.
        let proposed = PersistRecord::Proposed {
            view: 0,
            seq: 1,
            digest: d,
        };
        disk.commit(&[proposed], &[]).unwrap();
        assert!(
            disk.wal.pending(),
            "a proposal alone does not wait for the disk"
        );
        // Executed records with bodies (the unreplicated server's turns) do wait.
        let body = StoreRecord::Batch {
            seq: 2,
            digest: d,
            body: std::sync::Arc::new(byzfs_bft::message::BatchBody {
                requests: vec![],
                big: vec![],
                nondet: vec![],
            }),
            big: vec![],
        };
        let executed = PersistRecord::Executed { seq: 2, digest: d };
        disk.commit(&[executed], std::slice::from_ref(&body))
            .unwrap();
        assert!(
            !disk.wal.pending(),
            "bodies with Executed records are synced"
        );
        disk.commit(&[proposed], std::slice::from_ref(&body))
            .unwrap();
        assert!(disk.wal.pending(), "bodies with a proposal are not");
        // A backup's PREPARE record, with the body it votes for, does not wait either; a
        // COMMIT's does, and makes everything before it durable.
        let voted = PersistRecord::Voted {
            view: 0,
            seq: 3,
            digest: d,
        };
        disk.commit(&[voted], std::slice::from_ref(&body)).unwrap();
        assert!(
            disk.wal.pending(),
            "a backup's vote does not wait for the disk"
        );
        let committed = PersistRecord::Committed {
            view: 0,
            seq: 3,
            digest: d,
        };
        disk.commit(&[committed], &[]).unwrap();
        assert!(!disk.wal.pending(), "a COMMIT's record does");
        // A vote horizon and an abstention go to the database.
        disk.commit(&[PersistRecord::VoteHorizon(11)], &[]).unwrap();
        let abstain = PersistRecord::AbstainUpTo { view: 0, seq: 11 };
        disk.commit(&[abstain], &[]).unwrap();
        // Counted as written: five frames, synced with the Executed records and the
        // COMMIT's; two database commits; every byte of the (only) log segment.
        let log_bytes: u64 = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_name().to_string_lossy().starts_with("wal-"))
            .map(|e| e.metadata().unwrap().len())
            .sum();
        assert_eq!(
            disk.counters(),
            DiskCounters {
                log_bytes,
                log_frames: 5,
                log_syncs: 2,
                db_commits: 2,
            }
        );
        drop(disk);
        // Same boot: the killed process's writes are all in the file.
        let mut disk = open();
        let loaded = disk.take_loaded().unwrap();
        assert_eq!(loaded.proposals_durable, boot_id().is_some(), "same boot");
        drop(disk);
        // As after a reboot (another boot id stored), and no clean stop.
        set_boot(dir.path(), b"another boot");
        let mut disk = open();
        let loaded = disk.take_loaded().unwrap();
        assert!(!loaded.proposals_durable, "a reboot without a clean stop");
        assert!(loaded.records.contains(&proposed.as_promise()));
        assert!(loaded.records.contains(&voted.as_promise()));
        assert!(loaded.records.contains(&PersistRecord::VoteHorizon(11)));
        assert!(loaded.records.contains(&abstain));
        // A clean stop syncs and leaves the mark; the next start consumes it.
        disk.close().unwrap();
        assert!(!disk.wal.pending());
        drop(disk);
        set_boot(dir.path(), b"another boot");
        assert!(trusted(open()), "after a clean stop");
        set_boot(dir.path(), b"another boot");
        assert!(!trusted(open()), "the mark is used once");
    }

    /// Stores `id` as the boot id of the last start.
    fn set_boot(dir: &Path, id: &[u8]) {
        let db = Database::create(dir.join(DB_FILE)).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(META).unwrap().insert(BOOT, id).unwrap();
        txn.commit().unwrap();
    }
}

#[cfg(test)]
mod disk_bytes_tests {
    use super::*;

    #[test]
    fn a_data_directory_counts_its_store_one_level_down() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("replica.redb"), vec![1u8; 64 << 10]).unwrap();
        let store = dir.path().join("fs-state");
        std::fs::create_dir(&store).unwrap();
        std::fs::write(store.join("seg-0.log"), vec![2u8; 128 << 10]).unwrap();
        let deeper = store.join("deeper");
        std::fs::create_dir(&deeper).unwrap();
        std::fs::write(deeper.join("x"), vec![3u8; 256 << 10]).unwrap();
        let n = disk_bytes(dir.path());
        // Allocated blocks: at least the two files' bytes, not the one two levels down.
        assert!((192 << 10..256 << 10).contains(&n), "{n}");
    }
}

#[cfg(test)]
mod format_tests {
    use super::*;

    fn set_format(dir: &Path, bytes: &[u8]) {
        let db = Database::create(dir.join(DB_FILE)).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut meta = txn.open_table(META).unwrap();
            meta.insert("format", bytes).unwrap();
        }
        txn.commit().unwrap();
    }

    #[test]
    fn another_on_disk_format_is_refused_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        drop(DiskDurability::open(dir.path(), "me").unwrap());
        set_format(dir.path(), &7u32.to_le_bytes());
        let e = DiskDurability::open(dir.path(), "me").unwrap_err();
        assert!(matches!(e, StorageError::Format { found: 7, .. }), "{e}");
        assert!(e.to_string().contains("delete the data directory"), "{e}");
        set_format(dir.path(), b"garbage");
        let e = DiskDurability::open(dir.path(), "me").unwrap_err();
        assert!(matches!(e, StorageError::Format { .. }), "{e}");
    }

    #[test]
    fn directories_of_formats_1_to_3_are_refused() {
        for old in [1u32, 2, 3] {
            let dir = tempfile::tempdir().unwrap();
            drop(DiskDurability::open(dir.path(), "me").unwrap());
            set_format(dir.path(), &old.to_le_bytes());
            let e = DiskDurability::open(dir.path(), "me").unwrap_err();
            assert!(
                matches!(e, StorageError::Format { found, supported: 4, .. } if found == old),
                "{e}"
            );
        }
    }

    #[test]
    fn a_format_2_abstention_reads_as_abstaining_at_every_seq() {
        let dir = tempfile::tempdir().unwrap();
        drop(DiskDurability::open(dir.path(), "me").unwrap());
        {
            let db = Database::create(dir.path().join(DB_FILE)).unwrap();
            let txn = db.begin_write().unwrap();
            {
                let mut meta = txn.open_table(META).unwrap();
                meta.insert(ABSTAIN, &5u64.to_le_bytes()[..]).unwrap();
            }
            txn.commit().unwrap();
        }
        let mut disk = DiskDurability::open(dir.path(), "me").unwrap();
        let loaded = disk.take_loaded().unwrap();
        assert!(loaded.records.contains(&PersistRecord::Abstain(5)));
        drop(disk);
        {
            let db = Database::create(dir.path().join(DB_FILE)).unwrap();
            let txn = db.begin_write().unwrap();
            {
                let mut meta = txn.open_table(META).unwrap();
                meta.insert(ABSTAIN, &b"bad"[..]).unwrap();
            }
            txn.commit().unwrap();
        }
        assert!(
            DiskDurability::open(dir.path(), "me").is_err(),
            "a bad entry"
        );
    }

    #[test]
    fn a_directory_from_before_the_format_key_is_refused_as_format_1() {
        let dir = tempfile::tempdir().unwrap();
        drop(DiskDurability::open(dir.path(), "me").unwrap());
        {
            let db = Database::create(dir.path().join(DB_FILE)).unwrap();
            let txn = db.begin_write().unwrap();
            {
                let mut meta = txn.open_table(META).unwrap();
                meta.remove("format").unwrap();
            }
            txn.commit().unwrap();
        }
        let e = DiskDurability::open(dir.path(), "me").unwrap_err();
        assert!(matches!(e, StorageError::Format { found: 1, .. }), "{e}");
    }
}
