//! Write-behind: consecutive writes to one file by one caller are acknowledged at once and
//! sent to the cluster together, as one [`Op::WriteGather`] (or one [`Op::Write`]), before
//! the next operation on that file, before any operation that is not about given files
//! only ([`needs`]: names, listings, locks, space), at `close` and `fsync`, and at most
//! [`MAX_AGE`] after the first of them. Each file's writes are held apart (at most
//! [`MAX_FILES`] files), so two processes writing two files do not send each other's
//! writes at every write.
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
//! `open`) sees the writes, because every operation that could see them sends them first.
//! Close-to-open consistency between mounts is unchanged: `close` returns only after the
//! cluster has applied the file's writes; except under write-back, for a file this mount
//! made in a directory it holds (`dirs.rs`), which no other mount can open before it
//! recalls the directory, and the recall sends every held write first. Held writes go
//! in batches, several files' in one request (`writeback.rs` `writes`), and those of a
//! file removed before they went are dropped (`dirs.rs` `drop_writes`). A lock operation sends every file's writes
//! first, so data written under a lock on another file (a lock file, SQLite's journal
//! beside its database) reaches the replicas before the lock is let go.
//!
//! A `chmod`, `chown` or `utimes` of the file right after such writes, by the same caller,
//! is held back with them and sent as one [`Op::WriteSetAttr`]: `cp -p`, `tar` and `rsync`
//! write a file, then set its times (and owner and mode), so each copied file took three
//! ordered operations (create, write, setattr) and now takes two. The kernel gets the
//! attributes the change will give ([`Gather::hold_set`]), valid for no time, so its next
//! `stat` asks again and gets the cluster's. Not held back: size changes, and anything
//! touching a set-user-ID or set-group-ID file (whose bits the change may clear).

use byzfs_fs::proto::batch::MAX_BATCH;
use byzfs_fs::MAX_SETATTRS;
use byzfs_fs::{Attr, Credentials, Errno, Extent, FileHandle, Op, SetAttr, SetTime, Timestamp};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Longest time a write stays in the mount unsent.
pub const MAX_AGE: Duration = Duration::from_secs(1);

/// Which held writes must reach the replicas before `op`: those of the files it names by
/// handle alone (`Some`: reads, writes, attributes, extended attributes, `fsync`, copies of
/// ranges, reclaim; none for lease renewals, inode reservations, listings and sweeps of
/// orphans), or every file's (`None`: anything that reads or changes names,
/// counts space, takes or lets go of a lock, or does several things at once).
pub fn needs(op: &Op) -> Option<Vec<u64>> {
    let one = |fh: &FileHandle| Some(vec![fh.ino]);
    match op {
        Op::GetAttr { fh }
        | Op::SetAttr { fh, .. }
        | Op::Access { fh, .. }
        | Op::ReadLink { fh }
        | Op::GetXattr { fh, .. }
        | Op::ListXattr { fh, .. }
        | Op::SetXattr { fh, .. }
        | Op::RemoveXattr { fh, .. }
        | Op::Read { fh, .. }
        | Op::ReadGather { fh, .. }
        | Op::Write { fh, .. }
        | Op::WriteGather { fh, .. }
        | Op::WriteSetAttr { fh, .. }
        | Op::Allocate { fh, .. }
        | Op::Fsync { fh, .. }
        | Op::Punch { fh, .. }
        | Op::Seek { fh, .. } => one(fh),
        Op::CopyRange { from, to, .. } => Some(vec![from.ino, to.ino]),
        Op::WriteAt { write, .. } => needs(write),
        // The background's own: they read no data (reclaim deletes only what nothing can
        // read any more), so held writes, which write-back keeps past `close`, stay.
        Op::Reclaim { file } => Some(file.iter().map(|f| f.ino).collect()),
        Op::RenewLease | Op::Recalls | Op::ReserveInodes { .. } => Some(Vec::new()),
        // A sweep removes only hidden files of sessions whose lease lapsed, never one this
        // mount holds writes for (its own session lives); sending every held write first,
        // synchronously, stalled a writer's write-back at each sweep
        // (`dir_delegations::a_big_file_made_in_a_held_directory_is_written_back_without_waiting`).
        Op::SweepOrphans { .. } | Op::SweepDir { .. } => Some(Vec::new()),
        // A file delegation asked for keeps what is held; one given back sends it first.
        Op::DelegateFile { .. } => Some(Vec::new()),
        Op::ReturnFile { file } => one(file),
        // A listing shows names, kinds and handles, which no held write changes (the
        // queue of early answers, which makes names, goes first: `dirs::Dirs::must_precede`).
        Op::ReadDir { .. } => Some(Vec::new()),
        // Held writes of several files sent together (`writeback.rs` `writes`).
        Op::Batch(ops) => {
            let mut all = Vec::new();
            for op in ops {
                all.extend(needs(op)?);
            }
            Some(all)
        }
        _ => None,
    }
}

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
    /// The time of the first of them: with [`Pending::timed`], every time they set, and
    /// the time the replicas set them at (`Op::WriteAt`).
    time: Timestamp,
    /// Sent at their own time ([`Gather::at_its_time`]): the file is this mount's alone.
    timed: bool,
    /// `attr`'s `used` is exact: the file was dense (`used == size`) and no write left a
    /// hole (the replicas store exactly the bytes written: `byzfs_fs::data`).
    dense: bool,
}

impl Pending {
    /// The file's attributes once they are applied, as far as the mount can tell.
    pub fn attr(&self) -> Option<&Attr> {
        self.attr.as_ref()
    }

    /// The operation that applies them (at their own time, if [`Pending::timed`]).
    pub fn into_op(self) -> (Credentials, Op) {
        let fh = self.fh;
        let extents = self.extents;
        let (timed, time) = (self.timed, self.time);
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
        let op = if timed {
            Op::WriteAt {
                time,
                write: Box::new(op),
            }
        } else {
            op
        };
        (self.cred, op)
    }
}

/// Most files with writes held back at once: a write to another file first sends them
/// all, in as few batches as they fit. 31: with a creation each (write-back, `dirs.rs`),
/// they fill one batch of [`MAX_BATCH`] operations with the one that made the room.
/// Across sites each send is an agreement round (60 ms of delay alone at `wan`): Andrew-Tcl's
/// copy there sent one per 16 files (docs/BENCHMARKS.md "Across sites, the working set
/// kept").
pub const MAX_FILES: usize = (MAX_BATCH - 2) / 2;

/// The mount's write-behind state: each file's held writes apart, so that processes
/// writing different files do not send each other's writes at every write.
#[derive(Debug)]
pub struct Gather {
    /// By inode; at most [`MAX_FILES`].
    pending: HashMap<u64, Pending>,
    /// Most bytes one operation may carry.
    limit: usize,
    /// Errors of sent writes not yet reported, by inode.
    errors: HashMap<u64, Errno>,
    /// An encrypted mount's: each write is sealed in whole blocks ([`Gather::cost`]).
    sealed: bool,
    /// Files whose held writes were dropped unsent, their file removed first, and their
    /// bytes (logged at unmount).
    dropped: (u64, u64),
    /// Whether writes are held back at all (not `--sync-writes`).
    holds_back: bool,
}

/// What one more operation in a batch costs besides its data (handle, offset, lengths).
const FRAMING: usize = 128;
/// The block an encrypted mount seals data in (`byzfs_crypt::file`).
const SEALED_BLOCK: usize = 4096;

impl Gather {
    /// Gathers at most `limit` bytes per operation.
    pub fn new(limit: usize) -> Gather {
        Gather {
            pending: HashMap::new(),
            limit,
            errors: HashMap::new(),
            sealed: false,
            dropped: (0, 0),
            holds_back: true,
        }
    }

    /// For a mount that sends each write as it comes (`--sync-writes`).
    pub fn sending_each(mut self) -> Gather {
        self.holds_back = false;
        self
    }

    /// Whether writes are held back at all.
    pub fn holds_back(&self) -> bool {
        self.holds_back
    }

    /// For an encrypted mount, whose writes are sealed in whole blocks.
    pub fn sealed(mut self) -> Gather {
        self.sealed = true;
        self
    }

    /// What `p` counts against [`Gather::limit`] in a batch of several files' writes:
    /// its data and framing; sealed, its whole blocks and the two a write's unaligned ends
    /// may add (`session.rs` leaves those two out of the limit for one write only).
    pub fn cost(&self, p: &Pending) -> usize {
        let framing = FRAMING + 16 * p.extents.len();
        if self.sealed {
            (p.bytes.div_ceil(SEALED_BLOCK) + 2 * p.extents.len()) * SEALED_BLOCK + framing
        } else {
            p.bytes + framing
        }
    }

    /// Drops `ino`'s held writes unsent (its file was removed first), and its error.
    pub fn discard(&mut self, ino: u64) {
        if let Some(p) = self.pending.remove(&ino) {
            self.dropped.0 += 1;
            self.dropped.1 += p.bytes as u64;
        }
        self.errors.remove(&ino);
    }

    /// Files whose held writes were dropped unsent, and their bytes.
    pub fn dropped(&self) -> (u64, u64) {
        self.dropped
    }

    /// Whether a write of `len` bytes may be held back at all (one that alone fills an
    /// operation goes at once).
    pub fn may_hold(&self, len: usize) -> bool {
        len > 0 && len <= self.limit
    }

    /// Whether a write of `len` bytes to `fh` by `cred` can join the file's pending
    /// writes: same file handle, same caller, room left, no attribute change held after
    /// them. `true` when nothing is pending for the file.
    pub fn joins(&self, fh: FileHandle, cred: &Credentials, len: usize) -> bool {
        match self.pending.get(&fh.ino) {
            None => true,
            Some(p) => {
                p.fh == fh && p.cred == *cred && p.sets.is_empty() && p.bytes + len <= self.limit
            }
        }
    }

    /// Before holding a write to `ino`: whether [`MAX_FILES`] files have writes held and
    /// `ino` is not among them (the held ones go first).
    pub fn full_without(&self, ino: u64) -> bool {
        !self.pending.contains_key(&ino) && self.pending.len() >= MAX_FILES
    }

    /// Most bytes one operation carries (and one batch of held writes).
    pub fn limit(&self) -> usize {
        self.limit
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
        let p = self.pending.entry(fh.ino).or_insert_with(|| Pending {
            fh,
            cred: cred.clone(),
            extents: Vec::new(),
            bytes: 0,
            sets: Vec::new(),
            attr: base.filter(|a| a.fh == fh).cloned(),
            since: Instant::now(),
            time: now,
            timed: false,
            dense: base.is_some_and(|a| a.used == a.size),
        });
        p.bytes += data.len();
        let now = if p.timed { p.time } else { now };
        if let Some(a) = &mut p.attr {
            if offset > a.size {
                p.dense = false;
            }
            // `offset + len` fits: the mount holds only writes that end within the
            // largest file size.
            a.size = a.size.max(offset.saturating_add(data.len() as u64));
            if p.dense {
                a.used = a.size;
            }
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
        let p = self.pending.get_mut(&fh.ino)?;
        if p.fh != fh || p.cred != *cred || p.sets.len() >= MAX_SETATTRS || set.size.is_some() {
            return None;
        }
        let now = if p.timed { p.time } else { now };
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

    /// `ino`'s held writes go at the time of the first of them (`Op::WriteAt`), which
    /// every time they set takes, so [`Gather::expected`] is what the replicas will say:
    /// for a file no other mount changes meanwhile (`held_files.rs`, `mine.rs`).
    pub fn at_its_time(&mut self, ino: u64) {
        if let Some(p) = self.pending.get_mut(&ino) {
            if !p.timed {
                p.timed = true;
                if let Some(a) = &mut p.attr {
                    a.mtime = p.time;
                    a.ctime = p.time;
                }
            }
        }
    }

    /// The attributes `ino` will have once its held writes and changes are applied,
    /// exactly, if the mount can tell: they go at their own time
    /// ([`Gather::at_its_time`]), its size and stored bytes are known (no hole), and no
    /// set-user-ID or set-group-ID bit is there for a write to clear.
    pub fn expected(&self, ino: u64) -> Option<&Attr> {
        let p = self.pending.get(&ino)?;
        let a = p.attr.as_ref()?;
        (p.timed && p.dense && a.mode & 0o6000 == 0).then_some(a)
    }

    /// Every file's pending writes, to be sent now, oldest first.
    pub fn take_all(&mut self) -> Vec<Pending> {
        let mut all: Vec<Pending> = self.pending.drain().map(|(_, p)| p).collect();
        all.sort_by_key(|p| p.since);
        all
    }

    /// The pending writes to `ino`, if any, to be sent now.
    pub fn take_file(&mut self, ino: u64) -> Option<Pending> {
        self.pending.remove(&ino)
    }

    /// The pending writes older than [`MAX_AGE`], oldest first.
    pub fn take_stale(&mut self) -> Vec<Pending> {
        let stale: Vec<u64> = self
            .pending
            .values()
            .filter(|p| p.since.elapsed() >= MAX_AGE)
            .map(|p| p.fh.ino)
            .collect();
        let mut out: Vec<Pending> = stale
            .into_iter()
            .filter_map(|ino| self.pending.remove(&ino))
            .collect();
        out.sort_by_key(|p| p.since);
        out
    }

    /// Whether writes to `ino` are held back.
    pub fn holds(&self, ino: u64) -> bool {
        self.pending.contains_key(&ino)
    }

    /// The inodes with writes held back.
    pub fn inos(&self) -> impl Iterator<Item = u64> + '_ {
        self.pending.keys().copied()
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

    /// A file no other mount changes: its held writes go at the time of the first, which
    /// every time they set takes, so the attributes the mount answers with are the ones
    /// the replicas will give; a hole makes its stored bytes unknown.
    #[test]
    fn writes_at_their_own_time_say_the_attributes_they_will_give() {
        let me = Credentials::user(1000, 100);
        let t1 = Timestamp { secs: 60, nsecs: 7 };
        let mut g = Gather::new(1 << 20);
        g.hold(fh(5), &me, 0, b"abcd", Some(&attr(5, 0o644)), T0);
        assert_eq!(g.expected(5), None, "not at its own time");
        g.at_its_time(5);
        g.hold(fh(5), &me, 4, b"ef", None, t1);
        let set = SetAttr {
            mode: Some(0o600),
            ..SetAttr::default()
        };
        let held = g.hold_set(fh(5), &me, &set, t1);
        let mut want = attr(5, 0o600);
        (want.size, want.used, want.mtime, want.ctime) = (6, 6, T0, T0);
        assert_eq!(held.as_ref(), Some(&want));
        assert_eq!(g.expected(5), Some(&want));
        let (_, op) = g.take_file(5).map(Pending::into_op).unwrap();
        let Op::WriteAt { time, write } = op else {
            panic!("{op:?}");
        };
        assert_eq!(time, T0);
        assert!(matches!(*write, Op::WriteSetAttr { ref sets, .. } if sets == &[set]));
        // A write past the end leaves a hole: the stored bytes are the replicas' to say.
        g.hold(fh(6), &me, 10, b"x", Some(&attr(6, 0o644)), T0);
        g.at_its_time(6);
        assert_eq!(g.expected(6), None);
        // So does a file that was sparse already, or set-user-ID (a write clears it).
        let mut sparse = attr(7, 0o644);
        sparse.used = 0;
        g.hold(fh(7), &me, 0, b"x", Some(&sparse), T0);
        g.hold(fh(8), &me, 0, b"x", Some(&attr(8, 0o4755)), T0);
        g.at_its_time(7);
        g.at_its_time(8);
        assert_eq!((g.expected(7), g.expected(8)), (None, None));
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
        let (_, op) = g.take_file(5).unwrap().into_op();
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
        g.take_file(5);
        g.hold(fh(5), &me, 0, b"x", Some(&attr(5, 0o4755)), T0);
        assert!(g.hold_set(fh(5), &me, &times, T0).is_none());
        g.take_file(5);
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
        let (cred, op) = g.take_file(5).unwrap().into_op();
        assert_eq!(cred, me);
        assert_eq!(
            op,
            Op::Write {
                fh: fh(5),
                offset: 0,
                data: b"abcdef".to_vec()
            }
        );
        assert!(g.take_file(5).is_none() && g.take_all().is_empty());

        g.hold(fh(5), &me, 100, b"x", None, T0);
        g.hold(fh(5), &me, 0, b"y", None, T0);
        let (_, op) = g.take_file(5).unwrap().into_op();
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
        assert!(
            !g.joins(
                FileHandle {
                    ino: 5,
                    generation: 2
                },
                &me,
                1
            ),
            "another generation"
        );
        assert!(!g.joins(fh(5), &other, 1), "another caller");
        assert!(!g.joins(fh(5), &me, 3), "over the limit");
        assert!(g.joins(fh(5), &me, 2));
        assert!(g.may_hold(10) && !g.may_hold(11) && !g.may_hold(0));
        assert!(g.holds(5) && !g.holds(6));
        assert!(g.take_stale().is_empty(), "younger than MAX_AGE");
    }

    /// Each file's writes are held apart: another file's write joins its own, and the
    /// oldest file's go when [`MAX_FILES`] files have some.
    #[test]
    fn each_file_holds_its_own_writes() {
        let me = Credentials::user(1000, 100);
        let other = Credentials::user(1001, 100);
        let mut g = Gather::new(10);
        g.hold(fh(5), &me, 0, b"ab", None, T0);
        assert!(g.joins(fh(6), &other, 4), "another file, another caller");
        g.hold(fh(6), &other, 0, b"cd", None, T0);
        g.hold(fh(5), &me, 2, b"ef", None, T0);
        assert_eq!(
            g.take_file(5).map(Pending::into_op),
            Some((
                me.clone(),
                Op::Write {
                    fh: fh(5),
                    offset: 0,
                    data: b"abef".to_vec()
                }
            ))
        );
        assert!(g.holds(6) && !g.holds(5));
        for ino in 7..6 + MAX_FILES as u64 {
            assert!(!g.full_without(ino), "room for {ino}");
            g.hold(fh(ino), &me, 0, b"x", None, T0);
        }
        assert!(!g.full_without(6), "6 has writes held already");
        assert!(g.full_without(99));
        let all: Vec<u64> = g.take_all().iter().map(|p| p.fh.ino).collect();
        assert_eq!(
            all,
            (6..6 + MAX_FILES as u64).collect::<Vec<_>>(),
            "oldest first"
        );
    }

    /// What must go before an operation: its own files' writes, or everyone's.
    #[test]
    fn an_operation_on_files_needs_only_their_writes() {
        let read = Op::Read {
            fh: fh(5),
            offset: 0,
            count: 1,
        };
        assert_eq!(needs(&read), Some(vec![5]));
        let copy = Op::CopyRange {
            from: fh(5),
            from_offset: 0,
            to: fh(6),
            to_offset: 0,
            len: 1,
        };
        assert_eq!(needs(&copy), Some(vec![5, 6]));
        let lookup = Op::Lookup {
            dir: fh(1),
            name: b"a".to_vec(),
        };
        assert_eq!(needs(&lookup), None, "names");
        assert_eq!(needs(&Op::StatFs), None, "space");
        let unlock = Op::ReleaseLocks {
            fh: fh(5),
            owner: 1,
        };
        assert_eq!(
            needs(&unlock),
            None,
            "locks: what a lock guards may be elsewhere"
        );
        let write = |ino| Op::Write {
            fh: fh(ino),
            offset: 0,
            data: b"x".to_vec(),
        };
        assert_eq!(
            needs(&Op::Batch(vec![write(5), copy.clone()])),
            Some(vec![5, 5, 6]),
            "a batch of file operations: their files"
        );
        assert_eq!(needs(&Op::Batch(vec![write(5), lookup])), None);
        let reclaim = |file| Op::Reclaim { file };
        assert_eq!(needs(&reclaim(Some(fh(7)))), Some(vec![7]));
        assert_eq!(needs(&reclaim(None)), Some(vec![]), "the queue's oldest");
        assert_eq!(needs(&Op::RenewLease), Some(vec![]));
    }

    /// A batch of several files' writes counts their data and framing; sealed, whole
    /// blocks and two more per extent. A removed file's writes are dropped and counted.
    #[test]
    fn batches_count_what_writes_cost_and_removed_files_drop_theirs() {
        let me = Credentials::user(1000, 100);
        let mut plain = Gather::new(1 << 20);
        let mut sealed = Gather::new(1 << 20).sealed();
        for g in [&mut plain, &mut sealed] {
            g.hold(fh(5), &me, 0, &[1; 100], None, T0);
            g.hold(fh(5), &me, 4096, &[2; 10], None, T0);
            g.hold(fh(6), &me, 0, &[3; 5000], None, T0);
        }
        let costs =
            |g: &mut Gather| -> Vec<usize> { g.take_all().iter().map(|p| g.cost(p)).collect() };
        assert_eq!(costs(&mut plain), vec![110 + 128 + 32, 5000 + 128 + 16]);
        assert_eq!(
            costs(&mut sealed),
            vec![(1 + 4) * 4096 + 128 + 32, (2 + 2) * 4096 + 128 + 16]
        );
        plain.hold(fh(7), &me, 0, &[1; 300], None, T0);
        plain.failed(7, Errno::ENOSPC);
        plain.discard(7);
        plain.discard(8);
        assert_eq!(plain.dropped(), (1, 300));
        assert!(!plain.holds(7) && plain.error(7).is_none());
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
