//! Write-behind: consecutive writes to one file by one caller are acknowledged at once and
//! sent to the cluster together, as one [`Op::WriteGather`] (or one [`Op::Write`]), before
//! the next operation of any other kind, at `close` and `fsync`, and at most
//! [`MAX_AGE`] after the first of them.
//!
//! Why: an assembler writes a small object file in about eight scattered writes, PostMark a
//! file in a few; each write was a full agreement round (about 1 ms on the development
//! machine). The NFS client the seeds' BFS ran under did the same (asynchronous writes,
//! committed at close).
//!
//! What users see: the same as over NFS. A write's error that only the replicas can find
//! (`ENOSPC`, `EDQUOT`, a permission changed by another client) is reported by the next
//! `close` or `fsync` of that file, and by later writes to it; the gathered writes are then
//! applied all or not at all. Everything this mount does afterwards (reads, `stat`,
//! `open`) sees the writes, because every other operation sends them first.
//! Close-to-open consistency between mounts is unchanged: `close` returns only after the
//! cluster has applied the file's writes.

use byzfs_fs::{Credentials, Errno, Extent, FileHandle, Op};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Longest time a write stays in the mount unsent.
pub const MAX_AGE: Duration = Duration::from_secs(1);

/// Writes acknowledged to the kernel and not yet sent.
#[derive(Debug)]
pub struct Pending {
    pub fh: FileHandle,
    pub cred: Credentials,
    extents: Vec<Extent>,
    bytes: usize,
    /// When the first of them was acknowledged.
    pub since: Instant,
}

impl Pending {
    /// The operation that applies them.
    pub fn into_op(self) -> (Credentials, Op) {
        let fh = self.fh;
        let op = match <[Extent; 1]>::try_from(self.extents) {
            Ok([Extent { offset, data }]) => Op::Write { fh, offset, data },
            Err(extents) => Op::WriteGather { fh, extents },
        };
        (self.cred, op)
    }
}

/// The mount's write-behind state.
#[derive(Debug)]
pub struct Gather {
    pending: Option<Pending>,
    /// Most bytes one operation may carry.
    limit: usize,
    /// Errors of sent writes not yet reported, by inode.
    errors: HashMap<u64, Errno>,
}

impl Gather {
    /// Gathers at most `limit` bytes per operation.
    pub fn new(limit: usize) -> Gather {
        Gather {
            pending: None,
            limit,
            errors: HashMap::new(),
        }
    }

    /// Whether a write of `len` bytes may be held back at all (one that alone fills an
    /// operation goes at once).
    pub fn may_hold(&self, len: usize) -> bool {
        len > 0 && len <= self.limit
    }

    /// Whether a write of `len` bytes to `fh` by `cred` can join the pending writes: same
    /// file, same caller, room left. `true` when nothing is pending.
    pub fn joins(&self, fh: FileHandle, cred: &Credentials, len: usize) -> bool {
        match &self.pending {
            None => true,
            Some(p) => p.fh == fh && p.cred == *cred && p.bytes + len <= self.limit,
        }
    }

    /// Holds a write back (after [`Gather::joins`] said it may join). A write that
    /// continues the previous one extends it.
    pub fn hold(&mut self, fh: FileHandle, cred: &Credentials, offset: u64, data: &[u8]) {
        let p = self.pending.get_or_insert_with(|| Pending {
            fh,
            cred: cred.clone(),
            extents: Vec::new(),
            bytes: 0,
            since: Instant::now(),
        });
        p.bytes += data.len();
        match p.extents.last_mut() {
            Some(last) if last.offset.checked_add(last.data.len() as u64) == Some(offset) => {
                last.data.extend_from_slice(data);
            }
            _ => p.extents.push(Extent {
                offset,
                data: data.to_vec(),
            }),
        }
    }

    /// The pending writes, if any, to be sent now.
    pub fn take(&mut self) -> Option<Pending> {
        self.pending.take()
    }

    /// The pending writes if they are older than [`MAX_AGE`].
    pub fn take_stale(&mut self) -> Option<Pending> {
        if self.pending.as_ref()?.since.elapsed() >= MAX_AGE {
            self.pending.take()
        } else {
            None
        }
    }

    /// The inode the pending writes are for.
    pub fn pending_ino(&self) -> Option<u64> {
        self.pending.as_ref().map(|p| p.fh.ino)
    }

    /// Remembers that sent writes to `ino` failed with `e` (the first error is kept).
    pub fn failed(&mut self, ino: u64, e: Errno) {
        self.errors.entry(ino).or_insert(e);
    }

    /// The unreported error of `ino`'s writes, if any (it stays until taken).
    pub fn error(&self, ino: u64) -> Option<Errno> {
        self.errors.get(&ino).copied()
    }

    /// Takes the unreported error of `ino`'s writes (reported by `close` or `fsync`).
    pub fn take_error(&mut self, ino: u64) -> Option<Errno> {
        self.errors.remove(&ino)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fh(ino: u64) -> FileHandle {
        FileHandle { ino, generation: 1 }
    }

    #[test]
    fn contiguous_writes_merge_and_scattered_ones_gather() {
        let me = Credentials::user(1000, 100);
        let mut g = Gather::new(10);
        assert!(g.joins(fh(5), &me, 4));
        g.hold(fh(5), &me, 0, b"abcd");
        assert!(g.joins(fh(5), &me, 2));
        g.hold(fh(5), &me, 4, b"ef");
        let (cred, op) = g.take().unwrap().into_op();
        assert_eq!(cred, me);
        assert_eq!(
            op,
            Op::Write {
                fh: fh(5),
                offset: 0,
                data: b"abcdef".to_vec()
            }
        );
        assert!(g.take().is_none());

        g.hold(fh(5), &me, 100, b"x");
        g.hold(fh(5), &me, 0, b"y");
        let (_, op) = g.take().unwrap().into_op();
        let Op::WriteGather { extents, .. } = op else {
            panic!("{op:?}")
        };
        assert_eq!(
            extents.iter().map(|e| e.offset).collect::<Vec<_>>(),
            [100, 0]
        );
    }

    #[test]
    fn other_files_callers_and_full_operations_do_not_join() {
        let me = Credentials::user(1000, 100);
        let other = Credentials::user(1001, 100);
        let mut g = Gather::new(10);
        g.hold(fh(5), &me, 0, b"12345678");
        assert!(!g.joins(fh(6), &me, 1), "another file");
        assert!(!g.joins(fh(5), &other, 1), "another caller");
        assert!(!g.joins(fh(5), &me, 3), "over the limit");
        assert!(g.joins(fh(5), &me, 2));
        assert!(g.may_hold(10) && !g.may_hold(11) && !g.may_hold(0));
        assert_eq!(g.pending_ino(), Some(5));
        assert!(g.take_stale().is_none(), "younger than MAX_AGE");
    }

    #[test]
    fn errors_wait_for_close_and_the_first_is_kept() {
        let mut g = Gather::new(10);
        g.failed(5, Errno::ENOSPC);
        g.failed(5, Errno::EIO);
        assert_eq!(g.error(5), Some(Errno::ENOSPC));
        assert_eq!(g.error(6), None);
        assert_eq!(g.take_error(5), Some(Errno::ENOSPC));
        assert_eq!(g.error(5), None);
    }
}
