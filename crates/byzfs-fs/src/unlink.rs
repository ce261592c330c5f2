//! Removals, of the directories family: `unlink` and `rmdir`, and what a name's removal
//! frees (an inode at its last link, with everything it stores: at once within the
//! operation's budget, the rest through the reclaim queue, [`crate::reclaim`]).

use crate::dir;
use crate::exec::{need_dir, Exec};
use crate::fail::Res;
use crate::inode::{self, Inode};
use crate::key;
use crate::perm;
use crate::proto::attr::FileType;
use crate::proto::errno::Errno;
use crate::proto::handle::FileHandle;
use crate::proto::op::W_OK;
use crate::proto::reply::Reply;
use crate::store::Store;

impl<S: Store + ?Sized> Exec<'_, '_, S> {
    pub(crate) fn remove(&mut self, dir: FileHandle, name: &[u8]) -> Res<Reply> {
        if dir::is_dot(name) {
            need_dir(&self.resolve(dir)?)?;
            return Err(Errno::EISDIR.into());
        }
        let (mut d, e) = self.dir_entry(dir, name)?;
        let e = e.ok_or(Errno::ENOENT)?;
        let victim = inode::must_load(self.txn, e.target.ino)?;
        if victim.is_dir() {
            return Err(Errno::EISDIR.into());
        }
        perm::check(self.cred, &d, W_OK)?;
        perm::check_sticky(self.cred, &d, &victim)?;
        dir::remove(self.txn, dir.ino, &mut d, name, e.cookie);
        d.mtime = self.now;
        d.ctime = self.now;
        self.save(dir.ino, &d);
        let ino = e.target.ino;
        let left = self.drop_link(ino)?.map(|i| i.attr(ino));
        Ok(Reply::Unlinked {
            dir: d.attr(dir.ino),
            ino,
            left,
        })
    }

    pub(crate) fn rmdir(&mut self, dir: FileHandle, name: &[u8]) -> Res<Reply> {
        if dir::is_dot(name) {
            need_dir(&self.resolve(dir)?)?;
            return Err(if name == b"." {
                Errno::EINVAL
            } else {
                Errno::ENOTEMPTY
            }
            .into());
        }
        let (mut d, e) = self.dir_entry(dir, name)?;
        let e = e.ok_or(Errno::ENOENT)?;
        let victim = inode::must_load(self.txn, e.target.ino)?;
        need_dir(&victim)?;
        if victim.entries > 0 {
            return Err(Errno::ENOTEMPTY.into());
        }
        perm::check(self.cred, &d, W_OK)?;
        perm::check_sticky(self.cred, &d, &victim)?;
        dir::remove(self.txn, dir.ino, &mut d, name, e.cookie);
        d.nlink = d.nlink.saturating_sub(1);
        d.mtime = self.now;
        d.ctime = self.now;
        self.save(dir.ino, &d);
        self.free(e.target.ino, victim)?;
        Ok(Reply::Unlinked {
            dir: d.attr(dir.ino),
            ino: e.target.ino,
            left: None,
        })
    }

    /// Drops one link of non-directory `ino`; frees it (data included) at zero links.
    /// Returns the inode if links remain.
    pub(crate) fn drop_link(&mut self, ino: u64) -> Res<Option<Inode>> {
        let mut i = inode::must_load(self.txn, ino)?;
        i.nlink = i.nlink.saturating_sub(1);
        if i.nlink > 0 {
            i.ctime = self.now;
            self.save(ino, &i);
            return Ok(Some(i));
        }
        self.free(ino, i)?;
        Ok(None)
    }

    /// Deletes inode `ino` and everything it stores: at once within the operation's budget,
    /// the rest through the reclaim queue ([`crate::reclaim`]).
    pub(crate) fn free(&mut self, ino: u64, i: Inode) -> Res<()> {
        // What it stores leaves `used_bytes` as it is deleted: blocks and attributes now or
        // from the queue, a symlink's target now.
        if i.kind == FileType::Regular {
            self.drop_data(ino)?;
        }
        let target = i.target.len() as u64;
        self.sb.used_bytes = self.sb.used_bytes.saturating_sub(target);
        self.drop_xattrs_bounded(ino)?;
        self.drop_locks(ino);
        self.sb.inodes = self.sb.inodes.saturating_sub(1);
        self.txn.delete(key::inode(ino));
        self.txn.delete(key::crypt_file(ino));
        Ok(())
    }
}
