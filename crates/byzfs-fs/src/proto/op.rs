//! A file operation ([`Op`]): what a request asks the file service to do, with the limits
//! on its arguments and the classifications both sides make of it (read-only, what a
//! directory delegation covers).
//!
//! The operations follow NFSv3 (RFC 1813): they name files by [`FileHandle`], never by path.

use super::attr::{SetAttr, Timestamp};
use super::handle::FileHandle;
use super::lock::{LockKind, LockReq, Returned};
#[cfg(doc)]
use super::reply::Reply;
use super::{group::GroupRecord, proof::WriterProof};
use byzfs_bft::message::bytes;
use serde::{Deserialize, Serialize};

/// Largest `data` of one [`Op::Write`] and largest `count` of one [`Op::Read`] (1 MiB).
/// Larger writes fail with `EINVAL`; larger reads are shortened.
pub const MAX_IO: u32 = 1 << 20;
/// Most entries one [`Op::ReadDir`] returns.
pub const MAX_READDIR_ENTRIES: u32 = 512;

/// `access` mask bit: read.
pub const R_OK: u32 = 4;
/// `access` mask bit: write.
pub const W_OK: u32 = 2;
/// `access` mask bit: execute / search.
pub const X_OK: u32 = 1;

/// Special files [`Op::Mknod`] can create. Device nodes only for uid 0 (as Linux asks
/// `CAP_MKNOD`); they are only records here (a mount is `nodev`).
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
pub enum SpecialKind {
    /// A named pipe.
    Fifo,
    /// A Unix domain socket.
    Socket,
    /// A character device with its device number (`st_rdev`).
    CharDevice(u64),
    /// A block device with its device number (`st_rdev`).
    BlockDevice(u64),
}

/// A file operation. Names are raw bytes: 1 to 255 bytes, without `/` or NUL (else `EINVAL`
/// or `ENAMETOOLONG`).
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub enum Op {
    /// Attributes of `fh`. Read-only. Reply: [`Reply::Attr`].
    GetAttr {
        /// The file.
        fh: FileHandle,
    },
    /// Changes attributes. Reply: [`Reply::Attr`] with the new attributes.
    SetAttr {
        /// The file.
        fh: FileHandle,
        /// What to change.
        set: SetAttr,
    },
    /// Looks `name` up in `dir` (`.` and `..` included). Read-only. Reply: [`Reply::Entry`].
    Lookup {
        /// The directory.
        dir: FileHandle,
        /// The name.
        name: Vec<u8>,
    },
    /// Checks `mask` ([`R_OK`] | [`W_OK`] | [`X_OK`]) against `fh`'s mode for the
    /// credentials. Read-only. Reply: [`Reply::Done`] or `EACCES`.
    Access {
        /// The file.
        fh: FileHandle,
        /// Requested access.
        mask: u32,
    },
    /// The target of a symbolic link. Read-only. Reply: [`Reply::ReadLink`].
    ReadLink {
        /// The symlink.
        fh: FileHandle,
    },
    /// Reads up to `count` bytes (at most [`MAX_IO`]) at `offset`. Read-only. Reply:
    /// [`Reply::Read`].
    Read {
        /// The file.
        fh: FileHandle,
        /// Byte offset.
        offset: u64,
        /// Bytes wanted.
        count: u32,
    },
    /// Writes `data` at `offset`. Reply: [`Reply::Write`].
    Write {
        /// The file.
        fh: FileHandle,
        /// Byte offset.
        offset: u64,
        /// The bytes (at most [`MAX_IO`]).
        #[serde(with = "bytes")]
        data: Vec<u8>,
    },
    /// Creates a regular file. If `exclusive` and `name` exists: `EEXIST`; otherwise an
    /// existing regular file is returned unchanged (NFSv3 UNCHECKED). Reply: [`Reply::Made`].
    Create {
        /// Parent directory.
        dir: FileHandle,
        /// New name.
        name: Vec<u8>,
        /// Permission bits (the client applied its umask).
        mode: u32,
        /// Fail if the name exists (`O_EXCL`).
        exclusive: bool,
    },
    /// Creates a directory. Reply: [`Reply::Made`].
    Mkdir {
        /// Parent directory.
        dir: FileHandle,
        /// New name.
        name: Vec<u8>,
        /// Permission bits.
        mode: u32,
    },
    /// Creates a symbolic link to `target` (1 to 4095 bytes, no NUL). Reply: [`Reply::Made`].
    Symlink {
        /// Parent directory.
        dir: FileHandle,
        /// New name.
        name: Vec<u8>,
        /// Link target.
        target: Vec<u8>,
    },
    /// Creates a fifo, socket or device node. Reply: [`Reply::Made`].
    Mknod {
        /// Parent directory.
        dir: FileHandle,
        /// New name.
        name: Vec<u8>,
        /// What to create.
        kind: SpecialKind,
        /// Permission bits.
        mode: u32,
    },
    /// Removes a non-directory entry. Reply: [`Reply::Unlinked`].
    Remove {
        /// Parent directory.
        dir: FileHandle,
        /// Name to remove.
        name: Vec<u8>,
    },
    /// Removes an empty directory. Reply: [`Reply::Unlinked`].
    Rmdir {
        /// Parent directory.
        dir: FileHandle,
        /// Name to remove.
        name: Vec<u8>,
    },
    /// Renames `from_dir/from_name` to `to_dir/to_name`, replacing a file or an empty
    /// directory there (POSIX `rename`). Reply: [`Reply::Done`].
    Rename {
        /// Source directory.
        from_dir: FileHandle,
        /// Source name.
        from_name: Vec<u8>,
        /// Target directory.
        to_dir: FileHandle,
        /// Target name.
        to_name: Vec<u8>,
    },
    /// Creates the hard link `dir/name` to `fh` (not a directory). Reply: [`Reply::Made`].
    Link {
        /// Existing file.
        fh: FileHandle,
        /// Directory of the new link.
        dir: FileHandle,
        /// Name of the new link.
        name: Vec<u8>,
    },
    /// Lists `dir` after `cookie` (0 = from the start), at most `max_entries` entries (capped
    /// at [`MAX_READDIR_ENTRIES`]). Read-only. Reply: [`Reply::ReadDir`].
    ReadDir {
        /// The directory.
        dir: FileHandle,
        /// Resume after the entry with this cookie.
        cookie: u64,
        /// Entries wanted.
        max_entries: u32,
    },
    /// File-system statistics. Read-only. Reply: [`Reply::StatFs`].
    StatFs,
    /// Makes `fh`'s data durable. Ordered like a write, so its reply means every earlier write
    /// was executed by a quorum. Reply: [`Reply::Done`].
    Fsync {
        /// The file.
        fh: FileHandle,
    },
    /// As [`Op::Rename`], but fails with `EEXIST` if `to_dir/to_name` exists (Linux
    /// `renameat2(RENAME_NOREPLACE)`), decided atomically at the replicas. Reply:
    /// [`Reply::Done`].
    RenameNoReplace {
        /// Source directory.
        from_dir: FileHandle,
        /// Source name.
        from_name: Vec<u8>,
        /// Target directory.
        to_dir: FileHandle,
        /// Target name.
        to_name: Vec<u8>,
    },
    /// Swaps the two names atomically (Linux `renameat2(RENAME_EXCHANGE)`): both must exist,
    /// either may be a directory. Reply: [`Reply::Done`].
    Exchange {
        /// First name's directory.
        a_dir: FileHandle,
        /// First name.
        a_name: Vec<u8>,
        /// Second name's directory.
        b_dir: FileHandle,
        /// Second name.
        b_name: Vec<u8>,
    },
    /// Grows `fh` to at least `end` bytes (Linux `fallocate(2)` mode 0): the new range reads
    /// as zeros. Space is not reserved, as on copy-on-write file systems: a later write may
    /// still get `ENOSPC`. A file already that long is left as it is. Reply:
    /// [`Reply::Attr`].
    Allocate {
        /// The file.
        fh: FileHandle,
        /// The least size wanted.
        end: u64,
    },
    /// The value of extended attribute `name` (`user.…` or `trusted.…`, see
    /// [`crate::xattr`]). Read-only. Reply: [`Reply::Xattr`] with the value, or `ENODATA`.
    GetXattr {
        /// The file.
        fh: FileHandle,
        /// Full name, namespace prefix included.
        name: Vec<u8>,
    },
    /// The names of `fh`'s extended attributes the caller may see, each followed by a NUL
    /// (the `listxattr(2)` format). Read-only. Reply: [`Reply::Xattr`].
    ListXattr {
        /// The file.
        fh: FileHandle,
    },
    /// Sets extended attribute `name` to `value` (at most 64 KiB). Reply: [`Reply::Done`].
    SetXattr {
        /// The file.
        fh: FileHandle,
        /// Full name, namespace prefix included.
        name: Vec<u8>,
        /// The value.
        #[serde(with = "bytes")]
        value: Vec<u8>,
        /// Whether the attribute must exist, or must not, beforehand.
        how: XattrSet,
    },
    /// Removes extended attribute `name` (`ENODATA` if absent). Reply: [`Reply::Done`].
    RemoveXattr {
        /// The file.
        fh: FileHandle,
        /// Full name, namespace prefix included.
        name: Vec<u8>,
    },
    /// Several writes to one file, applied in order as one operation: all of them or, if
    /// one fails, none (the errno of the first that fails). At most [`MAX_IO`] bytes in all,
    /// and at least one extent (`EINVAL` otherwise). The mount gathers a file's consecutive
    /// writes into one of these (NFS's write-behind). Reply: [`Reply::Write`] with the total.
    WriteGather {
        /// The file.
        fh: FileHandle,
        /// The writes, in the order they were made.
        extents: Vec<Extent>,
    },
    /// Writes to one file, then changes to its attributes, applied in order as one
    /// operation: all of them or, if one fails, none (the errno of the first that fails).
    /// At least one extent and one change, at most [`MAX_IO`] bytes and
    /// [`MAX_SETATTRS`] changes (`EINVAL` otherwise). The mount sends one when a `chmod`,
    /// `chown` or `utimes` follows writes it holds back (`cp -p`, `tar`, `rsync` write a
    /// file, then set its times and mode). Reply: [`Reply::Attr`], the file's attributes
    /// after all of them.
    WriteSetAttr {
        /// The file.
        fh: FileHandle,
        /// The writes, in the order they were made.
        extents: Vec<Extent>,
        /// The attribute changes, in the order they were made, after the writes.
        #[serde(deserialize_with = "crate::proto::bounded::lists::sets")]
        sets: Vec<SetAttr>,
    },
    /// `F_GETLK` ([`crate::lock`]): the first lock of another owner that conflicts with a
    /// `kind` lock on bytes `start..=end`. Reply: [`Reply::Lock`].
    GetLk {
        /// The file.
        fh: FileHandle,
        /// The asking lock owner (on this client).
        owner: u64,
        /// The lock it would take.
        kind: LockKind,
        /// First byte.
        start: u64,
        /// Last byte, inclusive ([`super::lock::LOCK_END_MAX`]: to the end of the file).
        end: u64,
    },
    /// `F_SETLK` ([`crate::lock`]): takes a `kind` lock on bytes `start..=end` for `owner`
    /// (`None`: unlocks them), or fails with `EAGAIN` if another owner's lock conflicts.
    /// Renews the client's lease. Reply: [`Reply::Lock`].
    SetLk(LockReq),
    /// Drops every lock `owner` holds on `fh` (a process's `close`, or the last close of a
    /// file it `flock`ed). Reply: [`Reply::Lock`].
    ReleaseLocks {
        /// The file.
        fh: FileHandle,
        /// The lock owner (on this client).
        owner: u64,
    },
    /// Renews the client's lock lease ([`crate::lock`]). Reply: [`Reply::Lock`] without
    /// attributes.
    RenewLease,
    /// `F_SETLK` as [`Op::SetLk`], asking for the file's lock delegation too
    /// ([`crate::delegation`]). Reply: [`Reply::Delegated`] if granted, else as `SetLk`'s;
    /// [`Reply::Recall`] if another client holds the delegation.
    LockDelegate(LockReq),
    /// Gives a file's lock delegation back with the locks the client holds on it now
    /// ([`crate::delegation`]). Reply: [`Reply::Lock`]; `ENOLCK` if the client does not
    /// hold it.
    ReturnDelegation {
        /// The file.
        fh: FileHandle,
        /// Every lock the client's owners hold on it.
        locks: Vec<Returned>,
    },
    /// The files whose lock delegation the client must give back ([`crate::delegation`]).
    /// Read-only. Reply: [`Reply::Recalls`].
    Recalls,
    /// `F_SETLKW` of an `fcntl` lock owner ([`crate::deadlock`]): takes the lock as
    /// [`Op::SetLk`] does, or, if another owner's lock conflicts, records that `owner`
    /// waits for that lock's owner and answers [`Reply::Lock`] with the conflict (try
    /// again later), or [`Reply::Deadlock`] if that owner waits, directly or through
    /// others, for `owner`. [`Reply::Recall`] as for `SetLk`; `EINVAL` for an unlock
    /// (`kind` `None`).
    SetLkWait(LockReq),
    /// `owner` no longer waits for a lock on `fh` (its process got a signal): forgets what
    /// [`Op::SetLkWait`] recorded. Reply: [`Reply::Lock`] without attributes.
    CancelWait {
        /// The file.
        fh: FileHandle,
        /// The lock owner (on this client).
        owner: u64,
    },
    /// Removes, from the orphan directory's entries after cookie `after` (0: from the
    /// start), the hidden files of clients whose lease has lapsed or was never taken
    /// ([`crate::orphan`]). Any client may send it. Reply: [`Reply::Swept`].
    SweepOrphans {
        /// Go on after this cookie ([`Reply::Swept`]'s `next`).
        after: u64,
    },
    /// [`Op::SweepOrphans`] in directory `dir` instead of the orphan directory: a client
    /// hides files in their own directory where the orphan directory could not be had, and a
    /// dead client's would keep that directory from being removed (`ENOTEMPTY`). Any client
    /// may send it, with no permission on `dir`: what it removes was already removed by its
    /// owner. Reply: [`Reply::Swept`].
    SweepDir {
        /// The directory.
        dir: FileHandle,
        /// Go on after this cookie ([`Reply::Swept`]'s `next`).
        after: u64,
    },
    /// Deletes up to [`crate::reclaim::STEP_BLOCKS`] blocks (or extended attributes) that
    /// removals and truncations too large for one operation left to the reclaim queue
    /// ([`crate::reclaim`]): of the queue's oldest entries, or, with `file`, of that file's
    /// stale tail only (after an `EBUSY`). Any client may send it: it deletes only what
    /// nothing can read any more. Reply: [`Reply::Reclaimed`].
    Reclaim {
        /// Only this file's stale tail.
        file: Option<FileHandle>,
    },
    /// `copy_file_range(2)` at the replicas: up to `len` (at most [`MAX_IO`]) bytes of `from`
    /// at `from_offset` (fewer at its end) written into `to` at `to_offset`, as a
    /// [`Op::Write`] of them would (its checks, `EBUSY` included); the bytes never travel.
    /// `EINVAL` for overlapping ranges of one file. Reply: [`Reply::Write`] with the bytes
    /// copied and `to`'s attributes.
    CopyRange {
        /// The source file (read permission).
        from: FileHandle,
        /// Where to read.
        from_offset: u64,
        /// The destination file (write permission).
        to: FileHandle,
        /// Where to write.
        to_offset: u64,
        /// Bytes to copy, at most [`MAX_IO`].
        len: u32,
    },
    /// `fallocate(2)` `FALLOC_FL_PUNCH_HOLE` (`keep_size`) or `FALLOC_FL_ZERO_RANGE`: bytes
    /// `offset..offset + len` (`len` at most [`MAX_IO`]) read as zeros afterwards; whole
    /// blocks inside are no longer stored. Without `keep_size` the file grows to cover the
    /// range. Reply: [`Reply::Attr`].
    Punch {
        /// The file (write permission).
        fh: FileHandle,
        /// First byte.
        offset: u64,
        /// Bytes, 1 to [`MAX_IO`].
        len: u32,
        /// Leave the size as it is (punch-hole, or zero-range with `FALLOC_FL_KEEP_SIZE`).
        keep_size: bool,
    },
    /// `lseek(2)` `SEEK_DATA` (`hole` false) or `SEEK_HOLE` from `offset`, at the service's
    /// block granularity (16 KiB; the end of the file is a hole). `ENXIO` at or past the end,
    /// or for `SEEK_DATA` with no data after `offset`. Read-only. Reply: [`Reply::Seek`].
    Seek {
        /// The file.
        fh: FileHandle,
        /// Where to start.
        offset: u64,
        /// Look for a hole rather than data.
        hole: bool,
    },
    /// A replica's report of the file-system capacity its disk could hold
    /// ([`crate::capacity`]); `EPERM` unless sent by that replica's own client. Reply:
    /// [`Reply::Done`].
    ReportCapacity {
        /// The replica reporting.
        replica: u32,
        /// Bytes of file data it could hold in all.
        bytes: u64,
    },
    /// Reserves `count` (1 to [`crate::reserve::MAX_RESERVE`]) inode numbers, with their
    /// generations, for the sender's client session, so that its mount can give a new file
    /// its handle before the replicas create it ([`crate::reserve`]). Reply:
    /// [`Reply::Reserved`].
    ReserveInodes {
        /// How many.
        count: u32,
    },
    /// `make` (a [`Op::Create`], [`Op::Mkdir`], [`Op::Symlink`] or [`Op::Mknod`]; `EINVAL`
    /// otherwise), the new entry getting handle `at`: one of the sender's reserved handles,
    /// above every one it used before (`EINVAL` otherwise; [`crate::reserve`]). Reply: as
    /// `make`'s.
    MakeAt {
        /// The reserved handle.
        at: FileHandle,
        /// The creation.
        #[serde(deserialize_with = "crate::proto::bounded::nested_op")]
        make: Box<Op>,
        /// The time the mount answered it with: the entry's times and its directory's
        /// `mtime` and `ctime`, if within [`crate::reserve::MAKE_AT_SKEW_SECS`] of the
        /// agreed time (else the agreed time).
        time: Option<Timestamp>,
    },
    /// Runs `ops` in order as one operation, all or nothing: the first that fails fails the batch,
    /// and none of it is applied ([`super::batch::may_batch`] says what may be in one). Reply:
    /// [`Reply::Batch`].
    Batch(#[serde(deserialize_with = "crate::proto::bounded::batch_ops")] Vec<Op>),
    /// Asks for directory `dir`'s delegation ([`crate::dir_delegation`]): while the caller
    /// holds it, every other session's operation on names in `dir` is recalled. Renews the
    /// caller's lease. Reply: [`Reply::Delegated`] (no locks), or [`Reply::Recall`] if
    /// another session holds it (asked to give it back).
    DelegateDir {
        /// The directory.
        dir: FileHandle,
    },
    /// Gives directory `dir`'s delegation back. `ENOLCK` if the caller does not hold it.
    /// Reply: [`Reply::Done`].
    ReturnDir {
        /// The directory.
        dir: FileHandle,
    },
    /// Creates or changes encryption group `group`'s record ([`crate::crypt_group`]):
    /// `signature` by the group's owner over [`super::group::signed_bytes`], the
    /// version the next one (1 for a new group). `EACCES` for another signer or a `group`
    /// that is not [`super::group::group_id`] of the record's owner and name,
    /// `ESTALE` for another version, `EINVAL` for malformed keys, a name too long or too
    /// many or too large lockboxes. Reply: [`Reply::Done`].
    GroupPut {
        /// The group's id.
        group: [u8; 16],
        /// The new record.
        record: GroupRecord,
        /// The owner's Ed25519 signature (64 bytes).
        signature: Vec<u8>,
    },
    /// Encryption group `group`'s record. Reply: [`Reply::Group`].
    GroupGet {
        /// The group's id.
        group: [u8; 16],
    },
    /// Directory `dir`, made by the same request (a [`Op::Batch`] after its creation) and
    /// owned by the caller, joins encryption group `group`: what is made in it from then
    /// on belongs to the group ([`crate::crypt_file`]). Needs a writer proof for `group`
    /// ([`Op::Signed`]). `ENOTDIR`, `EPERM` (not the owner, or a directory that existed
    /// before the request), `EEXIST` (already in a group), `ENOTEMPTY`. Reply:
    /// [`Reply::Attr`].
    SetGroup {
        /// The directory.
        dir: FileHandle,
        /// The group's id.
        group: [u8; 16],
    },
    /// `op` with writer proofs for the encryption groups whose files it changes
    /// ([`crate::crypt_write`]); not inside a batch or another `Signed`.
    Signed {
        /// Greater than any the client used before (one per request; [`Op::WriterSeq`]).
        seq: u64,
        /// One proof per group, at most [`super::proof::MAX_PROOFS`].
        #[serde(deserialize_with = "crate::proto::bounded::lists::proofs")]
        proofs: Vec<WriterProof>,
        /// The operation.
        #[serde(deserialize_with = "crate::proto::bounded::nested_op")]
        op: Box<Op>,
        /// Sealed headers to set once `op` ran (files of a group, at most
        /// [`crate::crypt_file::MAX_HEADER`] bytes each, at most 64;
        /// [`crate::crypt_file`]).
        #[serde(deserialize_with = "crate::proto::bounded::lists::headers")]
        headers: Vec<(FileHandle, Vec<u8>)>,
        /// The headers files must have before `op` runs, at most 64: `ESTALE` and nothing
        /// done if one has another (a writer builds each file's new header on the tree
        /// its old one names, and another writer may have changed it since).
        #[serde(deserialize_with = "crate::proto::bounded::lists::headers")]
        expect: Vec<(FileHandle, Vec<u8>)>,
    },
    /// The encryption group of `fh`, if any. Read-only. Reply: [`Reply::FileGroup`].
    FileGroup {
        /// The file.
        fh: FileHandle,
    },
    /// The last writer-proof sequence number the calling client used. Read-only. Reply:
    /// [`Reply::WriterSeq`].
    WriterSeq,
    /// Several reads of one file in one request: 1 to [`MAX_GATHER_READS`] ranges of
    /// `(offset, count)`, at most [`MAX_IO`] bytes in all (`EINVAL` otherwise). An encrypted
    /// mount reads a block's metadata and its data, which lie apart, with one of these.
    /// Read-only. Reply: [`Reply::Batch`] of one [`Reply::Read`] per range.
    ReadGather {
        /// The file.
        fh: FileHandle,
        /// `(offset, count)` of each read, in the order of the replies.
        #[serde(deserialize_with = "crate::proto::bounded::lists::ranges")]
        ranges: Vec<(u64, u32)>,
    },
    /// Asks for regular file `file`'s delegation ([`crate::file_delegation`]): while the
    /// caller holds it, every other session's operation naming `file`
    /// ([`Op::files_named`]) is recalled. Renews the caller's lease. `EACCES` unless the
    /// caller may write the file; `EISDIR`/`EINVAL` for a directory or a special file.
    /// Reply: [`Reply::Delegated`] (no locks), or [`Reply::Recall`] if another session holds
    /// it (asked to give it back).
    DelegateFile {
        /// The file.
        file: FileHandle,
    },
    /// Gives file `file`'s delegation back. `ENOLCK` if the caller does not hold it.
    /// Reply: [`Reply::Done`].
    ReturnFile {
        /// The file.
        file: FileHandle,
    },
    /// `write` (a [`Op::Write`], [`Op::WriteGather`] or [`Op::WriteSetAttr`]; `EINVAL`
    /// otherwise) with `time` as the file's `mtime` and `ctime` (and as any time its
    /// changes set to now), if within [`crate::reserve::MAKE_AT_SKEW_SECS`] of the agreed
    /// time (else the agreed time): the time a mount that holds the file
    /// ([`crate::file_delegation`]) answered its `stat`s with, before the write reached the
    /// replicas. Reply: as `write`'s.
    WriteAt {
        /// The mount's time.
        time: Timestamp,
        /// The write.
        #[serde(deserialize_with = "crate::proto::bounded::nested_op")]
        write: Box<Op>,
    },
}

/// Most ranges one [`Op::ReadGather`] may carry.
pub const MAX_GATHER_READS: usize = 16;

/// Most attribute changes one [`Op::WriteSetAttr`] may carry.
pub const MAX_SETATTRS: usize = 16;

/// One write of an [`Op::WriteGather`] or [`Op::WriteSetAttr`].
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct Extent {
    /// Byte offset.
    pub offset: u64,
    /// The bytes.
    #[serde(with = "bytes")]
    pub data: Vec<u8>,
}

/// `setxattr(2)`'s flags.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
pub enum XattrSet {
    /// Create or replace.
    Any,
    /// `XATTR_CREATE`: `EEXIST` if the attribute exists.
    Create,
    /// `XATTR_REPLACE`: `ENODATA` if it does not.
    Replace,
}

impl Op {
    /// The operation's name, for logs and metrics (`"write"`, `"lookup"`, …).
    pub fn name(&self) -> &'static str {
        match self {
            Op::GetAttr { .. } => "getattr",
            Op::SetAttr { .. } => "setattr",
            Op::Lookup { .. } => "lookup",
            Op::Access { .. } => "access",
            Op::ReadLink { .. } => "readlink",
            Op::Read { .. } => "read",
            Op::Write { .. } => "write",
            Op::Create { .. } => "create",
            Op::Mkdir { .. } => "mkdir",
            Op::Symlink { .. } => "symlink",
            Op::Mknod { .. } => "mknod",
            Op::Remove { .. } => "remove",
            Op::Rmdir { .. } => "rmdir",
            Op::Rename { .. } => "rename",
            Op::Link { .. } => "link",
            Op::ReadDir { .. } => "readdir",
            Op::StatFs => "statfs",
            Op::Fsync { .. } => "fsync",
            Op::RenameNoReplace { .. } => "rename_noreplace",
            Op::Exchange { .. } => "exchange",
            Op::Allocate { .. } => "allocate",
            Op::GetXattr { .. } => "getxattr",
            Op::ListXattr { .. } => "listxattr",
            Op::SetXattr { .. } => "setxattr",
            Op::RemoveXattr { .. } => "removexattr",
            Op::WriteGather { .. } => "write_gather",
            Op::WriteSetAttr { .. } => "write_setattr",
            Op::GetLk { .. } => "getlk",
            Op::SetLk(_) => "setlk",
            Op::ReleaseLocks { .. } => "release_locks",
            Op::RenewLease => "renew_lease",
            Op::LockDelegate(_) => "lock_delegate",
            Op::ReturnDelegation { .. } => "return_delegation",
            Op::Recalls => "recalls",
            Op::SetLkWait(_) => "setlk_wait",
            Op::CancelWait { .. } => "cancel_wait",
            Op::SweepOrphans { .. } => "sweep_orphans",
            Op::SweepDir { .. } => "sweep_dir",
            Op::Reclaim { .. } => "reclaim",
            Op::CopyRange { .. } => "copy_range",
            Op::Punch { .. } => "punch",
            Op::Seek { .. } => "seek",
            Op::ReportCapacity { .. } => "report_capacity",
            Op::ReserveInodes { .. } => "reserve_inodes",
            Op::MakeAt { .. } => "make_at",
            Op::Batch(_) => "batch",
            Op::DelegateDir { .. } => "delegate_dir",
            Op::ReturnDir { .. } => "return_dir",
            Op::DelegateFile { .. } => "delegate_file",
            Op::ReturnFile { .. } => "return_file",
            Op::WriteAt { .. } => "write_at",
            Op::GroupPut { .. } => "group_put",
            Op::GroupGet { .. } => "group_get",
            Op::SetGroup { .. } => "set_group",
            Op::Signed { .. } => "signed",
            Op::FileGroup { .. } => "file_group",
            Op::WriterSeq => "writer_seq",
            Op::ReadGather { .. } => "read_gather",
        }
    }

    /// The [`Op::LockDelegate`] asking for the same lock as this [`Op::SetLk`]; any other
    /// operation unchanged.
    pub fn asking_delegation(self) -> Op {
        match self {
            Op::SetLk(r) => Op::LockDelegate(r),
            other => other,
        }
    }

    /// The directories whose names this operation reads or changes, or whose attributes it
    /// changes: what a directory delegation covers ([`crate::dir_delegation`]).
    pub fn dirs_named(&self) -> Vec<FileHandle> {
        match self {
            Op::Lookup { dir, .. }
            | Op::ReadDir { dir, .. }
            | Op::Create { dir, .. }
            | Op::Mkdir { dir, .. }
            | Op::Symlink { dir, .. }
            | Op::Mknod { dir, .. }
            | Op::Remove { dir, .. }
            | Op::Rmdir { dir, .. }
            | Op::Link { dir, .. }
            | Op::SweepDir { dir, .. } => vec![*dir],
            Op::Rename {
                from_dir, to_dir, ..
            }
            | Op::RenameNoReplace {
                from_dir, to_dir, ..
            } => vec![*from_dir, *to_dir],
            Op::Exchange { a_dir, b_dir, .. } => vec![*a_dir, *b_dir],
            Op::SetAttr { fh, .. } => vec![*fh],
            Op::MakeAt { make, .. } => make.dirs_named(),
            Op::Signed { op, .. } => op.dirs_named(),
            Op::SetGroup { dir, .. } => vec![*dir],
            Op::Batch(ops) => ops.iter().flat_map(Op::dirs_named).collect(),
            _ => Vec::new(),
        }
    }

    /// Whether another session's delegation may answer this operation [`Reply::Recall`]
    /// (its mount sends it again until it runs): it names a directory or a file, and is not
    /// a lock operation (those meet lock delegations, answered apart).
    ///
    /// [`Reply::Recall`]: crate::Reply::Recall
    pub fn may_be_recalled(&self) -> bool {
        !self.is_lock() && (!self.dirs_named().is_empty() || !self.files_named().is_empty())
    }

    /// The files this operation reads or changes the contents or attributes of, by handle:
    /// those a file delegation covers ([`crate::file_delegation`]). Names are left out (a
    /// link, rename or removal of a delegated file is not recalled), and so are locks (lock
    /// delegations cover them) and the reclaim of a file's stale tail.
    pub fn files_named(&self) -> Vec<FileHandle> {
        match self {
            Op::GetAttr { fh }
            | Op::SetAttr { fh, .. }
            | Op::Access { fh, .. }
            | Op::Read { fh, .. }
            | Op::Write { fh, .. }
            | Op::Fsync { fh, .. }
            | Op::Allocate { fh, .. }
            | Op::GetXattr { fh, .. }
            | Op::ListXattr { fh }
            | Op::SetXattr { fh, .. }
            | Op::RemoveXattr { fh, .. }
            | Op::WriteGather { fh, .. }
            | Op::WriteSetAttr { fh, .. }
            | Op::Punch { fh, .. }
            | Op::Seek { fh, .. }
            | Op::ReadGather { fh, .. } => vec![*fh],
            Op::CopyRange { from, to, .. } => vec![*from, *to],
            Op::MakeAt { make, .. } => make.files_named(),
            Op::WriteAt { write, .. } => write.files_named(),
            Op::Signed { op, .. } => op.files_named(),
            Op::Batch(ops) => ops.iter().flat_map(Op::files_named).collect(),
            _ => Vec::new(),
        }
    }

    /// Whether this operation never changes state (the read-only optimisation, §1.8). Lock
    /// operations are ordered, even `GetLk`: locks count by their owners' leases in agreed
    /// time.
    pub fn is_read_only(&self) -> bool {
        matches!(
            self,
            Op::GetAttr { .. }
                | Op::Lookup { .. }
                | Op::Access { .. }
                | Op::ReadLink { .. }
                | Op::Read { .. }
                | Op::ReadDir { .. }
                | Op::StatFs
                | Op::GetXattr { .. }
                | Op::ListXattr { .. }
                | Op::Recalls
                | Op::Seek { .. }
                | Op::GroupGet { .. }
                | Op::FileGroup { .. }
                | Op::WriterSeq
                | Op::ReadGather { .. }
        )
    }
}
