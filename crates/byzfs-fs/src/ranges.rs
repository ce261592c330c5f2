//! Operations on byte ranges of files that move no data through the client: server-side
//! copy (`copy_file_range`), hole punching and zeroing (`fallocate`), and finding data and
//! holes (`lseek` `SEEK_DATA`/`SEEK_HOLE`).
//!
//! Each works on at most [`MAX_IO`] bytes (or, for a seek, [`SEEK_GROUPS`] groups of
//! blocks), like a read or a write, so its cost is bounded (ARCHITECTURE.md "Bounded
//! work"); the mount splits a larger request into such operations, as it splits writes.

use crate::data::{self, Seek};
use crate::exec::{need_regular, Exec};
use crate::fail::Res;
use crate::perm;
use crate::proto::attr::MAX_FILE_SIZE;
use crate::proto::errno::Errno;
use crate::proto::handle::FileHandle;
use crate::proto::op::{MAX_IO, R_OK, W_OK};
use crate::proto::reply::Reply;
use crate::store::Store;

/// Most block groups (1 MiB each) one [`crate::Op::Seek`] looks at before answering where
/// to go on from.
pub const SEEK_GROUPS: u64 = 64;

impl<S: Store + ?Sized> Exec<'_, '_, S> {
    /// [`crate::Op::CopyRange`]: up to `len` bytes of `from` at `from_offset` (fewer at its
    /// end) written into `to` at `to_offset`, as a write of them would.
    pub(crate) fn copy_range(
        &mut self,
        from: FileHandle,
        from_offset: u64,
        to: FileHandle,
        to_offset: u64,
        len: u32,
    ) -> Res<Reply> {
        if len > MAX_IO {
            return Err(Errno::EINVAL.into());
        }
        let src = self.resolve(from)?;
        need_regular(&src)?;
        perm::check_io(self.cred, &src, R_OK)?;
        // Linux refuses overlapping ranges of one file.
        let overlap = |a: u64, b: u64| a < b.saturating_add(u64::from(len));
        if from.ino == to.ino && overlap(from_offset, to_offset) && overlap(to_offset, from_offset)
        {
            return Err(Errno::EINVAL.into());
        }
        let id = self.data_rec(from.ino)?.id;
        let (bytes, _) = data::read(self.txn, id, &src, from_offset, u64::from(len))?;
        if bytes.is_empty() {
            let dst = self.resolve(to)?;
            need_regular(&dst)?;
            perm::check_io(self.cred, &dst, W_OK)?;
            return Ok(Reply::Write {
                count: 0,
                attr: dst.attr(to.ino),
            });
        }
        self.write(to, to_offset, &bytes)
    }

    /// [`crate::Op::Punch`]: bytes `offset..offset + len` read as zeros afterwards; with
    /// `keep_size` false (zero-range) the file grows to cover them.
    pub(crate) fn punch(
        &mut self,
        fh: FileHandle,
        offset: u64,
        len: u32,
        keep_size: bool,
    ) -> Res<Reply> {
        if len > MAX_IO || len == 0 {
            return Err(Errno::EINVAL.into());
        }
        let mut i = self.resolve(fh)?;
        need_regular(&i)?;
        perm::check_io(self.cred, &i, W_OK)?;
        let end = offset
            .checked_add(u64::from(len))
            .filter(|&e| e <= MAX_FILE_SIZE)
            .ok_or(Errno::EFBIG)?;
        let mut delta = 0;
        let zero_to = end.min(i.size);
        if offset < zero_to {
            let id = self.data_rec(fh.ino)?.id;
            delta += data::zero(self.txn, id, &mut i, offset, zero_to)?;
        }
        if !keep_size && end > i.size {
            delta += self.before_growth(fh.ino, &mut i)?;
            i.size = end;
        }
        self.charge(delta)?;
        i.mtime = self.now;
        i.ctime = self.now;
        self.save(fh.ino, &i);
        Ok(Reply::Attr(i.attr(fh.ino)))
    }

    /// [`crate::Op::Seek`]: the next data (`hole` false) or hole from `offset`.
    pub(crate) fn seek(&mut self, fh: FileHandle, offset: u64, hole: bool) -> Res<Reply> {
        let i = self.resolve(fh)?;
        need_regular(&i)?;
        if offset >= i.size {
            return Err(Errno::ENXIO.into());
        }
        let id = self.data_rec(fh.ino)?.id;
        match data::seek(self.txn, id, i.size, offset, hole, SEEK_GROUPS)? {
            Seek::At(at) => Ok(Reply::Seek { at, done: true }),
            Seek::From(at) => Ok(Reply::Seek { at, done: false }),
            Seek::Nothing => Err(Errno::ENXIO.into()),
        }
    }
}
