//! Error numbers returned by file operations: Linux `errno` values, so the FUSE layer passes
//! them to the kernel unchanged.
//!
//! Every replica computes the same error for the same operation on the same state: errors are
//! part of the replicated result and must be deterministic (no "disk full here, fine there").

use serde::{Deserialize, Serialize};
use std::fmt;

/// A Linux `errno` value.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Errno(pub i32);

impl Errno {
    /// Operation not permitted (not the owner, or not root).
    pub const EPERM: Errno = Errno(1);
    /// No such file or directory.
    pub const ENOENT: Errno = Errno(2);
    /// No such device or address: `SEEK_DATA` or `SEEK_HOLE` at or past the end of the
    /// file, or `SEEK_DATA` with no data after the offset.
    pub const ENXIO: Errno = Errno(6);
    /// Interrupted: a signal arrived while a blocking lock request waited (the mount
    /// answers it; the kernel restarts the call or reports it).
    pub const EINTR: Errno = Errno(4);
    /// I/O error: a replica's local store failed (never produced by a healthy replica).
    pub const EIO: Errno = Errno(5);
    /// Argument list too long: an extended attribute value over 64 KiB.
    pub const E2BIG: Errno = Errno(7);
    /// Try again: another owner holds a conflicting lock (`F_SETLK`).
    pub const EAGAIN: Errno = Errno(11);
    /// Busy: the file's stale tail, left by a truncation too large for one operation, is
    /// still being deleted ([`crate::reclaim`]); an operation that would grow the file over
    /// it changed nothing. Send `Op::Reclaim` for the file until it answers `more: false`,
    /// then try again (the mount does this by itself; an application never sees it).
    pub const EBUSY: Errno = Errno(16);
    /// Permission denied by the mode bits.
    pub const EACCES: Errno = Errno(13);
    /// The name already exists.
    pub const EEXIST: Errno = Errno(17);
    /// Not a directory.
    pub const ENOTDIR: Errno = Errno(20);
    /// Is a directory.
    pub const EISDIR: Errno = Errno(21);
    /// Invalid argument (bad name, wrong file type for the operation, rename into own subtree,
    /// undecodable operation).
    pub const EINVAL: Errno = Errno(22);
    /// File too large (write or truncate beyond [`super::attr::MAX_FILE_SIZE`]).
    pub const EFBIG: Errno = Errno(27);
    /// No space left: the replicated capacity ([`crate::FsConfig`]) is exhausted.
    pub const ENOSPC: Errno = Errno(28);
    /// Too many links.
    pub const EMLINK: Errno = Errno(31);
    /// No locks available: a file already carries
    /// [`MAX_LOCKS_PER_FILE`](super::lock::MAX_LOCKS_PER_FILE) locks.
    pub const ENOLCK: Errno = Errno(37);
    /// Result too large: an extended attribute name over 255 bytes.
    pub const ERANGE: Errno = Errno(34);
    /// Name longer than 255 bytes, or directory nesting deeper than
    /// [`crate::dir::MAX_DEPTH`].
    pub const ENAMETOOLONG: Errno = Errno(36);
    /// Resource deadlock would occur: a blocking lock request would wait for an owner that
    /// waits for the requester ([`crate::deadlock`]).
    pub const EDEADLK: Errno = Errno(35);
    /// Directory not empty.
    pub const ENOTEMPTY: Errno = Errno(39);
    /// No such extended attribute (`ENOATTR`).
    pub const ENODATA: Errno = Errno(61);
    /// An extended attribute namespace other than `user.` and `trusted.`.
    pub const EOPNOTSUPP: Errno = Errno(95);
    /// Stale file handle: the inode no longer exists or has another generation.
    pub const ESTALE: Errno = Errno(116);
    /// Key expired: a writer proof made with an older key version than its encryption
    /// group's ([`crate::crypt_write`]).
    pub const EKEYEXPIRED: Errno = Errno(127);

    /// The raw value, for `libc`-style APIs.
    pub fn raw(self) -> i32 {
        self.0
    }

    /// The symbolic name, for logs and test failures.
    pub fn name(self) -> &'static str {
        match self {
            Errno::EPERM => "EPERM",
            Errno::ENOENT => "ENOENT",
            Errno::EINTR => "EINTR",
            Errno::EIO => "EIO",
            Errno::EAGAIN => "EAGAIN",
            Errno::EBUSY => "EBUSY",
            Errno::ENXIO => "ENXIO",
            Errno::ENOLCK => "ENOLCK",
            Errno::EDEADLK => "EDEADLK",
            Errno::E2BIG => "E2BIG",
            Errno::EACCES => "EACCES",
            Errno::EEXIST => "EEXIST",
            Errno::ENOTDIR => "ENOTDIR",
            Errno::EISDIR => "EISDIR",
            Errno::EINVAL => "EINVAL",
            Errno::EFBIG => "EFBIG",
            Errno::ENOSPC => "ENOSPC",
            Errno::EMLINK => "EMLINK",
            Errno::ERANGE => "ERANGE",
            Errno::ENAMETOOLONG => "ENAMETOOLONG",
            Errno::ENOTEMPTY => "ENOTEMPTY",
            Errno::ENODATA => "ENODATA",
            Errno::EOPNOTSUPP => "EOPNOTSUPP",
            Errno::ESTALE => "ESTALE",
            Errno::EKEYEXPIRED => "EKEYEXPIRED",
            _ => "E?",
        }
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.name(), self.0)
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for Errno {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linux_values() {
        assert_eq!(Errno::ENOENT.raw(), 2);
        assert_eq!(Errno::ENOTEMPTY.raw(), 39);
        assert_eq!(Errno::ESTALE.raw(), 116);
        assert_eq!(Errno::EKEYEXPIRED.raw(), 127);
        assert_eq!(format!("{:?}", Errno::EISDIR), "EISDIR(21)");
        assert_eq!(Errno(999).name(), "E?");
    }
}
