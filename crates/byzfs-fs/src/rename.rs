//! Renames, of the directories family: `rename(2)` and `renameat2(2)`'s `RENAME_NOREPLACE`
//! and `RENAME_EXCHANGE`, decided atomically at the replicas.

use crate::dir::{self, MAX_DEPTH};
use crate::exec::{need_dir, Exec};
use crate::fail::Res;
use crate::inode::{self, Inode};
use crate::perm;
use crate::proto::attr::MAX_LINKS;
use crate::proto::errno::Errno;
use crate::proto::handle::FileHandle;
use crate::proto::op::{W_OK, X_OK};
use crate::proto::reply::Reply;
use crate::store::Store;

impl<S: Store + ?Sized> Exec<'_, '_, S> {
    pub(crate) fn rename(
        &mut self,
        from: FileHandle,
        from_name: &[u8],
        to: FileHandle,
        to_name: &[u8],
        no_replace: bool,
    ) -> Res<Reply> {
        let (fd, td) = self.two_names(from, from_name, to, to_name)?;
        let src = dir::lookup(self.txn, from.ino, from_name)?.ok_or(Errno::ENOENT)?;
        let dst = dir::lookup(self.txn, to.ino, to_name)?;
        if no_replace && dst.is_some() {
            return Err(Errno::EEXIST.into());
        }
        if dst.as_ref().is_some_and(|d| d.target.ino == src.target.ino) {
            // POSIX: renaming a file onto itself (or onto another link of it) does nothing.
            return Ok(Reply::Done);
        }
        perm::check(self.cred, &fd, W_OK)?;
        perm::check(self.cred, &td, W_OK)?;
        let s = inode::must_load(self.txn, src.target.ino)?;
        perm::check_sticky(self.cred, &fd, &s)?;
        let moving_dir = s.is_dir();
        let reparent = moving_dir && from.ino != to.ino;
        if moving_dir {
            if dir::depth(self.txn, to.ino)? + 1 > MAX_DEPTH {
                return Err(Errno::ENAMETOOLONG.into());
            }
            if dir::is_ancestor(self.txn, src.target.ino, to.ino)? {
                return Err(Errno::EINVAL.into());
            }
            if reparent {
                // Its `..` changes.
                perm::check(self.cred, &s, W_OK)?;
            }
        }
        if let Some(dst) = &dst {
            let t = inode::must_load(self.txn, dst.target.ino)?;
            perm::check_sticky(self.cred, &td, &t)?;
            match (moving_dir, t.is_dir()) {
                (true, false) => return Err(Errno::ENOTDIR.into()),
                (false, true) => return Err(Errno::EISDIR.into()),
                (true, true) if t.entries > 0 => return Err(Errno::ENOTEMPTY.into()),
                _ => {}
            }
        } else if reparent && td.nlink >= MAX_LINKS {
            return Err(Errno::EMLINK.into());
        }
        // Checks done; now mutate, reloading each directory so `from == to` works.
        if let Some(dst) = dst {
            let mut d = inode::must_load(self.txn, to.ino)?;
            dir::remove(self.txn, to.ino, &mut d, to_name, dst.cookie);
            let t = inode::must_load(self.txn, dst.target.ino)?;
            if t.is_dir() {
                d.nlink = d.nlink.saturating_sub(1);
                self.save(to.ino, &d);
                self.free(dst.target.ino, t)?;
            } else {
                self.save(to.ino, &d);
                self.drop_link(dst.target.ino)?;
            }
        }
        let mut d = inode::must_load(self.txn, from.ino)?;
        dir::remove(self.txn, from.ino, &mut d, from_name, src.cookie);
        if reparent {
            d.nlink = d.nlink.saturating_sub(1);
        }
        d.mtime = self.now;
        d.ctime = self.now;
        self.save(from.ino, &d);
        let mut d = inode::must_load(self.txn, to.ino)?;
        dir::add(self.txn, to.ino, &mut d, to_name, src.target.clone());
        if reparent {
            d.nlink += 1;
        }
        d.mtime = self.now;
        d.ctime = self.now;
        self.save(to.ino, &d);
        let mut s = inode::must_load(self.txn, src.target.ino)?;
        if moving_dir {
            s.parent = to.ino;
        }
        s.ctime = self.now;
        self.save(src.target.ino, &s);
        Ok(Reply::Done)
    }

    /// The checks that every rename and exchange starts with: both handles are directories
    /// the caller may search, and both names are proper names (not `.` or `..`). Returns the
    /// two directories' inodes.
    fn two_names(
        &self,
        a_dir: FileHandle,
        a_name: &[u8],
        b_dir: FileHandle,
        b_name: &[u8],
    ) -> Res<(Inode, Inode)> {
        let ad = self.resolve(a_dir)?;
        let bd = self.resolve(b_dir)?;
        need_dir(&ad)?;
        need_dir(&bd)?;
        if dir::is_dot(a_name) || dir::is_dot(b_name) {
            return Err(Errno::EINVAL.into());
        }
        dir::check_name(a_name)?;
        dir::check_name(b_name)?;
        perm::check(self.cred, &ad, X_OK)?;
        perm::check(self.cred, &bd, X_OK)?;
        Ok((ad, bd))
    }

    /// `renameat2(RENAME_EXCHANGE)`: `a_dir/a_name` and `b_dir/b_name` swap targets. Checks
    /// as for a rename of each onto the other, except that nothing is removed.
    pub(crate) fn exchange(
        &mut self,
        a_dir: FileHandle,
        a_name: &[u8],
        b_dir: FileHandle,
        b_name: &[u8],
    ) -> Res<Reply> {
        let (ad, bd) = self.two_names(a_dir, a_name, b_dir, b_name)?;
        let a = dir::lookup(self.txn, a_dir.ino, a_name)?.ok_or(Errno::ENOENT)?;
        let b = dir::lookup(self.txn, b_dir.ino, b_name)?.ok_or(Errno::ENOENT)?;
        if a.target.ino == b.target.ino {
            // Two links of one file (or one name twice): nothing changes, as on Linux.
            return Ok(Reply::Done);
        }
        perm::check(self.cred, &ad, W_OK)?;
        perm::check(self.cred, &bd, W_OK)?;
        let ai = inode::must_load(self.txn, a.target.ino)?;
        let bi = inode::must_load(self.txn, b.target.ino)?;
        perm::check_sticky(self.cred, &ad, &ai)?;
        perm::check_sticky(self.cred, &bd, &bi)?;
        let cross = a_dir.ino != b_dir.ino;
        if cross {
            // Each directory that changes parent: not into its own subtree, within the
            // depth bound, and its `..` is written.
            for (moving, i, into) in [
                (a.target.ino, &ai, b_dir.ino),
                (b.target.ino, &bi, a_dir.ino),
            ] {
                if i.is_dir() {
                    if dir::is_ancestor(self.txn, moving, into)? {
                        return Err(Errno::EINVAL.into());
                    }
                    if dir::depth(self.txn, into)? + 1 > MAX_DEPTH {
                        return Err(Errno::ENAMETOOLONG.into());
                    }
                    perm::check(self.cred, i, W_OK)?;
                }
            }
        }
        // A directory gains a subdirectory (nlink + 1) when a directory arrives in exchange
        // for a non-directory.
        let a_gains = cross && bi.is_dir() && !ai.is_dir();
        let b_gains = cross && ai.is_dir() && !bi.is_dir();
        if (a_gains && ad.nlink >= MAX_LINKS) || (b_gains && bd.nlink >= MAX_LINKS) {
            return Err(Errno::EMLINK.into());
        }
        // Checks done; now mutate, reloading each directory so that `a_dir == b_dir` works.
        let mut d = inode::must_load(self.txn, a_dir.ino)?;
        dir::remove(self.txn, a_dir.ino, &mut d, a_name, a.cookie);
        self.save(a_dir.ino, &d);
        let mut d = inode::must_load(self.txn, b_dir.ino)?;
        dir::remove(self.txn, b_dir.ino, &mut d, b_name, b.cookie);
        self.save(b_dir.ino, &d);
        for (dir_ino, name, target, gains, loses) in [
            (a_dir.ino, a_name, b.target.clone(), a_gains, b_gains),
            (b_dir.ino, b_name, a.target.clone(), b_gains, a_gains),
        ] {
            let mut d = inode::must_load(self.txn, dir_ino)?;
            dir::add(self.txn, dir_ino, &mut d, name, target);
            if gains {
                d.nlink += 1;
            }
            if loses {
                d.nlink = d.nlink.saturating_sub(1);
            }
            d.mtime = self.now;
            d.ctime = self.now;
            self.save(dir_ino, &d);
        }
        for (ino, new_parent) in [(a.target.ino, b_dir.ino), (b.target.ino, a_dir.ino)] {
            let mut i = inode::must_load(self.txn, ino)?;
            if i.is_dir() {
                i.parent = new_parent;
            }
            i.ctime = self.now;
            self.save(ino, &i);
        }
        Ok(Reply::Done)
    }
}
