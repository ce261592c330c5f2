//! Which files are encrypted (issue #28, docs/plans/28-encryption.md step 2): the
//! encryption group of an inode, a record `crypt_file(ino)` beside the inode (a record of
//! its own so inodes stored before it keep decoding).
//!
//! A directory joins a group with [`crate::op::Op::SetGroup`] while it is empty; everything
//! made in it afterwards belongs to the same group, and keeps it wherever it is moved or
//! linked. The group decides who may change the file ([`crate::crypt_write`]); the replicas
//! never learn a key, only the group's id.

use crate::attr::FileType;
use crate::encoding::{decode, encode};
use crate::errno::{Errno, Res};
use crate::exec::Exec;
use crate::handle::FileHandle;
use crate::key;
use crate::op::Reply;
use crate::store::{Store, Txn};

/// The group of `ino` as `txn` sees it, if it has one.
pub(crate) fn group_of<S: Store + ?Sized>(txn: &Txn<'_, S>, ino: u64) -> Res<Option<[u8; 16]>> {
    match txn.get(&key::crypt_file(ino))? {
        Some(b) => Ok(Some(decode(&b)?)),
        None => Ok(None),
    }
}

impl<S: Store + ?Sized> Exec<'_, '_, S> {
    /// [`crate::op::Op::SetGroup`]: empty directory `dir`, owned by the caller (or the
    /// caller root), joins `group`. The operation needs a writer proof for `group`
    /// ([`crate::crypt_write`]), so nobody puts files in a group they cannot write.
    pub(crate) fn set_group(&mut self, dir: FileHandle, group: [u8; 16]) -> Res<Reply> {
        let mut d = self.resolve(dir)?;
        if d.kind != FileType::Directory {
            return Err(Errno::ENOTDIR.into());
        }
        if self.cred.uid != 0 && self.cred.uid != d.uid {
            return Err(Errno::EPERM.into());
        }
        if group_of(self.txn, dir.ino)?.is_some() {
            return Err(Errno::EEXIST.into());
        }
        if d.entries > 0 {
            return Err(Errno::ENOTEMPTY.into());
        }
        self.txn.put(key::crypt_file(dir.ino), encode(&group));
        self.proofs_needed.push(group);
        d.ctime = self.now;
        self.save(dir.ino, &d);
        Ok(Reply::Attr(d.attr(dir.ino)))
    }

    /// [`crate::op::Op::FileGroup`].
    pub(crate) fn file_group(&mut self, fh: FileHandle) -> Res<Reply> {
        self.resolve(fh)?;
        Ok(Reply::FileGroup(group_of(self.txn, fh.ino)?))
    }

    /// A new inode `ino` made in directory `dir` joins `dir`'s group.
    pub(crate) fn inherit_group(&mut self, dir: u64, ino: u64) -> Res<()> {
        if let Some(g) = group_of(self.txn, dir)? {
            self.txn.put(key::crypt_file(ino), encode(&g));
        }
        Ok(())
    }
}
