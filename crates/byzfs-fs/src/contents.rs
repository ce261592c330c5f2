//! The data family ([`Family::Data`](crate::proto::family::Family::Data)): a file's contents. Reads
//! (gathered too), writes (gathered, and followed by attribute changes), `fallocate` and `fsync`
//! here, with the size changes they share; copies, holes and seeks over byte ranges in
//! [`crate::ranges`]. Blocks are stored by [`crate::data`].

use crate::data;
use crate::exec::{kill_suid, misrouted, need_regular, Exec};
use crate::fail::Res;
use crate::inode::Inode;
use crate::perm;
use crate::proto::attr::{SetAttr, Timestamp, MAX_FILE_SIZE};
use crate::proto::errno::Errno;
use crate::proto::handle::FileHandle;
use crate::proto::op::{Extent, Op, MAX_GATHER_READS, MAX_IO, MAX_SETATTRS, R_OK, W_OK};
use crate::proto::reply::Reply;
use crate::store::Store;

impl<S: Store + ?Sized> Exec<'_, '_, S> {
    /// Runs an operation of the data family.
    pub(crate) fn run_data(&mut self, op: Op) -> Res<Reply> {
        match op {
            Op::Read { fh, offset, count } => self.read(fh, offset, count),
            Op::ReadGather { fh, ranges } => self.read_gather(fh, ranges),
            Op::Write { fh, offset, data } => self.write(fh, offset, &data),
            Op::WriteGather { fh, extents } => self.write_gather(fh, &extents),
            Op::WriteSetAttr { fh, extents, sets } => self.write_setattr(fh, &extents, sets),
            Op::Allocate { fh, end } => self.allocate(fh, end),
            Op::Fsync { fh } => {
                self.resolve(fh)?;
                Ok(Reply::Done)
            }
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
            Op::WriteAt { time, write } => self.write_at(time, *write),
            other => misrouted(&other),
        }
    }

    /// [`Op::WriteAt`]: `write` run with `time` as the present, if near the agreed time.
    fn write_at(&mut self, time: Timestamp, write: Op) -> Res<Reply> {
        if !matches!(
            write,
            Op::Write { .. } | Op::WriteGather { .. } | Op::WriteSetAttr { .. }
        ) {
            return Err(Errno::EINVAL.into());
        }
        let agreed = self.now;
        if time.secs.abs_diff(agreed.secs) <= crate::reserve::MAKE_AT_SKEW_SECS {
            self.now = time;
        }
        let reply = self.run_data(write);
        self.now = agreed;
        reply
    }

    /// Reads up to `count` bytes (at most [`MAX_IO`]) of `fh` at `offset`.
    fn read(&mut self, fh: FileHandle, offset: u64, count: u32) -> Res<Reply> {
        let i = self.resolve(fh)?;
        need_regular(&i)?;
        perm::check_io(self.cred, &i, R_OK)?;
        let count = u64::from(count.min(MAX_IO));
        let id = self.data_rec(fh.ino)?.id;
        let (data, eof) = data::read(self.txn, id, &i, offset, count)?;
        Ok(Reply::Read { data, eof })
    }

    /// [`Op::ReadGather`]: the reads of `ranges`, one reply each.
    fn read_gather(&mut self, fh: FileHandle, ranges: Vec<(u64, u32)>) -> Res<Reply> {
        let i = self.resolve(fh)?;
        need_regular(&i)?;
        perm::check_io(self.cred, &i, R_OK)?;
        let total: u64 = ranges.iter().map(|&(_, c)| u64::from(c)).sum();
        if ranges.is_empty() || ranges.len() > MAX_GATHER_READS || total > u64::from(MAX_IO) {
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
        sets: Vec<SetAttr>,
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

    /// Sets regular file `ino`'s size (inode `i`, saved by the caller): shrinking in
    /// bounded work ([`crate::reclaim`]), growing sparse (no block stored). Returns the
    /// change in stored bytes. `EFBIG` past the largest file size; `EBUSY` if growing over
    /// a stale tail too large to delete now.
    pub(crate) fn resize(&mut self, ino: u64, i: &mut Inode, size: u64) -> Res<i64> {
        if size > MAX_FILE_SIZE {
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
}
