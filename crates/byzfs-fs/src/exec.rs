//! One operation's context ([`Exec`]): the state seen through a [`Txn`], the credentials, the
//! agreed time and the configuration, and the checks every family of operations shares.
//! `route.rs` sends each operation to the file of its family, which says what it means.
//!
//! Every step is deterministic. Checks come in the order Linux makes them where it matters to
//! the errno (for example `EEXIST` before a missing write permission on the parent). An
//! operation that fails returns its errno and its transaction is dropped, so it leaves no
//! partial effect.

use crate::config::FsConfig;
use crate::fail::Res;
use crate::inode::{self, Inode, Superblock};
use crate::proto::attr::{FileType, Timestamp, S_ISGID, S_ISUID};
use crate::proto::cred::Credentials;
use crate::proto::errno::Errno;
use crate::proto::handle::FileHandle;
use crate::proto::op::Op;
use crate::proto::reply::Reply;
use crate::store::{Store, Txn};

/// One operation's context.
pub(crate) struct Exec<'t, 'a, S: Store + ?Sized> {
    pub txn: &'t mut Txn<'a, S>,
    pub sb: &'t mut Superblock,
    pub cfg: &'t FsConfig,
    pub cred: &'t Credentials,
    pub now: Timestamp,
    /// The client that sent the operation, as the replication library authenticated it
    /// (it owns the locks it takes).
    pub client: u64,
    /// Blocks (or extended attributes) this operation may still delete
    /// ([`crate::reclaim::STEP_BLOCKS`] at the start): what would exceed it is queued.
    pub budget: u64,
    /// The handle the next creation gets, reserved by the client ([`crate::reserve`]), and
    /// the time it is made at (the one its mount answered with, or [`Exec::now`]); `None`:
    /// the next free handle, at [`Exec::now`].
    pub at: Option<(FileHandle, Timestamp)>,
    /// Groups this operation needs a writer proof for whatever it writes
    /// ([`crate::crypt_write`]): the group an [`Op::SetGroup`] joins.
    pub proofs_needed: Vec<[u8; 16]>,
}

/// `ENOTDIR` unless `i` is a directory.
pub(crate) fn need_dir(i: &Inode) -> Res<()> {
    if i.is_dir() {
        Ok(())
    } else {
        Err(Errno::ENOTDIR.into())
    }
}

/// Regular file only: `EISDIR` for directories, `EINVAL` for other types.
pub(crate) fn need_regular(i: &Inode) -> Res<()> {
    match i.kind {
        FileType::Regular => Ok(()),
        FileType::Directory => Err(Errno::EISDIR.into()),
        _ => Err(Errno::EINVAL.into()),
    }
}

/// Clears set-user-ID, and set-group-ID if group-executable, as Linux does on a write or
/// truncation by a non-root user.
pub(crate) fn kill_suid(cred: &Credentials, i: &mut Inode) {
    if cred.uid != 0 {
        i.mode &= !S_ISUID;
        if i.mode & 0o010 != 0 {
            i.mode &= !S_ISGID;
        }
    }
}

/// The answer to an operation a family's file was handed that is not of its family: never
/// given, since `route.rs` routes by [`Op::family`]; refused as an undecodable request is.
pub(crate) fn misrouted(op: &Op) -> Res<Reply> {
    debug_assert!(false, "{} routed to the wrong family", op.name());
    Err(Errno::EINVAL.into())
}

impl<S: Store + ?Sized> Exec<'_, '_, S> {
    pub(crate) fn resolve(&self, fh: FileHandle) -> Res<Inode> {
        inode::resolve(self.txn, fh)
    }

    pub(crate) fn save(&mut self, ino: u64, i: &Inode) {
        inode::save(self.txn, ino, i);
    }
}
