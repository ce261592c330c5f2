//! The semantics of each operation, as a function of the state seen through a [`Txn`], the
//! credentials, the agreed time and the configuration.
//!
//! Every step is deterministic. Checks come in the order Linux makes them where it matters to
//! the errno (for example `EEXIST` before a missing write permission on the parent). An
//! operation that fails returns its errno and its transaction is dropped, so it leaves no
//! partial effect.

use crate::data;
use crate::dir::{self, Target, MAX_DEPTH, MAX_NAME, MAX_SYMLINK};
use crate::fail::Res;
use crate::inode::{self, Inode, Superblock};
use crate::perm;
use crate::proto::attr::{
    FileType, SetTime, StatFs, Timestamp, MAX_LINKS, MODE_MASK, S_ISGID, S_ISUID,
};
use crate::proto::cred::Credentials;
use crate::proto::errno::Errno;
use crate::proto::handle::FileHandle;
use crate::proto::op::{
    Extent, Op, SpecialKind, MAX_GATHER_READS, MAX_IO, MAX_READDIR_ENTRIES, MAX_SETATTRS, R_OK,
    W_OK, X_OK,
};
use crate::proto::reply::{DirEntry, Reply};
use crate::store::{Store, Txn};
use crate::FsConfig;

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
    /// The handle the next creation gets, reserved by the client ([`crate::reserve`]);
    /// `None`: the next free one.
    pub at: Option<FileHandle>,
    /// Groups this operation needs a writer proof for whatever it writes
    /// ([`crate::crypt_write`]): the group an [`Op::SetGroup`] joins.
    pub proofs_needed: Vec<[u8; 16]>,
}

/// `ENOTDIR` unless `i` is a directory.
fn need_dir(i: &Inode) -> Res<()> {
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
fn kill_suid(cred: &Credentials, i: &mut Inode) {
    if cred.uid != 0 {
        i.mode &= !S_ISUID;
        if i.mode & 0o010 != 0 {
            i.mode &= !S_ISGID;
        }
    }
}

impl<S: Store + ?Sized> Exec<'_, '_, S> {
    /// Runs `op`.
    pub fn run(&mut self, op: Op) -> Res<Reply> {
        if let Some(recall) = self.recall_named_dirs(&op)? {
            return Ok(recall);
        }
        match op {
            Op::GetAttr { fh } => Ok(Reply::Attr(self.resolve(fh)?.attr(fh.ino))),
            Op::SetAttr { fh, set } => self.setattr(fh, set),
            Op::Lookup { dir, name } => self.lookup(dir, &name),
            Op::Access { fh, mask } => {
                let i = self.resolve(fh)?;
                perm::check(self.cred, &i, mask)?;
                Ok(Reply::Done)
            }
            Op::ReadLink { fh } => {
                let i = self.resolve(fh)?;
                if i.kind != FileType::Symlink {
                    return Err(Errno::EINVAL.into());
                }
                Ok(Reply::ReadLink(i.target))
            }
            Op::Read { fh, offset, count } => {
                let i = self.resolve(fh)?;
                need_regular(&i)?;
                perm::check_io(self.cred, &i, R_OK)?;
                let count = u64::from(count.min(MAX_IO));
                let id = self.data_rec(fh.ino)?.id;
                let (data, eof) = data::read(self.txn, id, &i, offset, count)?;
                Ok(Reply::Read { data, eof })
            }
            Op::ReadGather { fh, ranges } => {
                let i = self.resolve(fh)?;
                need_regular(&i)?;
                perm::check_io(self.cred, &i, R_OK)?;
                let total: u64 = ranges.iter().map(|&(_, c)| u64::from(c)).sum();
                if ranges.is_empty() || ranges.len() > MAX_GATHER_READS || total > u64::from(MAX_IO)
                {
                    return Err(Errno::EINVAL.into());
                }
                let id = self.data_rec(fh.ino)?.id;
                let mut replies = Vec::with_capacity(ranges.len());
                for (offset, count) in ranges {
                    let (data, eof) = data::read(self.txn, id, &i, offset, u64::from(count))?;
                    replies.push(Reply::Read { data, eof });
                }
                Ok(Reply::Batch(replies))
            }
            Op::Write { fh, offset, data } => self.write(fh, offset, &data),
            Op::WriteGather { fh, extents } => self.write_gather(fh, &extents),
            Op::WriteSetAttr { fh, extents, sets } => self.write_setattr(fh, &extents, sets),
            Op::Create {
                dir,
                name,
                mode,
                exclusive,
            } => self.create(dir, &name, mode, exclusive),
            Op::Mkdir { dir, name, mode } => {
                self.make(dir, &name, FileType::Directory, mode, Vec::new(), 0)
            }
            Op::Symlink { dir, name, target } => {
                if target.is_empty() {
                    return Err(Errno::ENOENT.into());
                }
                if target.len() > MAX_SYMLINK {
                    return Err(Errno::ENAMETOOLONG.into());
                }
                if target.contains(&0) {
                    return Err(Errno::EINVAL.into());
                }
                self.make(dir, &name, FileType::Symlink, 0o777, target, 0)
            }
            Op::Mknod {
                dir,
                name,
                kind,
                mode,
            } => {
                let (kind, rdev) = match kind {
                    SpecialKind::Fifo => (FileType::Fifo, 0),
                    SpecialKind::Socket => (FileType::Socket, 0),
                    SpecialKind::CharDevice(r) => (FileType::CharDevice, r),
                    SpecialKind::BlockDevice(r) => (FileType::BlockDevice, r),
                };
                // Device nodes need privilege (Linux: CAP_MKNOD), decided here so that every
                // replica gives the same answer whatever the client's kernel checked.
                let device = matches!(kind, FileType::CharDevice | FileType::BlockDevice);
                if device && self.cred.uid != 0 {
                    return Err(Errno::EPERM.into());
                }
                self.make(dir, &name, kind, mode, Vec::new(), rdev)
            }
            Op::Remove { dir, name } => self.remove(dir, &name),
            Op::Rmdir { dir, name } => self.rmdir(dir, &name),
            Op::Rename {
                from_dir,
                from_name,
                to_dir,
                to_name,
            } => self.rename(from_dir, &from_name, to_dir, &to_name, false),
            Op::RenameNoReplace {
                from_dir,
                from_name,
                to_dir,
                to_name,
            } => self.rename(from_dir, &from_name, to_dir, &to_name, true),
            Op::Exchange {
                a_dir,
                a_name,
                b_dir,
                b_name,
            } => self.exchange(a_dir, &a_name, b_dir, &b_name),
            Op::Link { fh, dir, name } => self.link(fh, dir, &name),
            Op::ReadDir {
                dir,
                cookie,
                max_entries,
            } => self.readdir(dir, cookie, max_entries),
            Op::StatFs => Ok(Reply::StatFs(self.statfs()?)),
            Op::Fsync { fh } => {
                self.resolve(fh)?;
                Ok(Reply::Done)
            }
            Op::Allocate { fh, end } => self.allocate(fh, end),
            Op::GetXattr { fh, name } => self.getxattr(fh, &name),
            Op::ListXattr { fh } => self.listxattr(fh),
            Op::SetXattr {
                fh,
                name,
                value,
                how,
            } => self.setxattr(fh, &name, &value, how),
            Op::RemoveXattr { fh, name } => self.removexattr(fh, &name),
            Op::GetLk {
                fh,
                owner,
                kind,
                start,
                end,
            } => self.getlk(fh, owner, kind, start, end),
            Op::SetLk(r) => self.setlk(r),
            Op::ReleaseLocks { fh, owner } => self.release_locks(fh, owner),
            Op::RenewLease => self.renew_lease(),
            Op::LockDelegate(r) => self.lock_delegate(r),
            Op::ReturnDelegation { fh, locks } => self.return_delegation(fh, locks),
            Op::Recalls => self.recalls(),
            Op::SetLkWait(r) => self.setlk_wait(r),
            Op::CancelWait { fh, owner } => self.cancel_wait(fh, owner),
            Op::SweepOrphans { after } => self.sweep_orphans(after),
            Op::SweepDir { dir, after } => self.sweep_dir(dir, after),
            Op::Reclaim { file } => self.reclaim(file),
            Op::CopyRange {
                from,
                from_offset,
                to,
                to_offset,
                len,
            } => self.copy_range(from, from_offset, to, to_offset, len),
            Op::Punch {
                fh,
                offset,
                len,
                keep_size,
            } => self.punch(fh, offset, len, keep_size),
            Op::Seek { fh, offset, hole } => self.seek(fh, offset, hole),
            Op::ReportCapacity { replica, bytes } => self.report_capacity(replica, bytes),
            Op::ReserveInodes { count } => self.reserve_inodes(count),
            Op::MakeAt { at, make } => self.make_at(at, *make),
            Op::Batch(ops) => self.batch(ops),
            Op::DelegateDir { dir } => self.delegate_dir(dir),
            Op::ReturnDir { dir } => self.return_dir(dir),
            Op::GroupPut {
                group,
                record,
                signature,
            } => self.group_put(group, record, &signature),
            Op::GroupGet { group } => self.group_get(group),
            Op::SetGroup { dir, group } => self.set_group(dir, group),
            Op::FileGroup { fh } => self.file_group(fh),
            Op::WriterSeq => self.writer_seq(),
            // Only a request's own operation may be signed (`run_checked`).
            Op::Signed { .. } => Err(Errno::EINVAL.into()),
        }
    }

    pub(crate) fn resolve(&self, fh: FileHandle) -> Res<Inode> {
        inode::resolve(self.txn, fh)
    }

    pub(crate) fn save(&mut self, ino: u64, i: &Inode) {
        inode::save(self.txn, ino, i);
    }

    /// Sets regular file `ino`'s size (inode `i`, saved by the caller): shrinking in
    /// bounded work ([`crate::reclaim`]), growing sparse (no block stored). Returns the
    /// change in stored bytes. `EFBIG` past the largest file size; `EBUSY` if growing over
    /// a stale tail too large to delete now.
    fn resize(&mut self, ino: u64, i: &mut Inode, size: u64) -> Res<i64> {
        if size > crate::proto::attr::MAX_FILE_SIZE {
            return Err(Errno::EFBIG.into());
        }
        if size < i.size {
            self.shrink(ino, i, size)
        } else if size > i.size {
            let delta = self.before_growth(ino, i)?;
            i.size = size;
            Ok(delta)
        } else {
            Ok(0)
        }
    }

    /// `used_bytes += delta`, or `ENOSPC` if that exceeds the capacity.
    pub(crate) fn charge(&mut self, delta: i64) -> Res<()> {
        let used = self.sb.used_bytes.saturating_add_signed(delta);
        if delta > 0 && used > self.capacity()?.0 {
            return Err(Errno::ENOSPC.into());
        }
        self.sb.used_bytes = used;
        Ok(())
    }

    /// Resolves directory `dir`, checks `name` for a lookup and search permission; returns the
    /// directory and the entry (if any).
    fn dir_entry(&self, dir: FileHandle, name: &[u8]) -> Res<(Inode, Option<dir::NameRec>)> {
        let d = self.resolve(dir)?;
        need_dir(&d)?;
        dir::check_name(name)?;
        perm::check(self.cred, &d, X_OK)?;
        let e = dir::lookup(self.txn, dir.ino, name)?;
        Ok((d, e))
    }

    fn lookup(&mut self, dir: FileHandle, name: &[u8]) -> Res<Reply> {
        if dir::is_dot(name) {
            let d = self.resolve(dir)?;
            need_dir(&d)?;
            perm::check(self.cred, &d, X_OK)?;
            let ino = if name == b"." { dir.ino } else { d.parent };
            let i = inode::must_load(self.txn, ino)?;
            return Ok(Reply::Entry(i.attr(ino)));
        }
        let (_, e) = self.dir_entry(dir, name)?;
        let e = e.ok_or(Errno::ENOENT)?;
        let i = inode::must_load(self.txn, e.target.ino)?;
        Ok(Reply::Entry(i.attr(e.target.ino)))
    }

    fn setattr(&mut self, fh: FileHandle, set: crate::proto::attr::SetAttr) -> Res<Reply> {
        let mut i = self.resolve(fh)?;
        let cred = self.cred;
        if let Some(mode) = set.mode {
            if !perm::owner_or_root(cred, &i) {
                return Err(Errno::EPERM.into());
            }
            let mut m = mode & MODE_MASK;
            if cred.uid != 0 && !i.is_dir() && !perm::in_group(cred, i.gid) {
                m &= !S_ISGID;
            }
            i.mode = m;
        }
        if set.uid.is_some() || set.gid.is_some() {
            if let Some(uid) = set.uid {
                if uid != i.uid && cred.uid != 0 {
                    return Err(Errno::EPERM.into());
                }
            }
            if let Some(gid) = set.gid {
                if gid != i.gid
                    && cred.uid != 0
                    && !(cred.uid == i.uid && perm::in_group(cred, gid))
                {
                    return Err(Errno::EPERM.into());
                }
            }
            if !i.is_dir() {
                i.mode &= !S_ISUID;
                if i.mode & 0o010 != 0 {
                    i.mode &= !S_ISGID;
                }
            }
            i.uid = set.uid.unwrap_or(i.uid);
            i.gid = set.gid.unwrap_or(i.gid);
        }
        if let Some(size) = set.size {
            need_regular(&i)?;
            perm::check_io(cred, &i, W_OK)?;
            let delta = self.resize(fh.ino, &mut i, size)?;
            self.charge(delta)?;
            kill_suid(cred, &mut i);
            i.mtime = self.now;
        }
        for (which, t) in [(0, set.atime), (1, set.mtime)] {
            let Some(t) = t else { continue };
            let value = match t {
                SetTime::Now => {
                    if !perm::owner_or_root(cred, &i) {
                        perm::check(cred, &i, W_OK)?;
                    }
                    self.now
                }
                SetTime::At(ts) => {
                    if !perm::owner_or_root(cred, &i) {
                        return Err(Errno::EPERM.into());
                    }
                    if ts.nsecs >= 1_000_000_000 {
                        return Err(Errno::EINVAL.into());
                    }
                    ts
                }
            };
            if which == 0 {
                i.atime = value;
            } else {
                i.mtime = value;
            }
        }
        i.ctime = self.now;
        self.save(fh.ino, &i);
        Ok(Reply::Attr(i.attr(fh.ino)))
    }

    /// `fallocate(2)` mode 0: grows the file (sparse: no block is stored) if it is shorter
    /// than `end`; the times change only if the size does.
    fn allocate(&mut self, fh: FileHandle, end: u64) -> Res<Reply> {
        let mut i = self.resolve(fh)?;
        need_regular(&i)?;
        perm::check_io(self.cred, &i, W_OK)?;
        if end > i.size {
            // `EFBIG` past the largest file size.
            let delta = self.resize(fh.ino, &mut i, end)?;
            self.charge(delta)?;
            kill_suid(self.cred, &mut i);
            i.mtime = self.now;
            i.ctime = self.now;
            self.save(fh.ino, &i);
        }
        Ok(Reply::Attr(i.attr(fh.ino)))
    }

    pub(crate) fn write(&mut self, fh: FileHandle, offset: u64, bytes: &[u8]) -> Res<Reply> {
        let mut i = self.resolve(fh)?;
        need_regular(&i)?;
        perm::check_io(self.cred, &i, W_OK)?;
        if bytes.len() > MAX_IO as usize {
            return Err(Errno::EINVAL.into());
        }
        let mut delta = 0;
        if offset.saturating_add(bytes.len() as u64) > i.size && !bytes.is_empty() {
            delta += self.before_growth(fh.ino, &mut i)?;
        }
        let id = self.data_rec(fh.ino)?.id;
        delta += data::write(self.txn, id, &mut i, offset, bytes)?;
        self.charge(delta)?;
        if !bytes.is_empty() {
            kill_suid(self.cred, &mut i);
            i.mtime = self.now;
            i.ctime = self.now;
            self.save(fh.ino, &i);
        }
        Ok(Reply::Write {
            // `bytes.len() <= MAX_IO`, a `u32`.
            count: bytes.len() as u32,
            attr: i.attr(fh.ino),
        })
    }

    /// The writes of `extents` in order, as one operation (the caller's transaction is
    /// dropped if one fails, so none of them is applied then).
    fn write_gather(&mut self, fh: FileHandle, extents: &[Extent]) -> Res<Reply> {
        let total: usize = extents.iter().map(|e| e.data.len()).sum();
        if extents.is_empty() || total > MAX_IO as usize {
            return Err(Errno::EINVAL.into());
        }
        let mut last = None;
        for e in extents {
            last = Some(self.write(fh, e.offset, &e.data)?);
        }
        match last {
            Some(Reply::Write { attr, .. }) => Ok(Reply::Write {
                // `total <= MAX_IO`, a `u32`.
                count: total as u32,
                attr,
            }),
            // `extents` is not empty and `write` answers `Reply::Write`.
            _ => Err(Errno::EIO.into()),
        }
    }

    /// [`Op::WriteSetAttr`]: the writes, then the changes; the caller's transaction makes
    /// it all or none.
    fn write_setattr(
        &mut self,
        fh: FileHandle,
        extents: &[Extent],
        sets: Vec<crate::proto::attr::SetAttr>,
    ) -> Res<Reply> {
        if sets.is_empty() || sets.len() > MAX_SETATTRS {
            return Err(Errno::EINVAL.into());
        }
        self.write_gather(fh, extents)?;
        let mut last = None;
        for set in sets {
            last = Some(self.setattr(fh, set)?);
        }
        // `sets` is not empty and `setattr` answers `Reply::Attr`.
        last.ok_or_else(|| Errno::EIO.into())
    }

    fn create(&mut self, dir: FileHandle, name: &[u8], mode: u32, exclusive: bool) -> Res<Reply> {
        if !exclusive && !dir::is_dot(name) {
            if let (d, Some(e)) = self.dir_entry(dir, name)? {
                let i = inode::must_load(self.txn, e.target.ino)?;
                if i.is_dir() {
                    return Err(Errno::EISDIR.into());
                }
                return Ok(Reply::Made {
                    entry: i.attr(e.target.ino),
                    dir: d.attr(dir.ino),
                });
            }
        }
        self.make(dir, name, FileType::Regular, mode, Vec::new(), 0)
    }

    /// Creates `dir/name` of `kind`; `target` is a symlink's target. Replies with the new
    /// entry's and the directory's attributes.
    fn make(
        &mut self,
        dir: FileHandle,
        name: &[u8],
        kind: FileType,
        mode: u32,
        target: Vec<u8>,
        rdev: u64,
    ) -> Res<Reply> {
        if dir::is_dot(name) {
            let d = self.resolve(dir)?;
            need_dir(&d)?;
            return Err(Errno::EEXIST.into());
        }
        let (mut d, e) = self.dir_entry(dir, name)?;
        if e.is_some() {
            return Err(Errno::EEXIST.into());
        }
        perm::check(self.cred, &d, W_OK)?;
        let is_dir = kind == FileType::Directory;
        if is_dir {
            if d.nlink >= MAX_LINKS {
                return Err(Errno::EMLINK.into());
            }
            if dir::depth(self.txn, dir.ino)? + 1 > MAX_DEPTH {
                return Err(Errno::ENAMETOOLONG.into());
            }
        }
        if self.sb.inodes >= self.capacity()?.1 {
            return Err(Errno::ENOSPC.into());
        }
        self.charge(target.len() as i64)?;
        let (ino, generation) = match self.at.take() {
            Some(at) => (at.ino, at.generation),
            None => {
                let next = (self.sb.next_ino, self.sb.next_generation);
                self.sb.next_ino += 1;
                self.sb.next_generation += 1;
                next
            }
        };
        self.sb.inodes += 1;
        let mut mode = mode & MODE_MASK;
        let gid = if d.mode & S_ISGID != 0 {
            if is_dir {
                mode |= S_ISGID;
            }
            d.gid
        } else {
            self.cred.gid
        };
        let mut i = Inode::new(kind, generation, mode, self.cred.uid, gid, self.now);
        i.rdev = rdev;
        if is_dir {
            i.parent = dir.ino;
            d.nlink += 1;
        }
        if kind == FileType::Symlink {
            i.size = target.len() as u64;
            i.used = target.len() as u64;
            i.target = target;
        }
        dir::add(
            self.txn,
            dir.ino,
            &mut d,
            name,
            Target {
                ino,
                generation,
                kind,
            },
        );
        d.mtime = self.now;
        d.ctime = self.now;
        self.save(dir.ino, &d);
        self.save(ino, &i);
        self.inherit_group(dir.ino, ino)?;
        Ok(Reply::Made {
            entry: i.attr(ino),
            dir: d.attr(dir.ino),
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
    fn free(&mut self, ino: u64, i: Inode) -> Res<()> {
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
        self.txn.delete(crate::key::inode(ino));
        self.txn.delete(crate::key::crypt_file(ino));
        Ok(())
    }

    fn remove(&mut self, dir: FileHandle, name: &[u8]) -> Res<Reply> {
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

    fn rmdir(&mut self, dir: FileHandle, name: &[u8]) -> Res<Reply> {
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

    fn rename(
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
    fn exchange(
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

    fn link(&mut self, fh: FileHandle, dir: FileHandle, name: &[u8]) -> Res<Reply> {
        let i = self.resolve(fh)?;
        if i.is_dir() {
            return Err(Errno::EPERM.into());
        }
        if dir::is_dot(name) {
            need_dir(&self.resolve(dir)?)?;
            return Err(Errno::EEXIST.into());
        }
        let (mut d, e) = self.dir_entry(dir, name)?;
        if e.is_some() {
            return Err(Errno::EEXIST.into());
        }
        perm::check(self.cred, &d, W_OK)?;
        if i.nlink >= MAX_LINKS {
            return Err(Errno::EMLINK.into());
        }
        dir::add(
            self.txn,
            dir.ino,
            &mut d,
            name,
            Target {
                ino: fh.ino,
                generation: i.generation,
                kind: i.kind,
            },
        );
        d.mtime = self.now;
        d.ctime = self.now;
        self.save(dir.ino, &d);
        // Reload: `dir` cannot be `fh` (a directory), but stay safe against aliasing.
        let mut i = inode::must_load(self.txn, fh.ino)?;
        i.nlink += 1;
        i.ctime = self.now;
        self.save(fh.ino, &i);
        Ok(Reply::Made {
            entry: i.attr(fh.ino),
            dir: d.attr(dir.ino),
        })
    }

    fn readdir(&mut self, dir: FileHandle, cookie: u64, max_entries: u32) -> Res<Reply> {
        let d = self.resolve(dir)?;
        need_dir(&d)?;
        perm::check(self.cred, &d, R_OK)?;
        let max = max_entries.min(MAX_READDIR_ENTRIES) as usize;
        if max == 0 {
            return Err(Errno::EINVAL.into());
        }
        let mut entries = Vec::new();
        for (c, name, ino) in [
            (dir::DOT_COOKIE, &b"."[..], dir.ino),
            (dir::DOTDOT_COOKIE, &b".."[..], d.parent),
        ] {
            if cookie < c && entries.len() < max {
                let i = inode::must_load(self.txn, ino)?;
                entries.push(DirEntry {
                    cookie: c,
                    name: name.to_vec(),
                    fh: FileHandle {
                        ino,
                        generation: i.generation,
                    },
                    kind: FileType::Directory,
                });
            }
        }
        let room = max - entries.len();
        let (rows, eof) = dir::list(self.txn, dir.ino, cookie, room)?;
        for (c, e) in rows {
            entries.push(DirEntry {
                cookie: c,
                name: e.name,
                fh: FileHandle {
                    ino: e.target.ino,
                    generation: e.target.generation,
                },
                kind: e.target.kind,
            });
        }
        // With no room left for real entries, `list` returned none and only says whether any
        // exist; report that.
        Ok(Reply::ReadDir { entries, eof })
    }

    fn statfs(&self) -> Res<StatFs> {
        const UNIT: u64 = 4096;
        let (bytes, inodes) = self.capacity()?;
        Ok(StatFs {
            block_size: UNIT as u32,
            blocks: bytes / UNIT,
            blocks_free: bytes.saturating_sub(self.sb.used_bytes) / UNIT,
            files: inodes,
            files_free: inodes.saturating_sub(self.sb.inodes),
            name_max: MAX_NAME as u32,
        })
    }
}
