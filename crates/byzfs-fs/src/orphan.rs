//! Files removed while open, and `O_TMPFILE` files, kept until their last close: the orphan
//! directory, and the sweep that clears what dead clients left there.
//!
//! The service frees a file at its last unlink, so a client that must keep a removed file
//! usable while it is open (POSIX) hides it instead, as NFS clients do with `.nfs…` names:
//! it moves the file to [`ORPHAN_DIR`] at the root under a name from [`hidden_name`], and
//! removes it at the last close. A client that dies first cannot. NFS leaves such files for
//! ever; here every name carries the client's session, and the client holds its lock lease
//! ([`crate::lock`]) for as long as it has hidden files, renewing it as it does while it
//! holds locks. [`crate::Op::SweepOrphans`] then removes, in agreed time and identically at
//! every replica, the hidden files whose client's lease has lapsed or was never taken. The
//! mount sends it when it starts and every few minutes.
//!
//! **Who may sweep.** Any client may, whatever its credentials. The sweep only removes
//! files whose client stopped renewing its lease, so it takes nothing from a live client;
//! a client cut off for longer than the lease loses its hidden files, as it loses its locks.
//!
//! **Bounded work.** One sweep looks at up to [`SWEEP_SCAN`] entries and removes up to
//! [`SWEEP_REMOVE`] files, each freed with its data as a `remove` would. It answers where
//! to go on from, so the client sends more sweeps until the directory has been covered.
//!
//! **Not swept:** names of other shapes (a user's own files there stay) and directories.
//! Files a client hid in their own directory, because the orphan directory could not be
//! had, go by [`crate::Op::SweepDir`] on that directory, which the mount sends when a
//! `rmdir` finds the directory not empty.

use crate::dir;
use crate::exec::Exec;
use crate::fail::Res;
use crate::inode;
use crate::proto::attr::FileType;
use crate::proto::errno::Errno;
use crate::proto::handle::FileHandle;
use crate::proto::reply::Reply;
use crate::store::Store;

/// The orphan directory's name, at the root.
pub const ORPHAN_DIR: &[u8] = b".byzfs-orphans";
/// The prefix of every hidden name ([`hidden_name`]).
const PREFIX: &str = ".byzfs-silly-";
/// Most entries one sweep looks at.
pub const SWEEP_SCAN: usize = 256;
/// Most files one sweep removes.
pub const SWEEP_REMOVE: u32 = 64;

/// The hidden name of a file client `client` keeps: `.byzfs-silly-<client>-<what>`, in hex,
/// where `what` tells the client's files apart (an inode and generation, or a counter).
///
/// ```
/// use byzfs_fs::orphan::{client_of, hidden_name};
/// let name = hidden_name(0x2a, "tmp-3");
/// assert_eq!(name, b".byzfs-silly-2a-tmp-3");
/// assert_eq!(client_of(&name), Some(0x2a));
/// ```
pub fn hidden_name(client: u64, what: &str) -> Vec<u8> {
    format!("{PREFIX}{client:x}-{what}").into_bytes()
}

/// The client a [`hidden_name`] belongs to; `None` for any other name.
pub fn client_of(name: &[u8]) -> Option<u64> {
    let rest = name.strip_prefix(PREFIX.as_bytes())?;
    let end = rest.iter().position(|&b| b == b'-')?;
    let hex = std::str::from_utf8(&rest[..end]).ok()?;
    // Exactly what `hidden_name` writes: lower-case hex, no sign, no leading zero.
    let canonical = !hex.is_empty()
        && hex.len() <= 16
        && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        && (hex == "0" || !hex.starts_with('0'));
    if !canonical || end + 1 == rest.len() {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

impl<S: Store + ?Sized> Exec<'_, '_, S> {
    /// [`crate::Op::SweepOrphans`]: removes hidden files of clients whose lease is not
    /// current from the orphan directory's entries after cookie `after`.
    pub(crate) fn sweep_orphans(&mut self, after: u64) -> Res<Reply> {
        let done = Reply::Swept {
            removed: 0,
            next: None,
        };
        let Some(e) = dir::lookup(self.txn, FileHandle::ROOT.ino, ORPHAN_DIR)? else {
            return Ok(done);
        };
        if e.target.kind != FileType::Directory {
            return Ok(done);
        }
        self.sweep_in(e.target.ino, after)
    }

    /// [`crate::Op::SweepDir`]: the same in directory `dir`.
    pub(crate) fn sweep_dir(&mut self, dir: FileHandle, after: u64) -> Res<Reply> {
        let d = self.resolve(dir)?;
        if !d.is_dir() {
            return Err(Errno::ENOTDIR.into());
        }
        self.sweep_in(dir.ino, after)
    }

    /// Removes hidden files of clients whose lease is not current from directory `at`'s
    /// entries after cookie `after`.
    fn sweep_in(&mut self, at: u64, after: u64) -> Res<Reply> {
        let mut d = inode::must_load(self.txn, at)?;
        let (rows, eof) = dir::list(self.txn, at, after, SWEEP_SCAN)?;
        let mut removed = 0;
        let mut last = after;
        let mut covered = eof;
        for (cookie, row) in rows {
            if removed == SWEEP_REMOVE {
                covered = false;
                break;
            }
            last = cookie;
            if row.target.kind == FileType::Directory {
                continue;
            }
            let Some(client) = client_of(&row.name) else {
                continue;
            };
            if client == self.client || self.load_lease(client)?.is_some_and(|l| self.current(l)) {
                continue;
            }
            dir::remove(self.txn, at, &mut d, &row.name, cookie);
            self.drop_link(row.target.ino)?;
            removed += 1;
        }
        if removed > 0 {
            d.mtime = self.now;
            d.ctime = self.now;
            self.save(at, &d);
        }
        Ok(Reply::Swept {
            removed,
            next: (!covered).then_some(last),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_others_are_not_hidden() {
        for c in [0, 1, 0xff, u64::MAX] {
            assert_eq!(client_of(&hidden_name(c, "5-1")), Some(c));
        }
        for other in [
            &b".byzfs-silly-"[..],
            b".byzfs-silly-2a",
            b".byzfs-silly-2a-",
            b".byzfs-silly-02a-x",
            b".byzfs-silly-2A-x",
            b".byzfs-silly-+2a-x",
            b".byzfs-silly-tmp-2a-1",
            b".byzfs-silly-10000000000000000-x",
            b"notes.txt",
        ] {
            assert_eq!(
                client_of(other),
                None,
                "{:?}",
                String::from_utf8_lossy(other)
            );
        }
    }
}
