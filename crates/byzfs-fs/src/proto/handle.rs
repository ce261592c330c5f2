//! File handles: `(inode number, generation)`.
//!
//! Inode numbers come from a replicated counter and are never reused, and every allocation
//! also takes a fresh value of a replicated generation counter. A handle whose inode is gone,
//! or whose generation differs from the inode's, is stale ([`crate::Errno::ESTALE`]): a client
//! holding a handle of a removed file can never reach another file through it, even if a later
//! version of the service starts reusing inode numbers.

use serde::{Deserialize, Serialize};

/// Inode number of the root directory.
pub const ROOT_INO: u64 = 1;
/// Generation of the root directory.
pub const ROOT_GENERATION: u64 = 1;

/// A handle naming one file for its whole life.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct FileHandle {
    /// Inode number (FUSE `ino`).
    pub ino: u64,
    /// Generation (FUSE `generation`).
    pub generation: u64,
}

impl FileHandle {
    /// The handle of the root directory.
    pub const ROOT: FileHandle = FileHandle {
        ino: ROOT_INO,
        generation: ROOT_GENERATION,
    };
}
