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
//!
//! A `chmod`, `chown` or `utimes` of the file right after such writes, by the same caller,
//! is held back with them and sent as one [`Op::WriteSetAttr`]: `cp -p`, `tar` and `rsync`
//! write a file, then set its times (and owner and mode), so each copied file took three
//! ordered operations (create, write, setattr) and now takes two. The kernel gets the
//! attributes the change will give ([`Gather::hold_set`]), valid for no time, so its next
//! `stat` asks again and gets the cluster's. Not held back: size changes, and anything
//! touching a set-user-ID or set-group-ID file (whose bits the change may clear).

use byzfs_fs::MAX_SETATTRS;
use byzfs_fs::{Attr, Credentials, Errno, Extent, FileHandle, Op, SetAttr, SetTime, Timestamp};
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
    /// Attribute changes held back after the writes.
    sets: Vec<SetAttr>,
    /// The file's attributes once the held writes and changes are applied, as far as the
    /// mount can tell (`None`: it did not know them when the first write was held).
    attr: Option<Attr>,
    /// When the first of them was acknowledged.
    pub since: Instant,
}

impl Pending {
    /// The operation that applies them.
    pub fn into_op(self) -> (Credentials, Op) {
        let fh = self.fh;
        let extents = self.extents;
        let op = if !self.sets.is_empty() {
            Op::WriteSetAttr {
                fh,
                extents,
                sets: self.sets,
            }
        } else {
            match <[Extent; 1]>::try_from(extents) {
                Ok([Extent { offset, data }]) => Op::Write { fh, offset, data },
                Err(extents) => Op::WriteGather { fh, extents },
            }
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
    /// file, same caller, room left, no attribute change held after them. `true` when
    /// nothing is pending.
    pub fn joins(&self, fh: FileHandle, cred: &Credentials, len: usize) -> bool {
        match &self.pending {
            None => true,
            Some(p) => {
                p.fh == fh && p.cred == *cred && p.sets.is_empty() && p.bytes + len <= self.limit
            }
        }
    }

    /// Holds a write back (after [`Gather::joins`] said it may join), made at `now`. A
    /// write that continues the previous one extends it. `base`: the file's attributes
    /// before it, if known (used when nothing is pending yet).
    pub fn hold(
        &mut self,
        fh: FileHandle,
        cred: &Credentials,
        offset: u64,
        data: &[u8],
        base: Option<&Attr>,
        now: Timestamp,
    ) {
        let p = self.pending.get_or_insert_with(|| Pending {
            fh,
            cred: cred.clone(),
            extents: Vec::new(),
            bytes: 0,
            sets: Vec::new(),
            attr: base.filter(|a| a.fh == fh).cloned(),
            since: Instant::now(),
        });
        p.bytes += data.len();
        if let Some(a) = &mut p.attr {
            // `offset + len` fits: the mount holds only writes that end within the
            // largest file size.
            a.size = a.size.max(offset.saturating_add(data.len() as u64));
            a.mtime = now;
            a.ctime = now;
        }
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

    /// Holds back a change of `fh`'s attributes by `cred`, made at `now`, after the
    /// pending writes, and returns the attributes the file will have; `None` (send it
    /// now) unless writes to `fh` by `cred` are pending, their result is known, and the
    /// change leaves the size alone and involves no set-user-ID or set-group-ID bit.
    pub fn hold_set(
        &mut self,
        fh: FileHandle,
        cred: &Credentials,
        set: &SetAttr,
        now: Timestamp,
    ) -> Option<Attr> {
        const SPECIAL: u32 = 0o6000;
        let p = self.pending.as_mut()?;
        if p.fh != fh || p.cred != *cred || p.sets.len() >= MAX_SETATTRS || set.size.is_some() {
            return None;
        }
        let a = p.attr.as_mut()?;
        if a.mode & SPECIAL != 0 || set.mode.is_some_and(|m| m & SPECIAL != 0) {
            return None;
        }
        let time = |t: SetTime| match t {
            SetTime::Now => now,
            SetTime::At(t) => t,
        };
        a.mode = set
            .mode
            .map_or(a.mode, |m| m & byzfs_fs::proto::attr::MODE_MASK);
        a.uid = set.uid.unwrap_or(a.uid);
        a.gid = set.gid.unwrap_or(a.gid);
        a.atime = set.atime.map_or(a.atime, time);
        a.mtime = set.mtime.map_or(a.mtime, time);
        a.ctime = now;
        p.sets.push(set.clone());
        Some(a.clone())
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

    const T0: Timestamp = Timestamp { secs: 50, nsecs: 0 };

    fn fh(ino: u64) -> FileHandle {
        FileHandle { ino, generation: 1 }
    }

    fn attr(ino: u64, mode: u32) -> Attr {
        Attr {
            fh: fh(ino),
            kind: byzfs_fs::FileType::Regular,
            mode,
            nlink: 1,
            uid: 1000,
            gid: 100,
            size: 3,
            used: 3,
            atime: Timestamp::default(),
            mtime: Timestamp::default(),
            ctime: Timestamp::default(),
            rdev: 0,
            crypt: Vec::new(),
        }
    }

    #[test]
    fn attribute_changes_after_writes_go_with_them() {
        let me = Credentials::user(1000, 100);
        let t1 = Timestamp { secs: 60, nsecs: 7 };
        let times = SetAttr {
            atime: Some(SetTime::At(t1)),
            mtime: Some(SetTime::At(t1)),
            ..SetAttr::default()
        };
        let chmod = |m| SetAttr {
            mode: Some(m),
            ..SetAttr::default()
        };
        let mut g = Gather::new(100);
        assert!(
            g.hold_set(fh(5), &me, &times, T0).is_none(),
            "nothing pending"
        );
        g.hold(fh(5), &me, 0, b"hello", Some(&attr(5, 0o644)), T0);
        // The size the writes give, the times and mode the changes give.
        let a = g.hold_set(fh(5), &me, &times, T0).unwrap();
        assert_eq!((a.size, a.mtime, a.atime, a.ctime), (5, t1, t1, T0));
        let a = g.hold_set(fh(5), &me, &chmod(0o600), T0).unwrap();
        assert_eq!((a.mode, a.mtime), (0o600, t1));
        // A write after them does not join (order), nor do other files, callers, sizes
        // and set-user-ID bits.
        assert!(!g.joins(fh(5), &me, 1));
        assert!(g.hold_set(fh(6), &me, &times, T0).is_none());
        assert!(g
            .hold_set(fh(5), &Credentials::user(0, 0), &times, T0)
            .is_none());
        let truncate = SetAttr {
            size: Some(0),
            ..SetAttr::default()
        };
        assert!(g.hold_set(fh(5), &me, &truncate, T0).is_none());
        assert!(g.hold_set(fh(5), &me, &chmod(0o4755), T0).is_none());
        let (_, op) = g.take().unwrap().into_op();
        assert_eq!(
            op,
            Op::WriteSetAttr {
                fh: fh(5),
                extents: vec![Extent {
                    offset: 0,
                    data: b"hello".to_vec()
                }],
                sets: vec![times.clone(), chmod(0o600)],
            }
        );
        // Unknown attributes, or a set-user-ID file: sent on their own.
        g.hold(fh(5), &me, 0, b"x", None, T0);
        assert!(g.hold_set(fh(5), &me, &times, T0).is_none());
        g.take();
        g.hold(fh(5), &me, 0, b"x", Some(&attr(5, 0o4755)), T0);
        assert!(g.hold_set(fh(5), &me, &times, T0).is_none());
        g.take();
        // At most MAX_SETATTRS.
        g.hold(fh(5), &me, 0, b"x", Some(&attr(5, 0o644)), T0);
        for _ in 0..MAX_SETATTRS {
            assert!(g.hold_set(fh(5), &me, &times, T0).is_some());
        }
        assert!(g.hold_set(fh(5), &me, &times, T0).is_none());
    }

    #[test]
    fn contiguous_writes_merge_and_scattered_ones_gather() {
        let me = Credentials::user(1000, 100);
        let mut g = Gather::new(10);
        assert!(g.joins(fh(5), &me, 4));
        g.hold(fh(5), &me, 0, b"abcd", None, T0);
        assert!(g.joins(fh(5), &me, 2));
        g.hold(fh(5), &me, 4, b"ef", None, T0);
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

        g.hold(fh(5), &me, 100, b"x", None, T0);
        g.hold(fh(5), &me, 0, b"y", None, T0);
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
        g.hold(fh(5), &me, 0, b"12345678", None, T0);
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
