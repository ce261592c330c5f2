//! The `fuser::Filesystem` implementation: one method per kernel request, each turned into
//! file-service operations on the cluster.

use super::{
    delegations, errno, file_attr, held_listing, invoke, kind, locks, negative_entry,
    own_credentials, ranges, send_held, timestamp, to_orphans, xattr_reply, AccessFlags, Arc,
    ByzFuse, Duration, Errno, Filesystem, Generation, INodeNo, Op, OpenFlags, OsStr, Path,
    RenameFlags, Reply, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry,
    ReplyStatfs, ReplyWrite, SetAttr, SetTime, SpecialKind, Stamp, SystemTime, TimeOrNow,
    WriteFlags, XattrSet, FALLOC_FL_KEEP_SIZE, MAX_IO, O_EXCL, READDIR_BATCH, S_IFBLK, S_IFCHR,
    S_IFIFO, S_IFMT, S_IFREG, S_IFSOCK, TMPFILE_TRIES, XATTR_CREATE, XATTR_REPLACE,
};
use crate::calls::{send_everything, send_writes};
use crate::early::Make;
use crate::sender;
use crate::writeback::{self, Wait};
use std::os::unix::ffi::OsStrExt as _;

impl Filesystem for ByzFuse {
    /// Asks the kernel to leave clearing set-user-ID/set-group-ID on write, truncate and
    /// chown to the file system (the replicas do it, deterministically). Without it the
    /// kernel sends a `chmod` as the writer before a non-owner's write to a set-user-ID
    /// file, which the replicas refuse (only the owner may chmod), so the write failed
    /// with EPERM (found by a by-hand POSIX check).
    fn init(
        &mut self,
        _req: &fuser::Request,
        config: &mut fuser::KernelConfig,
    ) -> std::io::Result<()> {
        if let Err(missing) = config.add_capabilities(fuser::InitFlags::FUSE_HANDLE_KILLPRIV) {
            tracing::warn!(?missing, "the kernel cannot leave suid/sgid clearing to us");
        }
        // Locks go to the replicas, shared by every mount (`locks.rs`).
        let lock_flags = fuser::InitFlags::FUSE_POSIX_LOCKS | fuser::InitFlags::FUSE_FLOCK_LOCKS;
        if let Err(missing) = config.add_capabilities(lock_flags) {
            tracing::warn!(
                ?missing,
                "locks stay local to this mount: the kernel cannot pass them"
            );
        }
        Ok(())
    }

    /// The kernel dropped `nlookup` references to `ino`; at zero the adapter forgets it.
    fn forget(&self, _req: &fuser::Request, ino: INodeNo, nlookup: u64) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        if ino.0 == byzfs_fs::proto::handle::ROOT_INO {
            return;
        }
        if let Some(k) = inner.files.known.get_mut(&ino.0) {
            k.lookups = k.lookups.saturating_sub(nlookup);
            if k.lookups == 0 {
                inner.files.known.remove(&ino.0);
                inner.link.stamps.forget(ino.0);
                inner.link.attrs.forget(ino.0);
            }
        }
    }

    fn lookup(&self, req: &fuser::Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let dir = fh!(self, parent, reply);
        let name = name.as_bytes().to_vec();
        // A name missing from a directory this mount holds is missing (`dirs.rs`).
        let missing = self
            .inner
            .lock()
            .is_ok_and(|i| i.link.dirs.surely_missing(dir, &name));
        if missing {
            return reply.entry(&self.ttl, &negative_entry(), Generation(0));
        }
        if let Some(a) = self.lookup_early(dir, &name) {
            return reply.entry(&self.ttl, &self.attr_of(&a), Generation(a.fh.generation));
        }
        match self.call(req, Op::Lookup { dir, name }) {
            Ok(Reply::Entry(a)) => {
                reply.entry(&self.ttl, &file_attr(&a), Generation(a.fh.generation))
            }
            Ok(_) => reply.error(fuser::Errno::EIO),
            // Inode 0 with a timeout: the kernel caches the miss for the cache timeout (a compiler's
            // include path search repeats the same misses thousands of times).
            Err(Errno::ENOENT) => reply.entry(&self.ttl, &negative_entry(), Generation(0)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn getattr(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        _fh: Option<fuser::FileHandle>,
        reply: ReplyAttr,
    ) {
        let fh = fh!(self, ino, reply);
        // A directory this mount holds has the attributes it made, and a file it made there
        // or holds the ones it last saw (`dirs.rs`, `held_files.rs`: no other mount can
        // change it; as `lookup_early`).
        let cached = self.inner.lock().ok().and_then(|mut i| {
            if let Some(a) = i.link.dirs.attr(ino.0) {
                return Some((a.clone(), self.ttl));
            }
            // Writes held or in flight: the size and times are the cluster's to say, once
            // they ran (`gather.rs`, `inflight.rs`). A file this mount made here or holds:
            // no other mount changes it, so held writes at their own time say them now
            // (`gather.rs` `expected`), and otherwise its writes' replies do: they go, and
            // no `getattr`.
            let now = std::time::Instant::now();
            if i.link.gather.holds(ino.0) || i.link.inflight.holds(ino.0) {
                let own = i.link.files.use_held(ino.0, now) || i.link.dirs.use_mine(ino.0);
                if !own || i.link.gather.error(ino.0).is_some() {
                    return None;
                }
                if !i.link.inflight.holds(ino.0) {
                    if let Some(a) = i.link.gather.expected(ino.0).filter(|a| a.fh == fh) {
                        return Some((a.clone(), self.ttl));
                    }
                }
                if i.link.inflight.holds(ino.0) {
                    sender::land_all_for(&mut i.link, "getattr");
                }
                if let Some(p) = i.link.gather.take_file(ino.0) {
                    send_held(&mut i.link, p);
                }
                if i.link.gather.error(ino.0).is_some() {
                    return None;
                }
                return i
                    .link
                    .attrs
                    .last(ino.0)
                    .filter(|a| a.fh == fh)
                    .map(|a| (a.clone(), self.ttl));
            }
            if let Some((a, left)) = i.link.attrs.fresh(ino.0, self.ttl) {
                return Some((a.clone(), left));
            }
            // A file this mount made or holds (`held_files.rs`): what it last saw is current.
            if !i.link.dirs.use_mine(ino.0) && !i.link.files.use_held(ino.0, now) {
                return None;
            }
            i.link
                .attrs
                .last(ino.0)
                .filter(|a| a.fh == fh)
                .map(|a| (a.clone(), self.ttl))
        });
        if let Some((a, left)) = cached {
            return reply.attr(&left, &self.attr_of(&a));
        }
        match self.call(req, Op::GetAttr { fh }) {
            Ok(Reply::Attr(a)) => {
                if let Ok(mut inner) = self.inner.lock() {
                    if let Some((_, last)) = inner.files.open_dirs.get_mut(&ino.0) {
                        *last = a.clone();
                    }
                }
                reply.attr(&self.ttl, &self.attr_of(&a))
            }
            Ok(_) => reply.error(fuser::Errno::EIO),
            Err(Errno::ESTALE) => match self.removed_open_dir(ino.0) {
                Some(fa) => reply.attr(&Duration::ZERO, &fa),
                None => reply.error(fuser::Errno::ESTALE),
            },
            Err(e) => reply.error(errno(e)),
        }
    }

    /// Counts an open directory and keeps its attributes (see [`Inner::open_dirs`]): the
    /// lookup that found it usually left them in the cache, else they are fetched.
    fn opendir(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        _flags: OpenFlags,
        reply: fuser::ReplyOpen,
    ) {
        let fh = fh!(self, ino, reply);
        let known = self.inner.lock().ok().and_then(|i| {
            i.link
                .dirs
                .attr(ino.0)
                .or_else(|| i.link.attrs.last(ino.0))
                .filter(|a| a.fh == fh)
                .cloned()
        });
        let attr = match known {
            Some(a) => a,
            None => match self.call(req, Op::GetAttr { fh }) {
                Ok(Reply::Attr(a)) => a,
                Ok(_) => return reply.error(fuser::Errno::EIO),
                Err(e) => return reply.error(errno(e)),
            },
        };
        let mut handle = 0;
        if let Ok(mut inner) = self.inner.lock() {
            let entry = inner
                .files
                .open_dirs
                .entry(ino.0)
                .or_insert((0, attr.clone()));
            entry.0 += 1;
            entry.1 = attr;
            // Held here: listed from the names this mount keeps (`listings.rs`).
            if let Some(entries) = held_listing(&mut inner, fh) {
                handle = inner.files.listings.open(entries);
            }
        }
        reply.opened(fuser::FileHandle(handle), fuser::FopenFlags::empty());
    }

    fn releasedir(
        &self,
        _req: &fuser::Request,
        ino: INodeNo,
        fh: fuser::FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.files.listings.release(fh.0);
            if let Some((n, _)) = inner.files.open_dirs.get_mut(&ino.0) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    inner.files.open_dirs.remove(&ino.0);
                }
            }
        }
        reply.ok();
    }

    fn setattr(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<fuser::FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let fh = fh!(self, ino, reply);
        let time = |t: TimeOrNow| match t {
            TimeOrNow::Now => SetTime::Now,
            TimeOrNow::SpecificTime(t) => SetTime::At(timestamp(t)),
        };
        let set = SetAttr {
            mode: mode.map(|m| m & 0o7777),
            uid,
            gid,
            size,
            atime: atime.map(time),
            mtime: mtime.map(time),
        };
        tracing::trace!(ino = ino.0, ?set, "setattr");
        if size.is_some() {
            self.contents_changed(ino.0);
        }
        if let Some(a) = self.hold_setattr(req, fh, &set) {
            // Valid for no time: the next `stat` asks again and sends it first.
            return reply.attr(&Duration::ZERO, &self.attr_of(&a));
        }
        match self.call(req, Op::SetAttr { fh, set }) {
            Ok(Reply::Attr(a)) => reply.attr(&self.ttl, &self.attr_of(&a)),
            Ok(_) => reply.error(fuser::Errno::EIO),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn readlink(&self, req: &fuser::Request, ino: INodeNo, reply: ReplyData) {
        let fh = fh!(self, ino, reply);
        match self.call(req, Op::ReadLink { fh }) {
            Ok(Reply::ReadLink(t)) => reply.data(&t),
            Ok(_) => reply.error(fuser::Errno::EIO),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn mknod(
        &self,
        req: &fuser::Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let dir = fh!(self, parent, reply);
        let name = name.as_bytes().to_vec();
        let perm = mode & !umask & 0o7777;
        let op = match mode & S_IFMT {
            S_IFREG => Op::Create {
                dir,
                name,
                mode: perm,
                exclusive: true,
            },
            S_IFIFO => Op::Mknod {
                dir,
                name,
                kind: SpecialKind::Fifo,
                mode: perm,
            },
            S_IFSOCK => Op::Mknod {
                dir,
                name,
                kind: SpecialKind::Socket,
                mode: perm,
            },
            S_IFCHR => Op::Mknod {
                dir,
                name,
                kind: SpecialKind::CharDevice(u64::from(rdev)),
                mode: perm,
            },
            S_IFBLK => Op::Mknod {
                dir,
                name,
                kind: SpecialKind::BlockDevice(u64::from(rdev)),
                mode: perm,
            },
            _ => return reply.error(fuser::Errno::EINVAL),
        };
        self.entry(req, op, reply);
    }

    fn mkdir(
        &self,
        req: &fuser::Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let dir = fh!(self, parent, reply);
        let mode = mode & !umask & 0o7777;
        if let Some(a) = self.make_early(req, dir, name.as_bytes(), mode, Make::Dir) {
            return reply.entry(&self.ttl, &file_attr(&a), Generation(a.fh.generation));
        }
        let op = Op::Mkdir {
            dir,
            name: name.as_bytes().to_vec(),
            mode,
        };
        self.entry(req, op, reply);
    }

    fn unlink(&self, req: &fuser::Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let dir = fh!(self, parent, reply);
        let name = name.as_bytes().to_vec();
        let cred = self.credentials(req);
        let Ok(mut inner) = self.inner.lock() else {
            return reply.error(fuser::Errno::EIO);
        };
        if self.remove_early(&mut inner, &cred, dir, &name, false) {
            return reply.ok();
        }
        let (mut inner, hidden) = self.hide_if_open(inner, &cred, dir, &name);
        let r = match hidden {
            Some(r) => r,
            None => invoke(&mut inner.link, &cred, Op::Remove { dir, name }),
        };
        match r {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn rmdir(&self, req: &fuser::Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let dir = fh!(self, parent, reply);
        let name = name.as_bytes().to_vec();
        let cred = self.credentials(req);
        let early = match self.inner.lock() {
            Ok(mut inner) => self.remove_early(&mut inner, &cred, dir, &name, true),
            Err(_) => return reply.error(fuser::Errno::EIO),
        };
        if early {
            return reply.ok();
        }
        let op = Op::Rmdir {
            dir,
            name: name.clone(),
        };
        match self.call(req, op.clone()) {
            Ok(_) => reply.ok(),
            // Files dead mounts hid there may be all it holds: sweep them, and try again.
            Err(Errno::ENOTEMPTY) if self.sweep_hidden_in(req, dir, &name) => {
                self.done(req, op, reply)
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn symlink(
        &self,
        req: &fuser::Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let dir = fh!(self, parent, reply);
        let target = target.as_os_str().as_bytes().to_vec();
        let name = link_name.as_bytes();
        let early = Make::Symlink(target.clone());
        if let Some(a) = self.make_early(req, dir, name, 0o777, early) {
            return reply.entry(&self.ttl, &file_attr(&a), Generation(a.fh.generation));
        }
        let op = Op::Symlink {
            dir,
            name: name.to_vec(),
            target,
        };
        self.entry(req, op, reply);
    }

    fn rename(
        &self,
        req: &fuser::Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let from_dir = fh!(self, parent, reply);
        let to_dir = fh!(self, newparent, reply);
        let (from_name, to_name) = (name.as_bytes().to_vec(), newname.as_bytes().to_vec());
        let cred = self.credentials(req);
        let Ok(mut inner) = self.inner.lock() else {
            return reply.error(fuser::Errno::EIO);
        };
        // Neither flag removes the target, so only a plain rename needs the silly rename.
        let op = if flags == RenameFlags::RENAME_EXCHANGE {
            Op::Exchange {
                a_dir: from_dir,
                a_name: from_name,
                b_dir: to_dir,
                b_name: to_name,
            }
        } else if flags == RenameFlags::RENAME_NOREPLACE {
            Op::RenameNoReplace {
                from_dir,
                from_name,
                to_dir,
                to_name,
            }
        } else if flags.is_empty() {
            if from_dir == to_dir
                && self.rename_early(&mut inner, &cred, from_dir, (&from_name, &to_name))
            {
                return reply.ok();
            }
            // A file open here that the rename would replace is hidden first, as on unlink.
            if (from_dir, &from_name) != (to_dir, &to_name) {
                let (g, hidden) = self.hide_if_open(inner, &cred, to_dir, &to_name);
                inner = g;
                if let Some(Err(e)) = hidden {
                    return reply.error(errno(e));
                }
            }
            Op::Rename {
                from_dir,
                from_name,
                to_dir,
                to_name,
            }
        } else {
            // RENAME_WHITEOUT (overlayfs) or a combination.
            return reply.error(fuser::Errno::EINVAL);
        };
        match invoke(&mut inner.link, &cred, op) {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn link(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let fh = fh!(self, ino, reply);
        let dir = fh!(self, newparent, reply);
        let name = newname.as_bytes().to_vec();
        if let Some(a) = self.link_early(req, fh, dir, &name) {
            return reply.entry(&self.ttl, &file_attr(&a), Generation(a.fh.generation));
        }
        self.entry(req, Op::Link { fh, dir, name }, reply);
    }

    fn read(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        _fh: fuser::FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyData,
    ) {
        let fh = fh!(self, ino, reply);
        let count = size.min(MAX_IO);
        // A small file this mount made and still alone reaches, or holds: from its kept
        // bytes (`mine.rs`), which include writes still held back. A held file's whole
        // bytes, read from its start, are kept when nothing changed meanwhile.
        let now = std::time::Instant::now();
        let (kept, seen) = match self.inner.lock() {
            Ok(mut i) if i.link.gather.error(ino.0).is_none() => {
                if let Some(data) = i.link.dirs.read_mine(ino.0, offset, count) {
                    (Some(data), None)
                } else if i.link.files.use_held(ino.0, now) {
                    match i.link.dirs.read_kept(ino.0, offset, count) {
                        Some(data) => (Some(data), None),
                        None => (None, (offset == 0).then(|| i.link.dirs.kept_changes())),
                    }
                } else {
                    (None, None)
                }
            }
            _ => (None, None),
        };
        if let Some(data) = kept {
            return reply.data(&data);
        }
        let op = Op::Read { fh, offset, count };
        match self.call(req, op) {
            Ok(Reply::Read { data, .. }) => {
                if let Some(seen) = seen.filter(|_| data.len() < count as usize) {
                    if let Ok(mut i) = self.inner.lock() {
                        if i.link.files.holds(ino.0) {
                            i.link.dirs.keep_read(ino.0, &data, seen);
                        }
                    }
                }
                reply.data(&data)
            }
            Ok(_) => reply.error(fuser::Errno::EIO),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn write(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        _fh: fuser::FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyWrite,
    ) {
        let fh = fh!(self, ino, reply);
        let cred = self.credentials(req);
        {
            let Ok(inner) = self.inner.lock() else {
                return reply.error(fuser::Errno::EIO);
            };
            // No room for one more batch in flight: the writer waits for the links as it
            // would below, but without the mount's lock (`unlocked.rs`), so the
            // others' operations go meanwhile.
            let Some(mut inner) = crate::unlocked::land(&self.inner, inner, |l| {
                !sender::may_fly(l) || !l.gather.holds_back() || sender::has_room(l)
            }) else {
                return reply.error(fuser::Errno::EIO);
            };
            if let Some(e) = inner.link.gather.error(ino.0) {
                return reply.error(errno(e));
            }
            let end = offset.checked_add(data.len() as u64);
            let fits = end.is_some_and(|e| e <= byzfs_fs::proto::attr::MAX_FILE_SIZE);
            // EFBIG is known here: such a write goes at once and fails at once. A file made
            // here is written back (its `close` sends nothing either): a write bigger than
            // one operation is held in pieces, and what the gather cannot hold goes in
            // flight, behind the queue that makes the file (across sites Andrew's copy
            // waited for all the write-back in flight at its first big file).
            let now = std::time::Instant::now();
            let own = inner.link.dirs.is_mine(ino.0) || inner.link.files.use_held(ino.0, now);
            let mine = own && sender::may_fly(&inner.link);
            let holds = inner.link.gather.may_hold(data.len()) || (mine && !data.is_empty());
            if inner.link.gather.holds_back() && fits && holds {
                let limit = inner.link.gather.limit();
                let mut carried = None;
                for (k, piece) in data.chunks(limit).enumerate() {
                    let at = offset + (k * limit) as u64;
                    if !inner.link.gather.joins(fh, &cred, piece.len()) {
                        if let Some(p) = inner.link.gather.take_file(ino.0) {
                            if mine {
                                carried = p.attr().cloned();
                                send_writes(&mut inner.link, vec![p], Wait::InFlight);
                            } else {
                                send_held(&mut inner.link, p);
                            }
                        }
                    }
                    // Full: every held write goes, together (and with the queue of early
                    // answers, which may make their files).
                    if inner.link.gather.full_without(ino.0) {
                        send_everything(&mut inner.link, Wait::InFlight);
                    }
                    // A file no other mount changes: the attributes last seen are exact.
                    let base = if own {
                        inner.link.attrs.last(ino.0).filter(|a| a.fh == fh).cloned()
                    } else {
                        inner
                            .link
                            .attrs
                            .fresh(ino.0, self.ttl)
                            .map(|(a, _)| a.clone())
                    }
                    .or(carried.take());
                    let now = timestamp(SystemTime::now());
                    inner
                        .link
                        .gather
                        .hold(fh, &cred, at, piece, base.as_ref(), now);
                    // Sent at its own time, so its `stat` is answered here
                    // (`gather.rs` `expected`); an encrypted mount's writes are sealed
                    // by the crypto layer, which takes them as they are.
                    if own && inner.link.crypt.is_none() {
                        inner.link.gather.at_its_time(ino.0);
                    }
                    inner.link.dirs.wrote(ino.0, at, piece);
                    // Its size and times change when the writes are applied.
                    inner.link.attrs.forget(ino.0);
                }
                // `data.len() <= write_chunk <= MAX_IO`, a `u32`.
                return reply.written(data.len() as u32);
            }
        }
        let mut written: u32 = 0;
        for chunk in data.chunks(self.write_chunk) {
            let op = Op::Write {
                fh,
                offset: offset + u64::from(written),
                data: chunk.to_vec(),
            };
            match self.call(req, op) {
                Ok(Reply::Write { count, .. }) => written += count,
                Ok(_) => {
                    self.contents_changed(ino.0);
                    return reply.error(fuser::Errno::EIO);
                }
                Err(e) if written == 0 => {
                    self.contents_changed(ino.0);
                    return reply.error(errno(e));
                }
                // A short write: report what was written.
                Err(_) => break,
            }
        }
        if written as usize == data.len() {
            if let Ok(mut inner) = self.inner.lock() {
                inner.link.dirs.wrote(ino.0, offset, data);
            }
        } else {
            self.contents_changed(ino.0);
        }
        reply.written(written);
    }

    /// `close`: sends the file's held-back writes and reports their error, or an earlier
    /// one of its writes (`gather.rs`); then drops the closing process's locks on the file.
    fn flush(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        fh: fuser::FileHandle,
        lock_owner: fuser::LockOwner,
        reply: ReplyEmpty,
    ) {
        let cred = self.credentials(req);
        let Ok(inner) = self.inner.lock() else {
            return reply.error(fuser::Errno::EIO);
        };
        // Its batches in flight land first, without the mount's lock while they fly
        // (`unlocked.rs`), unless its `close` sends nothing (below).
        let Some(mut inner) = crate::unlocked::land(&self.inner, inner, |l| {
            l.dirs.is_mine(ino.0) || l.files.holds(ino.0) || !l.inflight.holds(ino.0)
        }) else {
            return reply.error(fuser::Errno::EIO);
        };
        inner.files.open.flushed(fh.0, std::time::Instant::now());
        // Write-back: a file made here in a directory this mount holds is reachable by no
        // other mount until it recalls the directory, and the recall sends everything
        // held first (`recalls.rs` `give_back`): its `close` sends nothing. Its creation and
        // writes go within `gather::MAX_AGE`, at `fsync`, or at the recall, batched with
        // other files' (`writeback.rs` `writes`); the creation is made at the time the
        // kernel was given (`early.rs` `make_early`), so its attributes do not change then.
        // A file this mount holds (`held_files.rs`) likewise: another mount's `open`
        // recalls it, and the recall sends its writes first.
        if !inner.link.dirs.is_mine(ino.0) && !inner.link.files.holds(ino.0) {
            // What was answered early of this file goes first, with this caller's gathered
            // writes: the file (and its name) is then durable when `close` returns. Sent in
            // flight where the mount may leave batches so, and waited for without the
            // mount's lock (`unlocked.rs`): another process's operations go
            // while this `close` waits.
            let fly = sender::may_fly(&inner.link);
            let wait = if fly { Wait::InFlight } else { Wait::Yes };
            let link = &mut inner.link;
            let mut plan = Vec::new();
            if link.dirs.touches(ino.0) {
                plan = writeback::queue(&mut link.dirs, &mut link.gather, &link.files, wait);
            }
            if let Some(p) = link.gather.take_file(ino.0) {
                plan.extend(writeback::writes(&link.gather, vec![p], wait));
            }
            let sent = crate::unlocked::send(&self.inner, inner, plan)
                .and_then(|i| crate::unlocked::land(&self.inner, i, |l| !l.inflight.holds(ino.0)));
            inner = match sent {
                Some(i) => i,
                None => return reply.error(fuser::Errno::EIO),
            };
            // Left in flight: its answer comes before `close` does (a soft mount's
            // timeout above leaves it to this wait, which fails it at its own).
            if inner.link.inflight.holds(ino.0) {
                sender::land_all_for(&mut inner.link, "close");
            }
        }
        let early = inner.link.dirs.take_error();
        let error = inner.link.gather.take_error(ino.0).or(early);
        drop(inner);
        // POSIX: a process's close of a file drops its locks on it, after its writes.
        locks::release(&self.inner, &cred, ino.0, lock_owner.0);
        self.drop_early_attrs();
        match error {
            Some(e) => reply.error(errno(e)),
            None => reply.ok(),
        }
    }

    /// Extended attributes (`user.` and `trusted.`, see `byzfs_fs::xattr`). A name the
    /// replicas would refuse for itself (`byzfs_fs::xattr::namespace`: `system.` ACLs,
    /// `security.`, bad names) is answered here, without a round trip, with the replicas'
    /// answer: `cp -a` sets an ACL on every file it copies. Reading a `security.` name gets
    /// `ENODATA` (the kernel asks for `security.capability` before writes).
    fn getxattr(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        name: &OsStr,
        size: u32,
        reply: fuser::ReplyXattr,
    ) {
        let name = name.as_bytes().to_vec();
        if name.starts_with(b"security.") {
            return reply.error(fuser::Errno::ENODATA);
        }
        if let Err(e) = byzfs_fs::xattr::namespace(&name) {
            return reply.error(errno(e));
        }
        let fh = fh!(self, ino, reply);
        xattr_reply(self.call(req, Op::GetXattr { fh, name }), size, reply);
    }

    fn listxattr(&self, req: &fuser::Request, ino: INodeNo, size: u32, reply: fuser::ReplyXattr) {
        let fh = fh!(self, ino, reply);
        xattr_reply(self.call(req, Op::ListXattr { fh }), size, reply);
    }

    fn setxattr(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
        reply: ReplyEmpty,
    ) {
        let how = match flags {
            0 => XattrSet::Any,
            XATTR_CREATE => XattrSet::Create,
            XATTR_REPLACE => XattrSet::Replace,
            _ => return reply.error(fuser::Errno::EINVAL),
        };
        if position != 0 {
            return reply.error(fuser::Errno::EINVAL);
        }
        if let Err(e) = byzfs_fs::xattr::namespace(name.as_bytes()) {
            return reply.error(errno(e));
        }
        let fh = fh!(self, ino, reply);
        let op = Op::SetXattr {
            fh,
            name: name.as_bytes().to_vec(),
            value: value.to_vec(),
            how,
        };
        self.done(req, op, reply);
    }

    fn removexattr(&self, req: &fuser::Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if let Err(e) = byzfs_fs::xattr::namespace(name.as_bytes()) {
            return reply.error(errno(e));
        }
        let fh = fh!(self, ino, reply);
        let name = name.as_bytes().to_vec();
        self.done(req, Op::RemoveXattr { fh, name }, reply);
    }

    /// `fallocate(2)`: mode 0 grows the file at the replicas ([`Op::Allocate`]; space is not
    /// reserved); `FALLOC_FL_KEEP_SIZE` alone changes nothing a reader can see, so it is
    /// answered here; hole punching and the other modes get `EOPNOTSUPP`.
    /// No ioctls here: `ENOTTY`, as a local file system answers the ones it does not know
    /// (`isatty` on an output file, `cp`'s clone attempt). fuser's default answer logged a
    /// warning for each, 1.4 % of the mount's CPU in Andrew (docs/bench/HISTORY.md
    /// "two levers dropped, the mount's CPU, and the bounds").
    fn ioctl(
        &self,
        _req: &fuser::Request,
        _ino: INodeNo,
        _fh: fuser::FileHandle,
        _flags: fuser::IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: fuser::ReplyIoctl,
    ) {
        reply.error(fuser::Errno::ENOTTY);
    }

    fn fallocate(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        _fh: fuser::FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let fh = fh!(self, ino, reply);
        self.contents_changed(ino.0);
        match mode {
            0 => {
                let Some(end) = offset.checked_add(length) else {
                    return reply.error(fuser::Errno::EFBIG);
                };
                match self.call(req, Op::Allocate { fh, end }) {
                    Ok(Reply::Attr(_)) => reply.ok(),
                    Ok(_) => reply.error(fuser::Errno::EIO),
                    Err(e) => reply.error(errno(e)),
                }
            }
            FALLOC_FL_KEEP_SIZE => reply.ok(),
            m if m == ranges::PUNCH_HOLE | ranges::KEEP_SIZE
                || m == ranges::ZERO_RANGE
                || m == ranges::ZERO_RANGE | ranges::KEEP_SIZE =>
            {
                let keep = m & ranges::KEEP_SIZE != 0;
                match ranges::punch(self, req, fh, offset, length, keep) {
                    Ok(()) => reply.ok(),
                    Err(e) => reply.error(errno(e)),
                }
            }
            _ => reply.error(fuser::Errno::EOPNOTSUPP),
        }
    }

    /// `SEEK_DATA` and `SEEK_HOLE` (the kernel answers the other kinds itself).
    fn lseek(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        _fh: fuser::FileHandle,
        offset: i64,
        whence: i32,
        reply: fuser::ReplyLseek,
    ) {
        let fh = fh!(self, ino, reply);
        match ranges::seek(self, req, fh, offset, whence) {
            Ok(at) => reply.offset(at),
            Err(e) => reply.error(errno(e)),
        }
    }

    /// A copy at the replicas: the bytes do not travel.
    fn copy_file_range(
        &self,
        req: &fuser::Request,
        ino_in: INodeNo,
        _fh_in: fuser::FileHandle,
        offset_in: u64,
        ino_out: INodeNo,
        _fh_out: fuser::FileHandle,
        offset_out: u64,
        len: u64,
        flags: fuser::CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        if !flags.is_empty() {
            return reply.error(fuser::Errno::EINVAL);
        }
        let from = fh!(self, ino_in, reply);
        let to = fh!(self, ino_out, reply);
        self.contents_changed(ino_out.0);
        match ranges::copy(self, req, (from, offset_in), (to, offset_out), len) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(errno(e)),
        }
    }

    /// Every operation is durable at the replicas when it returns, so a directory's `fsync`
    /// is a file's: held-back writes are sent first.
    fn fsyncdir(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        fh: fuser::FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.fsync(req, ino, fh, datasync, reply);
    }

    fn fsync(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        _fh: fuser::FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let fh = fh!(self, ino, reply);
        // The Fsync operation sends the held-back writes first (`invoke`), and every
        // write-back batch in flight is waited for: durable when `fsync` returns.
        let synced = self.call(req, Op::Fsync { fh });
        // Those sent before it, without the mount's lock while they fly (`unlocked.rs`); a soft mount's timeout there leaves them to the locked wait.
        if let Ok(inner) = self.inner.lock() {
            let upto = inner.link.inflight.sent_so_far();
            if let Some(mut inner) =
                crate::unlocked::land(&self.inner, inner, |l| l.inflight.landed() >= upto)
            {
                if inner.link.inflight.landed() < upto {
                    sender::land_all_for(&mut inner.link, "fsync");
                }
            }
        }
        let held = self.inner.lock().ok().and_then(|mut i| {
            let early = i.link.dirs.take_error();
            i.link.gather.take_error(ino.0).or(early)
        });
        self.drop_early_attrs();
        match (held, synced) {
            (Some(e), _) | (None, Err(e)) => reply.error(errno(e)),
            (None, Ok(_)) => reply.ok(),
        }
    }

    fn readdir(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        handle: fuser::FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let dir = fh!(self, ino, reply);
        if self
            .readdir_listed(dir, handle.0, offset, &mut reply)
            .is_some()
        {
            return reply.ok();
        }
        // Files this mount keeps under hidden names (removed while open, `O_TMPFILE`) in
        // their own directory, where the orphan directory was not to be had, are in no
        // directory as its users see it. The orphan directory itself lists them.
        let hidden: Vec<(u64, Vec<u8>)> = match self.inner.lock() {
            Ok(inner) => inner
                .files
                .silly
                .iter()
                .filter(|(_, (d, _))| *d == dir && inner.files.orphans != Some(Some(dir)))
                .map(|(ino, (_, name))| (*ino, name.clone()))
                .collect(),
            Err(_) => return reply.error(fuser::Errno::EIO),
        };
        // FUSE's offset is the cookie of the last entry the kernel consumed (0 at first).
        let mut cookie = offset;
        loop {
            let op = Op::ReadDir {
                dir,
                cookie,
                max_entries: READDIR_BATCH,
            };
            match self.call(req, op) {
                Ok(Reply::ReadDir { entries, eof }) => {
                    // A held directory's `..`, for listing it here next time.
                    if let Some(e) = entries.iter().find(|e| e.name == b"..") {
                        if let Ok(mut inner) = self.inner.lock() {
                            inner.link.dirs.listed_parent(dir, e.fh);
                        }
                    }
                    for e in entries {
                        if hidden.iter().any(|(i, n)| *i == e.fh.ino && *n == e.name) {
                            cookie = e.cookie;
                            continue;
                        }
                        let name = OsStr::from_bytes(&e.name);
                        if reply.add(INodeNo(e.fh.ino), e.cookie, kind(e.kind), name) {
                            // The kernel's buffer is full; it asks again from here.
                            return reply.ok();
                        }
                        cookie = e.cookie;
                    }
                    if eof {
                        return reply.ok();
                    }
                }
                Ok(_) => return reply.error(fuser::Errno::EIO),
                // Open here, removed elsewhere: Linux lists a removed directory as ENOENT.
                Err(Errno::ESTALE) if self.removed_open_dir(ino.0).is_some() => {
                    return reply.error(fuser::Errno::ENOENT)
                }
                Err(e) => return reply.error(errno(e)),
            }
        }
    }

    fn statfs(&self, req: &fuser::Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.call(req, Op::StatFs) {
            Ok(Reply::StatFs(s)) => reply.statfs(
                s.blocks,
                s.blocks_free,
                s.blocks_free,
                s.files,
                s.files_free,
                s.block_size,
                s.name_max,
                s.block_size,
            ),
            Ok(_) => reply.error(fuser::Errno::EIO),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn access(&self, req: &fuser::Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        let fh = fh!(self, ino, reply);
        let mask = u32::try_from(mask.bits()).unwrap_or(0) & 7;
        self.done(req, Op::Access { fh, mask }, reply);
    }

    fn create(
        &self,
        req: &fuser::Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let dir = fh!(self, parent, reply);
        let mode = mode & !umask & 0o7777;
        if let Some(a) = self.make_early(req, dir, name.as_bytes(), mode, Make::File) {
            let handle = self.opened(a.fh.ino);
            return self.created(&a, handle, reply);
        }
        let op = Op::Create {
            dir,
            name: name.as_bytes().to_vec(),
            mode,
            exclusive: flags & O_EXCL != 0,
        };
        match self.call(req, op) {
            Ok(Reply::Made { entry: a, .. }) => {
                let handle = self.opened(a.fh.ino);
                self.created(&a, handle, reply)
            }
            Ok(_) => reply.error(fuser::Errno::EIO),
            Err(e) => reply.error(errno(e)),
        }
    }

    /// `open(dir, O_TMPFILE)`: a file under a hidden name, handled from the start as a file
    /// removed while open (see the module docs).
    fn tmpfile(
        &self,
        req: &fuser::Request,
        parent: INodeNo,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let dir = fh!(self, parent, reply);
        // The lease first: from its creation the file has a hidden name, which another
        // mount's sweep (`Op::SweepDir`) may take if this mount holds no current lease.
        let cred = self.credentials(req);
        match self.inner.lock() {
            Ok(mut inner) => locks::hold_for_orphans(&mut inner, &cred),
            Err(_) => return reply.error(fuser::Errno::EIO),
        }
        // A name another mount's tmpfile could take too is skipped: the create is exclusive.
        for _ in 0..TMPFILE_TRIES {
            let n = match self.inner.lock() {
                Ok(mut inner) => {
                    inner.files.tmp_next += 1;
                    inner.files.tmp_next
                }
                Err(_) => return reply.error(fuser::Errno::EIO),
            };
            let name = byzfs_fs::orphan::hidden_name(self.client_id, &format!("tmp-{n:x}"));
            let op = Op::Create {
                dir,
                name: name.clone(),
                mode: mode & !umask & 0o7777,
                exclusive: true,
            };
            match self.call(req, op) {
                Ok(Reply::Made { entry: a, .. }) => {
                    let mut handle = 0;
                    if let Ok(mut inner) = self.inner.lock() {
                        handle = inner.files.open.open(a.fh.ino);
                        // Created where the caller asked (permissions, group), then moved
                        // out of the way; if it cannot move, its directory keeps it.
                        let at = to_orphans(&mut inner, &cred, (dir, &name), &name)
                            .unwrap_or((dir, name));
                        inner.files.silly.insert(a.fh.ino, at);
                    }
                    // One link: the kernel drops it itself (`d_tmpfile`).
                    return self.created(&a, handle, reply);
                }
                Err(Errno::EEXIST) => continue,
                Ok(_) => return reply.error(fuser::Errno::EIO),
                Err(e) => return reply.error(errno(e)),
            }
        }
        reply.error(fuser::Errno::EEXIST)
    }

    /// Close-to-open consistency: fetches the file's attributes from the cluster, and if
    /// they differ from the last ones this mount saw (another client wrote since), tells
    /// the kernel to drop its cached attributes, so the size is fetched again. The kernel
    /// keeps the file's cached pages (`FOPEN_KEEP_CACHE`) only if the attributes equal the
    /// ones of the last open that dropped them; otherwise it drops them. A file removed by
    /// another client answers `ESTALE`, on which the kernel looks the path up again.
    fn open(&self, req: &fuser::Request, ino: INodeNo, flags: OpenFlags, reply: fuser::ReplyOpen) {
        tracing::trace!(ino = ino.0, flags = flags.0, "open");
        let fh = fh!(self, ino, reply);
        // `O_ACCMODE`: not `O_RDONLY`.
        let writing = flags.0 & 0o3 != 0;
        let now = std::time::Instant::now();
        let (before, mine, want) = match self.inner.lock() {
            Ok(mut i) => {
                let before = i.link.stamps.last(ino.0);
                let mine = i.link.dirs.use_mine(ino.0) || i.link.files.use_held(ino.0, now);
                if mine && i.link.files.holds(ino.0) {
                    i.link.files.opens_answered += 1;
                }
                let want = !mine && writing && i.link.files.wanted(ino.0, now);
                (before, mine, want)
            }
            Err(_) => return reply.error(fuser::Errno::EIO),
        };
        // Made here, in a directory this mount still holds, or held (`held_files.rs`): no
        // other mount can have changed it (`dirs.rs`), and the kernel's pages hold this
        // mount's own writes. Opened for writing: its delegation asked for, whose reply
        // carries the attributes the `open` looks at.
        let fetched = if mine {
            None
        } else if want {
            Some(self.delegate_file(req, fh))
        } else {
            Some(self.call(req, Op::GetAttr { fh }))
        };
        let keep = match fetched.unwrap_or(Ok(Reply::Done)) {
            Ok(Reply::Done) => true,
            Ok(Reply::Attr(a)) => {
                let now = Stamp::of(&a);
                if before != Some(now) {
                    if let Some(n) = self.notifier.get() {
                        // Offset -1: attributes only. Dropping pages here could wait on a
                        // page lock held by a read that waits for this very thread.
                        if let Err(e) = n.inval_inode(ino, -1, 0) {
                            tracing::debug!(ino = ino.0, %e, "inval_inode");
                        }
                    }
                }
                let Ok(mut inner) = self.inner.lock() else {
                    return reply.error(fuser::Errno::EIO);
                };
                // Unchanged since an open that dropped the pages: whatever the kernel cached
                // since came from this version (or from this mount's own writes through
                // the page cache), so it may stay. Otherwise it drops them (no flag).
                inner.link.stamps.keeps_pages(ino.0, now)
            }
            Ok(_) => return reply.error(fuser::Errno::EIO),
            Err(e) => return reply.error(errno(e)),
        };
        let handle = self.opened(ino.0);
        let flags = if keep {
            fuser::FopenFlags::FOPEN_KEEP_CACHE
        } else {
            fuser::FopenFlags::empty()
        };
        reply.opened(fuser::FileHandle(handle), flags);
    }

    /// At the last release of a file removed while open, removes it for good; drops an
    /// `flock` taken through this open file.
    fn release(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        fh: fuser::FileHandle,
        _flags: OpenFlags,
        lock_owner: Option<fuser::LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let cred = self.credentials(req);
        if let Ok(mut inner) = self.inner.lock() {
            // Writes through mmap can arrive after the last `close` (write-back keeps
            // them, as `flush` does).
            if !inner.link.dirs.is_mine(ino.0) && !inner.link.files.holds(ino.0) {
                if let Some(p) = inner.link.gather.take_file(ino.0) {
                    send_held(&mut inner.link, p);
                }
            }
        }
        // The kernel names an owner here when the file was `flock`ed: its last close drops
        // that lock.
        if let Some(owner) = lock_owner {
            locks::release(&self.inner, &cred, ino.0, owner.0);
        }
        if let Ok(mut inner) = self.inner.lock() {
            if inner.files.open.release(fh.0, ino.0) {
                // Nobody is left to report it to.
                if let Some(e) = inner.link.gather.take_error(ino.0) {
                    tracing::warn!(ino = ino.0, %e, "a write to a closed file failed");
                }
                if let Some((dir, name)) = inner.files.silly.remove(&ino.0) {
                    if let Err(e) = invoke(&mut inner.link, &cred, Op::Remove { dir, name }) {
                        tracing::warn!(ino = ino.0, %e, "cannot remove a silly-renamed file");
                    }
                }
            }
        }
        self.released.notify_all();
        reply.ok();
    }

    /// `F_GETLK` (`locks.rs`).
    fn getlk(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        _fh: fuser::FileHandle,
        lock_owner: fuser::LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        _pid: u32,
        reply: fuser::ReplyLock,
    ) {
        let fh = fh!(self, ino, reply);
        let kind = match locks::kind_of(typ) {
            Ok(Some(k)) => k,
            Ok(None) | Err(_) => return reply.error(fuser::Errno::EINVAL),
        };
        let cred = self.credentials(req);
        let probe = locks::probe(&self.inner, &cred, fh, lock_owner.0, kind, (start, end));
        match probe {
            locks::Probe::Answer(c) => locks::answer_getlk(c, self.client_id, (start, end), reply),
            locks::Probe::Recalling => locks::wait(locks::Waiter {
                inner: Arc::downgrade(&self.inner),
                notifier: Arc::clone(&self.notifier),
                cred,
                tid: req.pid(),
                job: locks::Job::Get {
                    fh,
                    owner: lock_owner.0,
                    kind,
                    range: (start, end),
                    me: self.client_id,
                    reply,
                },
            }),
            locks::Probe::Failed(e) => reply.error(errno(e)),
        }
    }

    /// `F_SETLK`/`F_SETLKW`, and `flock` (`locks.rs`). A blocking request that finds the
    /// range taken goes on waiting in a thread of its own.
    /// `F_SETLK`, `F_SETLKW` and `flock` (`locks.rs`); a blocking `fcntl` request waits with
    /// deadlock detection (`Op::SetLkWait`).
    fn setlk_flock(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        _fh: fuser::FileHandle,
        lock_owner: fuser::LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        sleep: bool,
        flock: bool,
        reply: ReplyEmpty,
    ) {
        let fh = fh!(self, ino, reply);
        let kind = match locks::kind_of(typ) {
            Ok(k) => k,
            Err(e) => return reply.error(e),
        };
        let cred = self.credentials(req);
        let lock = byzfs_fs::proto::lock::LockReq {
            fh,
            owner: lock_owner.0,
            kind,
            start,
            end,
            pid,
        };
        let op = if sleep && !flock && kind.is_some() {
            Op::SetLkWait(lock)
        } else {
            Op::SetLk(lock)
        };
        let outcome = locks::set(&self.inner, &cred, &op);
        match outcome {
            locks::Outcome::Granted { changed } => {
                locks::grant(&self.notifier, ino.0, changed, reply)
            }
            locks::Outcome::Busy if !sleep => reply.error(fuser::Errno::EAGAIN),
            locks::Outcome::Deadlock => reply.error(fuser::Errno::EDEADLK),
            // A blocking request waits for the range, any for a recalled delegation.
            locks::Outcome::Busy | locks::Outcome::Recalling => locks::wait(locks::Waiter {
                inner: Arc::downgrade(&self.inner),
                notifier: Arc::clone(&self.notifier),
                cred,
                tid: req.pid(),
                job: locks::Job::Set {
                    op,
                    blocking: sleep,
                    reply,
                },
            }),
            locks::Outcome::Failed(e) => reply.error(errno(e)),
        }
    }

    /// At unmount, drops the locks still held and removes files still hidden by silly
    /// renames.
    fn destroy(&mut self) {
        let cred = own_credentials();
        if let Ok(mut guard) = self.inner.lock() {
            let inner = &mut *guard;
            crate::recalls::give_back_all(&mut inner.link, &cred);
            send_everything(&mut inner.link, Wait::Yes);
            sender::land_all(&mut inner.link);
            let total: u64 = inner.link.cluster.tally().values().map(|(n, _)| n).sum();
            let waited: Duration = inner.link.cluster.tally().values().map(|(_, t)| *t).sum();
            let by_kind: Vec<String> = inner
                .link
                .cluster
                .tally()
                .iter()
                .map(|(k, (n, t))| {
                    let mean = t.as_micros() / u128::from((*n).max(1));
                    format!("{k}={n} ({:.2} s, {mean} µs each)", t.as_secs_f64())
                })
                .collect();
            tracing::info!(
                total,
                waited_s = waited.as_secs_f64(),
                "operations sent: {}",
                by_kind.join(" ")
            );
            let flown = &inner.link.inflight;
            if flown.sent > 0 {
                let waited: Vec<String> = flown
                    .waited_by
                    .iter()
                    .map(|(k, n)| format!("{k}={n}"))
                    .collect();
                tracing::info!(
                    batches = flown.sent,
                    waited_for_room = flown.waited_for_room,
                    "write-back: batches left in flight; operations that waited for them: {}",
                    waited.join(" ")
                );
                tracing::info!(
                    waits = flown.waited_unlocked,
                    others = flown.ran_meanwhile,
                    "write-back: waits without the mount's lock {}, operations run meanwhile {}",
                    flown.waited_unlocked,
                    flown.ran_meanwhile
                );
            }
            let lanes = inner.link.cluster.ordered_lanes();
            if lanes.sent > 0 {
                tracing::info!(
                    sent = lanes.sent,
                    most = lanes.most,
                    "ordered operations sent in lanes: {}, most at once {}",
                    lanes.sent,
                    lanes.most
                );
            }
            let held = &inner.link.files;
            if held.granted > 0 {
                tracing::info!(
                    granted = held.granted,
                    given_back = held.given_back,
                    opens_answered = held.opens_answered,
                    "file delegations"
                );
            }
            let reads = inner.link.dirs.reads_answered();
            if reads > 0 {
                tracing::info!(
                    reads,
                    "write-back: reads answered from the bytes kept of files made here"
                );
            }
            let (files, bytes) = inner.link.gather.dropped();
            if files > 0 {
                tracing::info!(
                    files,
                    bytes,
                    "write-back: writes of files removed before they were sent, never sent"
                );
            }
            if let Some(s) = inner.link.cluster.wire().stats() {
                tracing::info!(
                    retransmissions = s.retransmissions,
                    read_only_to_quorum = s.read_only_to_quorum,
                    read_only_hedged = s.read_only_hedged,
                    read_only_fallbacks = s.read_only_fallbacks,
                    "client counters"
                );
            }
            {
                let (link, locking, _) = inner.for_locks();
                delegations::give_back_all(link, &mut locking.delegs, &cred)
            };
            tracing::info!(
                answered_here = inner.locking.delegs.local,
                recalled = inner.locking.delegs.recalled,
                given_back = inner.locking.delegs.returned,
                "lock delegations"
            );
            let lease = &inner.link.lease;
            tracing::info!(
                calls_waited_unlocked = lease.trips_unlocked,
                lapses = lease.lapses,
                late_replies = lease.late,
                "lease-bearing calls (locks, renewals, delegations asked for)"
            );
            for (fh, owner) in inner.locking.held.take_all() {
                let _ = invoke(&mut inner.link, &cred, Op::ReleaseLocks { fh, owner });
            }
            let hidden: Vec<_> = inner.files.silly.drain().map(|(_, v)| v).collect();
            for (dir, name) in hidden {
                let _ = invoke(&mut inner.link, &cred, Op::Remove { dir, name });
            }
        }
    }
}
