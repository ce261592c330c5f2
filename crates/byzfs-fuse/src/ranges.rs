//! `copy_file_range`, `fallocate` punch-hole and zero-range, and `lseek`
//! `SEEK_DATA`/`SEEK_HOLE` ([`byzfs_fs::ranges`]): done at the replicas, in operations of
//! at most [`MAX_IO`] bytes each (or a bounded scan, for a seek), as writes are split. A
//! copy's bytes never travel between the mount and the replicas, so `cp` of a large file
//! costs round trips, not bandwidth. Like a write split in chunks, a large copy or punch is
//! not atomic: another mount may see it half done.

use super::ByzFuse;
use byzfs_fs::proto::op::MAX_IO;
use byzfs_fs::{Errno, FileHandle, Op, Reply};

/// Linux `FALLOC_FL_KEEP_SIZE`, `FALLOC_FL_PUNCH_HOLE`, `FALLOC_FL_ZERO_RANGE`.
pub(super) const KEEP_SIZE: i32 = 0x01;
pub(super) const PUNCH_HOLE: i32 = 0x02;
pub(super) const ZERO_RANGE: i32 = 0x10;
/// Linux `SEEK_DATA` and `SEEK_HOLE`.
const SEEK_DATA: i32 = 3;
const SEEK_HOLE: i32 = 4;

/// Copies up to `len` bytes; returns how many (fewer at the source's end, and at most what
/// FUSE's reply can carry, a `u32`: the kernel asks again for the rest).
pub(super) fn copy(
    fs: &ByzFuse,
    req: &fuser::Request,
    from: (FileHandle, u64),
    to: (FileHandle, u64),
    len: u64,
) -> Result<u32, Errno> {
    let len = len.min(u64::from(u32::MAX - (MAX_IO - 1)));
    let mut done = 0u64;
    while done < len {
        let chunk = u32::try_from((len - done).min(u64::from(MAX_IO))).unwrap_or(MAX_IO);
        let op = Op::CopyRange {
            from: from.0,
            from_offset: from.1.checked_add(done).ok_or(Errno::EFBIG)?,
            to: to.0,
            to_offset: to.1.checked_add(done).ok_or(Errno::EFBIG)?,
            len: chunk,
        };
        match fs.call(req, op) {
            Ok(Reply::Write { count, .. }) => {
                done += u64::from(count);
                if count < chunk {
                    break;
                }
            }
            Ok(_) => return Err(Errno::EIO),
            // Bytes already copied are reported, as a short write is.
            Err(e) if done == 0 => return Err(e),
            Err(_) => break,
        }
    }
    // `done <= len`, which fits a `u32`.
    Ok(u32::try_from(done).unwrap_or(u32::MAX))
}

/// Punch-hole (`keep_size` true) or zero-range over `offset..offset + len`.
pub(super) fn punch(
    fs: &ByzFuse,
    req: &fuser::Request,
    fh: FileHandle,
    offset: u64,
    len: u64,
    keep_size: bool,
) -> Result<(), Errno> {
    let end = offset.checked_add(len).ok_or(Errno::EFBIG)?;
    let mut at = offset;
    while at < end {
        let chunk = u32::try_from((end - at).min(u64::from(MAX_IO))).unwrap_or(MAX_IO);
        match fs.call(
            req,
            Op::Punch {
                fh,
                offset: at,
                len: chunk,
                keep_size,
            },
        )? {
            Reply::Attr(_) => at += u64::from(chunk),
            _ => return Err(Errno::EIO),
        }
    }
    Ok(())
}

/// `SEEK_DATA` or `SEEK_HOLE` from `offset`; `EINVAL` for another `whence` (the kernel
/// handles those itself).
pub(super) fn seek(
    fs: &ByzFuse,
    req: &fuser::Request,
    fh: FileHandle,
    offset: i64,
    whence: i32,
) -> Result<i64, Errno> {
    let hole = match whence {
        SEEK_DATA => false,
        SEEK_HOLE => true,
        _ => return Err(Errno::EINVAL),
    };
    let mut at = u64::try_from(offset).map_err(|_| Errno::ENXIO)?;
    loop {
        match fs.call(
            req,
            Op::Seek {
                fh,
                offset: at,
                hole,
            },
        )? {
            Reply::Seek { at: a, done: true } => {
                return i64::try_from(a).map_err(|_| Errno::EFBIG);
            }
            // A bounded scan found nothing yet: on from where it stopped.
            Reply::Seek { at: a, done: false } if a > at => at = a,
            _ => return Err(Errno::EIO),
        }
    }
}
