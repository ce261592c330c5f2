//! The replicated records: the superblock (counters and the agreed clock) and inodes.
//!
//! Inode numbers and generations come from counters in the superblock, so allocation is a
//! deterministic function of the operation history. Inode numbers are never reused (a `u64`
//! does not run out), and every allocation also takes a fresh generation.

use crate::encoding::{decode, encode};
use crate::fail::Res;
use crate::key;
use crate::proto::attr::{Attr, FileType, Timestamp};
use crate::proto::errno::Errno;
use crate::proto::handle::FileHandle;
use crate::store::{Store, StoreError, Txn};
use serde::{Deserialize, Serialize};

/// Reported size of a directory.
pub(crate) const DIR_SIZE: u64 = 4096;
/// The cookie a directory's first real entry gets, after `.` (1) and `..` (2): every new
/// inode's `next_cookie` ([`crate::dir`] hands cookies out).
pub const FIRST_COOKIE: u64 = 3;

/// Global counters and the agreed clock.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub(crate) struct Superblock {
    /// Last agreed timestamp (µs since the epoch); 0 before the first batch.
    pub clock_us: u64,
    /// Next inode number to allocate.
    pub next_ino: u64,
    /// Next generation to hand out.
    pub next_generation: u64,
    /// Bytes stored in data blocks and symlink targets.
    pub used_bytes: u64,
    /// Live inodes.
    pub inodes: u64,
}

/// One file's record.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub(crate) struct Inode {
    pub generation: u64,
    pub kind: FileType,
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    /// Bytes stored for this file.
    pub used: u64,
    pub atime: Timestamp,
    pub mtime: Timestamp,
    pub ctime: Timestamp,
    /// Directories: the parent directory (the root is its own parent). Others: 0.
    pub parent: u64,
    /// Directories: the cookie the next entry gets.
    pub next_cookie: u64,
    /// Directories: number of entries, `.` and `..` excluded.
    pub entries: u64,
    /// Symlinks: the target.
    pub target: Vec<u8>,
    /// Device nodes: the device number.
    pub rdev: u64,
}

impl Inode {
    /// A new inode of `kind` with every time set to `now`.
    pub fn new(
        kind: FileType,
        generation: u64,
        mode: u32,
        uid: u32,
        gid: u32,
        now: Timestamp,
    ) -> Inode {
        Inode {
            generation,
            kind,
            mode,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            uid,
            gid,
            size: if kind == FileType::Directory {
                DIR_SIZE
            } else {
                0
            },
            used: 0,
            atime: now,
            mtime: now,
            ctime: now,
            parent: 0,
            next_cookie: FIRST_COOKIE,
            entries: 0,
            target: Vec::new(),
            rdev: 0,
        }
    }

    /// Whether this is a directory.
    pub fn is_dir(&self) -> bool {
        self.kind == FileType::Directory
    }

    /// The client-visible attributes of inode `ino`.
    pub fn attr(&self, ino: u64) -> Attr {
        Attr {
            fh: FileHandle {
                ino,
                generation: self.generation,
            },
            kind: self.kind,
            mode: self.mode,
            nlink: self.nlink,
            uid: self.uid,
            gid: self.gid,
            size: self.size,
            used: self.used,
            atime: self.atime,
            mtime: self.mtime,
            ctime: self.ctime,
            rdev: self.rdev,
            crypt: Vec::new(),
        }
    }
}

/// Reads the superblock (it always exists: [`crate::FileService::new`] writes it).
pub(crate) fn load_super<S: Store + ?Sized>(txn: &Txn<'_, S>) -> Res<Superblock> {
    match txn.get(&key::superblock())? {
        Some(b) => Ok(decode(&b)?),
        None => Err(StoreError::Io("missing superblock".into()).into()),
    }
}

/// Writes the superblock.
pub(crate) fn save_super<S: Store + ?Sized>(txn: &mut Txn<'_, S>, sb: &Superblock) {
    txn.put(key::superblock(), encode(sb));
}

/// Reads inode `ino`, if it exists.
pub(crate) fn load<S: Store + ?Sized>(txn: &Txn<'_, S>, ino: u64) -> Res<Option<Inode>> {
    match txn.get(&key::inode(ino))? {
        Some(b) => Ok(Some(decode(&b)?)),
        None => Ok(None),
    }
}

/// Reads the inode a handle names: `ESTALE` if it is gone or has another generation.
pub(crate) fn resolve<S: Store + ?Sized>(txn: &Txn<'_, S>, fh: FileHandle) -> Res<Inode> {
    match load(txn, fh.ino)? {
        Some(i) if i.generation == fh.generation => Ok(i),
        _ => Err(Errno::ESTALE.into()),
    }
}

/// Reads an inode that a directory entry or a parent pointer names: its absence is
/// corruption, not a client error.
pub(crate) fn must_load<S: Store + ?Sized>(txn: &Txn<'_, S>, ino: u64) -> Res<Inode> {
    load(txn, ino)?.ok_or_else(|| StoreError::Io(format!("dangling inode {ino}")).into())
}

/// Writes inode `ino`.
pub(crate) fn save<S: Store + ?Sized>(txn: &mut Txn<'_, S>, ino: u64, inode: &Inode) {
    txn.put(key::inode(ino), encode(inode));
}
