//! File attributes, as replicated (the inode record) and as returned to clients.
//!
//! **Times.** `mtime` and `ctime` are set from the batch's agreed timestamp (docs/PROTOCOL.md
//! §1.13), never from a replica's clock, so every replica stores the same value. **`atime` is
//! not maintained**: reads are read-only operations that do not change state (that is what
//! makes the read-only optimisation possible), so `atime` is set at creation and changed only
//! by an explicit `setattr` (like a `noatime` mount).

use super::handle::FileHandle;
use serde::{Deserialize, Serialize};

/// Largest file size: 1 TiB. Writes or truncations beyond it fail with `EFBIG`.
pub const MAX_FILE_SIZE: u64 = 1 << 40;

/// Permission and special bits kept in [`Attr::mode`] (`S_ISUID|S_ISGID|S_ISVTX|rwxrwxrwx`).
pub const MODE_MASK: u32 = 0o7777;
/// Set-user-ID bit.
pub const S_ISUID: u32 = 0o4000;
/// Set-group-ID bit.
pub const S_ISGID: u32 = 0o2000;
/// Sticky bit (restricted deletion in directories).
pub const S_ISVTX: u32 = 0o1000;

/// Most hard links one inode may have (`EMLINK` beyond).
pub const MAX_LINKS: u32 = 65_000;

/// The type of a file.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum FileType {
    /// A regular file.
    Regular,
    /// A directory.
    Directory,
    /// A symbolic link.
    Symlink,
    /// A named pipe.
    Fifo,
    /// A Unix domain socket.
    Socket,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
}

/// A point in time: seconds and nanoseconds since the Unix epoch (may be negative, as
/// `touch -d 1960-01-01` sets).
#[derive(
    Serialize, Deserialize, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default,
)]
pub struct Timestamp {
    /// Seconds since the epoch.
    pub secs: i64,
    /// Nanoseconds, `< 1_000_000_000`.
    pub nsecs: u32,
}

impl Timestamp {
    /// The timestamp of an agreed time in microseconds.
    pub fn from_micros(us: u64) -> Timestamp {
        Timestamp {
            // `us / 1e6 < 2^44`, so the cast is exact.
            secs: (us / 1_000_000) as i64,
            // `< 1e6 · 1e3 = 1e9`, fits `u32`.
            nsecs: ((us % 1_000_000) * 1_000) as u32,
        }
    }
}

/// Attributes of a file, as returned by every operation that names one.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct Attr {
    /// The file's handle (inode number and generation).
    pub fh: FileHandle,
    /// File type.
    pub kind: FileType,
    /// Permission and special bits ([`MODE_MASK`]), without the type bits.
    pub mode: u32,
    /// Number of hard links (directories: 2 + number of subdirectories).
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Size in bytes (directories: 4096; symlinks: target length).
    pub size: u64,
    /// Bytes actually stored (sparse files use less): `st_blocks = ceil(used / 512)`.
    pub used: u64,
    /// Last access time (not maintained; see the module docs).
    pub atime: Timestamp,
    /// Last data modification time.
    pub mtime: Timestamp,
    /// Last status change time.
    pub ctime: Timestamp,
    /// Device nodes: the device number (`st_rdev`); 0 otherwise.
    pub rdev: u64,
    /// A file of an encryption group: its sealed header as the last
    /// [`Op::Signed`](super::op::Op::Signed) that changed it set it ([`crate::crypt_file`]), opaque
    /// to the replicas; empty otherwise.
    pub crypt: Vec<u8>,
}

/// A new time for `setattr`.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
pub enum SetTime {
    /// The agreed time of the batch (`utimes(NULL)`, `UTIME_NOW`).
    Now,
    /// An explicit time.
    At(Timestamp),
}

/// The attributes a `setattr` changes (`None` = unchanged).
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug, Default)]
pub struct SetAttr {
    /// New permission bits (masked with [`MODE_MASK`]).
    pub mode: Option<u32>,
    /// New owner.
    pub uid: Option<u32>,
    /// New group.
    pub gid: Option<u32>,
    /// New size (truncate or extend with a hole); regular files only.
    pub size: Option<u64>,
    /// New access time.
    pub atime: Option<SetTime>,
    /// New modification time.
    pub mtime: Option<SetTime>,
}

/// File-system statistics (`statfs`), from the replicated capacity and usage counters.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct StatFs {
    /// Block size used for the counts below.
    pub block_size: u32,
    /// Total blocks (capacity).
    pub blocks: u64,
    /// Free blocks.
    pub blocks_free: u64,
    /// Total inodes.
    pub files: u64,
    /// Free inodes.
    pub files_free: u64,
    /// Longest name.
    pub name_max: u32,
}
