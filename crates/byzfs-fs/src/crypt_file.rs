//! Which files are encrypted (issue #28, docs/ENCRYPTION.md): the
//! encryption group of an inode and its sealed header, a record `crypt_file(ino)` beside
//! the inode (a record of its own so inodes stored before it keep decoding).
//!
//! A directory joins a group with [`crate::proto::op::Op::SetGroup`] in the request that makes it
//! (an [`crate::proto::op::Op::Batch`] of the creation and the join, with a writer proof for the
//! group); everything made in it afterwards belongs to the same group, and keeps it wherever it is
//! moved or linked. Nobody claims a directory that already exists — a tree a writer's mount began
//! to make, `/g-<id>` made by someone else — into their own group: a directory is in a group from
//! its birth or never (issue #43 item 5). The group decides who may change the file
//! ([`crate::crypt_write`]); the replicas never learn a key, only the group's id.
//!
//! The **header** is what the mount keeps about a file beside its sealed blocks (its
//! plaintext size, key version; `byzfs_crypt::file`), sealed: the replicas store it as an
//! [`crate::proto::op::Op::Signed`] sets it and return it in every [`crate::Attr`] of the file
//! (`Attr::crypt`), so a `getattr` or `lookup` needs no second round trip.

use crate::encoding::{decode, encode};
use crate::exec::Exec;
use crate::fail::Res;
use crate::key;
use crate::proto::attr::FileType;
use crate::proto::errno::Errno;
use crate::proto::handle::FileHandle;
use crate::proto::op::Op;
use crate::proto::reply::Reply;
use crate::store::{Store, Txn};
use serde::{Deserialize, Serialize};

/// Largest sealed header, in bytes.
pub const MAX_HEADER: usize = 256;

/// The record `crypt_file(ino)`.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub(crate) struct CryptFile {
    /// The file's group.
    pub group: [u8; 16],
    /// Its sealed header (empty until a writer sets one).
    pub header: Vec<u8>,
}

/// The record of `ino` as `txn` sees it, if it is in a group.
pub(crate) fn record_of<S: Store + ?Sized>(txn: &Txn<'_, S>, ino: u64) -> Res<Option<CryptFile>> {
    match txn.get(&key::crypt_file(ino))? {
        Some(b) => Ok(Some(decode(&b)?)),
        None => Ok(None),
    }
}

/// The group of `ino` as `txn` sees it, if it has one.
pub(crate) fn group_of<S: Store + ?Sized>(txn: &Txn<'_, S>, ino: u64) -> Res<Option<[u8; 16]>> {
    Ok(record_of(txn, ino)?.map(|r| r.group))
}

impl<S: Store + ?Sized> Exec<'_, '_, S> {
    /// [`crate::proto::op::Op::SetGroup`]: empty directory `dir`, made by this request and owned by
    /// the caller (root included: no exception), joins `group`. The operation needs a
    /// writer proof for `group` ([`crate::crypt_write`]), so nobody puts files in a group
    /// they cannot write.
    pub(crate) fn set_group(&mut self, dir: FileHandle, group: [u8; 16]) -> Res<Reply> {
        let mut d = self.resolve(dir)?;
        if d.kind != FileType::Directory {
            return Err(Errno::ENOTDIR.into());
        }
        if group_of(self.txn, dir.ino)?.is_some() {
            return Err(Errno::EEXIST.into());
        }
        if d.entries > 0 {
            return Err(Errno::ENOTEMPTY.into());
        }
        // Inode numbers are never reused (`inode`), so an inode absent before the request
        // is one it made.
        if self.cred.uid != d.uid || self.txn.get_before(&key::inode(dir.ino))?.is_some() {
            return Err(Errno::EPERM.into());
        }
        let rec = CryptFile {
            group,
            header: Vec::new(),
        };
        self.txn.put(key::crypt_file(dir.ino), encode(&rec));
        self.proofs_needed.push(group);
        d.ctime = self.now;
        self.save(dir.ino, &d);
        Ok(Reply::Attr(d.attr(dir.ino)))
    }

    /// [`crate::proto::op::Op::FileGroup`].
    pub(crate) fn file_group(&mut self, fh: FileHandle) -> Res<Reply> {
        self.resolve(fh)?;
        Ok(Reply::FileGroup(group_of(self.txn, fh.ino)?))
    }

    /// A new inode `ino` made in directory `dir` joins `dir`'s group.
    pub(crate) fn inherit_group(&mut self, dir: u64, ino: u64) -> Res<()> {
        if let Some(group) = group_of(self.txn, dir)? {
            let rec = CryptFile {
                group,
                header: Vec::new(),
            };
            self.txn.put(key::crypt_file(ino), encode(&rec));
        }
        Ok(())
    }

    /// Sets `fh`'s sealed header (a member of [`crate::proto::op::Op::Signed`]'s `headers`):
    /// `EINVAL` for a file in no group or a header over [`MAX_HEADER`] bytes; nothing for a file
    /// that no longer exists.
    pub(crate) fn set_header(&mut self, fh: FileHandle, header: Vec<u8>) -> Res<()> {
        // A file the operation removed (a batch that writes a file, then removes it) has
        // no header left to set.
        if self.resolve(fh).is_err() {
            return Ok(());
        }
        let mut rec = record_of(self.txn, fh.ino)?.ok_or(Errno::EINVAL)?;
        if header.len() > MAX_HEADER {
            return Err(Errno::EINVAL.into());
        }
        rec.header = header;
        self.txn.put(key::crypt_file(fh.ino), encode(&rec));
        Ok(())
    }

    /// `ESTALE` unless `fh` is in a group and has header `header`
    /// ([`crate::proto::op::Op::Signed`]'s `expect`); nothing for a file that no longer exists
    /// (the operation removed it, or failed).
    pub(crate) fn expect_header(&mut self, fh: FileHandle, header: &[u8]) -> Res<()> {
        if self.resolve(fh).is_err() {
            return Ok(());
        }
        match record_of(self.txn, fh.ino)? {
            Some(r) if r.header == header => Ok(()),
            _ => Err(Errno::ESTALE.into()),
        }
    }

    /// Runs read-only `op`; its reply with headers ([`Self::with_headers`]).
    pub(crate) fn run_read_only(&mut self, op: Op) -> Res<Reply> {
        let reply = self.run(op)?;
        self.with_headers(reply)
    }

    /// `reply` with the header of each file whose attributes it carries (`Attr::crypt`).
    pub(crate) fn with_headers(&self, mut reply: Reply) -> Res<Reply> {
        let mut failed = None;
        reply.for_each_attr_mut(&mut |a| match record_of(self.txn, a.fh.ino) {
            Ok(r) => a.crypt = r.map(|r| r.header).unwrap_or_default(),
            Err(e) => failed = Some(e),
        });
        match failed {
            Some(e) => Err(e),
            None => Ok(reply),
        }
    }
}
