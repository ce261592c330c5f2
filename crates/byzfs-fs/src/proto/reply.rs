//! What a successful operation returns ([`Reply`]), and a request's result ([`FsResult`]).

use super::attr::{Attr, FileType, StatFs};
use super::errno::Errno;
use super::group::SignedGroup;
use super::handle::FileHandle;
use super::lock::{LockInfo, Returned};
use byzfs_bft::message::bytes;
use serde::{Deserialize, Serialize};

/// One directory entry returned by [`Op::ReadDir`](super::op::Op::ReadDir).
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct DirEntry {
    /// Pass this as `cookie` to continue after this entry. Stable: an entry keeps its cookie
    /// for its whole life, whatever is added or removed around it.
    pub cookie: u64,
    /// The name.
    pub name: Vec<u8>,
    /// The file it names.
    pub fh: FileHandle,
    /// Its type.
    pub kind: FileType,
}

/// A successful result.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub enum Reply {
    /// Attributes (getattr, setattr).
    Attr(Attr),
    /// A name resolved or created: its attributes, which include the handle.
    Entry(Attr),
    /// Done, nothing to return.
    Done,
    /// A symlink target.
    ReadLink(Vec<u8>),
    /// Data read; `eof` if the read reached the end of the file.
    Read {
        /// The bytes (holes read as zeros).
        #[serde(with = "bytes")]
        data: Vec<u8>,
        /// Whether `offset + data.len()` is the file size.
        eof: bool,
    },
    /// Bytes written, and the attributes after the write.
    Write {
        /// Bytes written (all of them).
        count: u32,
        /// Attributes after the write.
        attr: Attr,
    },
    /// Directory entries in cookie order; `eof` if the listing is complete.
    ReadDir {
        /// The entries (`.` and `..` first, cookies 1 and 2).
        entries: Vec<DirEntry>,
        /// Whether there are no more entries.
        eof: bool,
    },
    /// File-system statistics.
    StatFs(StatFs),
    /// An extended attribute's value, or a list of names (see
    /// [`Op::ListXattr`](super::op::Op::ListXattr)).
    Xattr(#[serde(with = "bytes")] Vec<u8>),
    /// A name made (create, mkdir, symlink, mknod, link): the entry's attributes (which
    /// include the handle) and the directory's after the operation — NFSv3's post-operation
    /// attributes, so a client can cache them instead of asking again.
    Made {
        /// The new (or, for a non-exclusive create of an existing file, the existing) entry.
        entry: Attr,
        /// The directory, after the operation.
        dir: Attr,
    },
    /// The result of a lock operation.
    Lock {
        /// `GetLk`: the first conflicting lock of another owner, if any.
        conflict: Option<LockInfo>,
        /// The client's lease had lapsed before this operation: every lock it held was
        /// dropped ([`crate::lock`]).
        lapsed: bool,
        /// The file's attributes (not for `RenewLease`): a client that caches the file's
        /// data can tell whether another client changed it (NFS revalidates at a lock).
        attr: Option<Attr>,
    },
    /// A name removed (remove, rmdir): the directory's attributes after the operation, the
    /// inode the name held, and that inode's attributes if it still exists (other links).
    Unlinked {
        /// The directory, after the operation.
        dir: Attr,
        /// The inode the removed name held.
        ino: u64,
        /// Its attributes if links remain; `None` if it was freed.
        left: Option<Attr>,
    },
    /// Another client holds the file's lock delegation; it has been asked to give it back.
    /// Try again shortly ([`crate::delegation`]).
    Recall,
    /// The lock was taken and the file's lock delegation granted ([`crate::delegation`]).
    Delegated {
        /// As [`Reply::Lock`]'s.
        lapsed: bool,
        /// The file's attributes.
        attr: Attr,
        /// Every lock the client's owners hold on the file, the new one included: the
        /// client keeps them from now on.
        mine: Vec<Returned>,
    },
    /// The files whose lock delegation the client must give back.
    Recalls(Vec<u64>),
    /// [`Op::SetLkWait`](super::op::Op::SetLkWait) would wait for an owner that waits for the
    /// requester: `EDEADLK`.
    Deadlock {
        /// As [`Reply::Lock`]'s.
        lapsed: bool,
    },
    /// What an [`Op::SweepOrphans`](super::op::Op::SweepOrphans) did.
    Swept {
        /// Hidden files removed.
        removed: u32,
        /// Entries remain to be looked at: send another sweep with this as `after`.
        next: Option<u64>,
    },
    /// What an [`Op::Reclaim`](super::op::Op::Reclaim) did.
    Reclaimed {
        /// Blocks (and extended attributes) deleted.
        blocks: u64,
        /// Work is left (in the queue, or of the file asked about): send another.
        more: bool,
    },
    /// Where an [`Op::Seek`](super::op::Op::Seek) got to.
    Seek {
        /// With `done`, the offset `lseek` returns; otherwise where to ask again from (the
        /// operation looked at a bounded number of blocks).
        at: u64,
        /// `at` is the answer.
        done: bool,
    },
    /// The inode numbers an [`Op::ReserveInodes`](super::op::Op::ReserveInodes) reserved:
    /// `first.ino + k` with generation `first.generation + k`, for `k` in `0..count`.
    Reserved {
        /// The first reserved handle.
        first: FileHandle,
        /// How many.
        count: u32,
    },
    /// The replies of an [`Op::Batch`](super::op::Op::Batch)'s operations, in order.
    Batch(#[serde(deserialize_with = "crate::proto::bounded::batch_replies")] Vec<Reply>),
    /// An encryption group's record with its owner's signature
    /// ([`Op::GroupGet`](super::op::Op::GroupGet)), if the group exists.
    Group(Option<SignedGroup>),
    /// A file's encryption group ([`Op::FileGroup`](super::op::Op::FileGroup)), if it has one.
    FileGroup(Option<[u8; 16]>),
    /// The last writer-proof sequence number ([`Op::WriterSeq`](super::op::Op::WriterSeq)).
    WriterSeq(u64),
}

impl Reply {
    /// Calls `f` on every file's attributes the reply carries (a batch's members' too).
    pub fn for_each_attr_mut(&mut self, f: &mut impl FnMut(&mut Attr)) {
        match self {
            Reply::Attr(a)
            | Reply::Entry(a)
            | Reply::Write { attr: a, .. }
            | Reply::Delegated { attr: a, .. } => f(a),
            Reply::Made { entry, dir } => {
                f(entry);
                f(dir);
            }
            Reply::Unlinked { dir, left, .. } => {
                f(dir);
                if let Some(a) = left {
                    f(a);
                }
            }
            Reply::Batch(replies) => {
                for r in replies {
                    r.for_each_attr_mut(f);
                }
            }
            _ => {}
        }
    }

    /// The attributes of the entry an entry-giving reply names: [`Reply::Entry`] or
    /// [`Reply::Made`].
    pub fn entry(&self) -> Option<&Attr> {
        match self {
            Reply::Entry(a) | Reply::Made { entry: a, .. } => Some(a),
            _ => None,
        }
    }
}

/// The result of a request.
pub type FsResult = Result<Reply, Errno>;
