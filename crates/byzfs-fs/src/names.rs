//! The directories family ([`Family::Dirs`](crate::proto::family::Family::Dirs)): names in
//! directories. Lookups, creations (`create`, `mkdir`, `symlink`, `mknod`; at a reserved handle:
//! [`crate::reserve`]), hard links and listings here; removals in [`crate::unlink`], renames in
//! [`crate::rename`], directory delegations in [`crate::dir_delegation`], the sweeps of dead
//! clients' hidden files in [`crate::orphan`]. Entries are stored by [`crate::dir`].

use crate::dir::{self, Target, MAX_DEPTH, MAX_SYMLINK};
use crate::exec::{misrouted, need_dir, Exec};
use crate::fail::Res;
use crate::inode::{self, Inode};
use crate::perm;
use crate::proto::attr::{FileType, MAX_LINKS, MODE_MASK, S_ISGID};
use crate::proto::errno::Errno;
use crate::proto::handle::FileHandle;
use crate::proto::op::{Op, SpecialKind, MAX_READDIR_ENTRIES, R_OK, W_OK, X_OK};
use crate::proto::reply::{DirEntry, Reply};
use crate::store::Store;

impl<S: Store + ?Sized> Exec<'_, '_, S> {
    /// Runs an operation of the directories family.
    pub(crate) fn run_dirs(&mut self, op: Op) -> Res<Reply> {
        match op {
            Op::Lookup { dir, name } => self.lookup(dir, &name),
            Op::Create {
                dir,
                name,
                mode,
                exclusive,
            } => self.create(dir, &name, mode, exclusive),
            Op::Mkdir { dir, name, mode } => {
                self.make(dir, &name, FileType::Directory, mode, Vec::new(), 0)
            }
            Op::Symlink { dir, name, target } => self.symlink(dir, &name, target),
            Op::Mknod {
                dir,
                name,
                kind,
                mode,
            } => self.mknod(dir, &name, kind, mode),
            Op::Link { fh, dir, name } => self.link(fh, dir, &name),
            Op::ReadDir {
                dir,
                cookie,
                max_entries,
            } => self.readdir(dir, cookie, max_entries),
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
            Op::ReserveInodes { count } => self.reserve_inodes(count),
            Op::MakeAt { at, make, time } => self.make_at(at, *make, time),
            Op::DelegateDir { dir } => self.delegate_dir(dir),
            Op::ReturnDir { dir } => self.return_dir(dir),
            Op::SweepOrphans { after } => self.sweep_orphans(after),
            Op::SweepDir { dir, after } => self.sweep_dir(dir, after),
            other => misrouted(&other),
        }
    }

    /// Resolves directory `dir`, checks `name` for a lookup and search permission; returns the
    /// directory and the entry (if any).
    pub(crate) fn dir_entry(
        &self,
        dir: FileHandle,
        name: &[u8],
    ) -> Res<(Inode, Option<dir::NameRec>)> {
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

    /// Creates the symlink `dir/name` to `target`.
    fn symlink(&mut self, dir: FileHandle, name: &[u8], target: Vec<u8>) -> Res<Reply> {
        if target.is_empty() {
            return Err(Errno::ENOENT.into());
        }
        if target.len() > MAX_SYMLINK {
            return Err(Errno::ENAMETOOLONG.into());
        }
        if target.contains(&0) {
            return Err(Errno::EINVAL.into());
        }
        self.make(dir, name, FileType::Symlink, 0o777, target, 0)
    }

    /// Creates the fifo, socket or device node `dir/name`.
    fn mknod(&mut self, dir: FileHandle, name: &[u8], kind: SpecialKind, mode: u32) -> Res<Reply> {
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
        self.make(dir, name, kind, mode, Vec::new(), rdev)
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
        let (ino, generation, now) = match self.at.take() {
            Some((at, time)) => (at.ino, at.generation, time),
            None => {
                let next = (self.sb.next_ino, self.sb.next_generation, self.now);
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
        let mut i = Inode::new(kind, generation, mode, self.cred.uid, gid, now);
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
        d.mtime = now;
        d.ctime = now;
        self.save(dir.ino, &d);
        self.save(ino, &i);
        self.inherit_group(dir.ino, ino)?;
        Ok(Reply::Made {
            entry: i.attr(ino),
            dir: d.attr(dir.ino),
        })
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
}
