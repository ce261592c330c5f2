//! Conversions between the file service's types and FUSE's: errno, times, file types,
//! attributes.

use super::{
    Attr, Duration, Errno, FileAttr, FileType, INodeNo, SystemTime, Timestamp, UNIX_EPOCH,
};

pub(crate) fn errno(e: Errno) -> fuser::Errno {
    fuser::Errno::from_i32(e.raw())
}

pub(crate) fn system_time(t: Timestamp) -> SystemTime {
    let nanos = Duration::from_nanos(u64::from(t.nsecs));
    if t.secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(t.secs.unsigned_abs()) + nanos
    } else {
        UNIX_EPOCH - Duration::from_secs(t.secs.unsigned_abs()) + nanos
    }
}

pub(crate) fn timestamp(t: SystemTime) -> Timestamp {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Timestamp {
            secs: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            nsecs: d.subsec_nanos(),
        },
        Err(e) => {
            // Before the epoch: floor to whole seconds, positive nanoseconds.
            let d = e.duration();
            let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            if d.subsec_nanos() == 0 {
                Timestamp {
                    secs: -secs,
                    nsecs: 0,
                }
            } else {
                Timestamp {
                    secs: -secs - 1,
                    nsecs: 1_000_000_000 - d.subsec_nanos(),
                }
            }
        }
    }
}

pub(crate) fn kind(k: FileType) -> fuser::FileType {
    match k {
        FileType::Regular => fuser::FileType::RegularFile,
        FileType::Directory => fuser::FileType::Directory,
        FileType::Symlink => fuser::FileType::Symlink,
        FileType::Fifo => fuser::FileType::NamedPipe,
        FileType::Socket => fuser::FileType::Socket,
        FileType::CharDevice => fuser::FileType::CharDevice,
        FileType::BlockDevice => fuser::FileType::BlockDevice,
    }
}

pub(crate) fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.fh.ino),
        size: a.size,
        blocks: a.used.div_ceil(512),
        atime: system_time(a.atime),
        mtime: system_time(a.mtime),
        ctime: system_time(a.ctime),
        crtime: system_time(a.ctime),
        kind: kind(a.kind),
        // `mode` holds only the 12 permission bits.
        perm: (a.mode & 0o7777) as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        // Linux's `dev_t` as FUSE carries it (32 bits: new_encode_dev).
        rdev: u32::try_from(a.rdev).unwrap_or(0),
        blksize: byzfs_fs::data::BLOCK_SIZE as u32,
        flags: 0,
    }
}

/// A negative entry (inode 0): "no such name", cached by the kernel for the reply's timeout.
pub(crate) fn negative_entry() -> FileAttr {
    FileAttr {
        ino: INodeNo(0),
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: fuser::FileType::RegularFile,
        perm: 0,
        nlink: 0,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 0,
        flags: 0,
    }
}

#[cfg(test)]
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_including_before_the_epoch() {
        for t in [
            Timestamp { secs: 0, nsecs: 0 },
            Timestamp {
                secs: 1_700_000_000,
                nsecs: 123,
            },
            Timestamp {
                secs: -5,
                nsecs: 250_000_000,
            },
            Timestamp { secs: -1, nsecs: 0 },
        ] {
            assert_eq!(timestamp(system_time(t)), t);
        }
    }
}
