//! Record locks shared by every client: `fcntl(2)` `F_GETLK`/`F_SETLK`/`F_SETLKW`, and
//! `flock(2)`, which the mount sends as whole-file locks (as Linux's NFS client does, so
//! an `flock` and an `fcntl` lock of one file conflict here, unlike on a local disk).
//!
//! **State.** Each inode's locks are one record in the inode's partition (so digests,
//! checkpoints and state transfer cover them), freed with the inode. A lock belongs to a
//! [`LockOwner`]: the client, as the replication library authenticated it, and the lock
//! owner the client's kernel named (a process's file table for `fcntl`, an open file for
//! `flock`). Semantics are POSIX's, decided identically at every replica: a read lock
//! conflicts only with another owner's write lock, a write lock with any other owner's
//! lock; an owner's new lock replaces its own locks on the range (split around it), and
//! its adjacent or overlapping locks of one kind merge.
//!
//! **Leases.** A client that dies holding locks must not block the others for ever. Each
//! client that locks has a lease, renewed by each of its lock operations and by
//! [`crate::Op::RenewLease`] (the mount sends one every 10 s while it holds locks). A
//! lock counts only while its client's lease is current — renewed within
//! [`crate::FsConfig::lock_lease`] of the operation's agreed time, never a replica's clock —
//! and was granted under the lease's present epoch. A client that comes back after its lease
//! lapsed starts a new epoch, so every lock it held before is gone, even those nobody took
//! meanwhile (otherwise a lock broken and released by another client would come back); the
//! operation's reply says `lapsed`, and the mount logs that its locks were lost (as an NFSv4
//! client does when its lease expires).
//!
//! **Deadlocks** between blocking requests of owners of any clients are detected in
//! [`crate::deadlock`]. **Not here:** mandatory locks (Linux dropped them in 5.15).

use crate::encoding::{decode, encode};
use crate::errno::{Errno, Res};
use crate::exec::Exec;
use crate::handle::FileHandle;
use crate::key;
use crate::op::Reply;
use crate::store::Store;
use serde::{Deserialize, Serialize};

/// Most locks one file may carry (`ENOLCK` beyond), so one record stays small.
pub const MAX_LOCKS_PER_FILE: usize = 1024;
/// The last byte offset a lock can cover: a lock "to the end of the file" ends here
/// (Linux's `OFFSET_MAX`).
pub const LOCK_END_MAX: u64 = i64::MAX as u64;

/// A lock's kind.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum LockKind {
    /// Shared (`F_RDLCK`, `LOCK_SH`).
    Read,
    /// Exclusive (`F_WRLCK`, `LOCK_EX`).
    Write,
}

/// Who holds a lock.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct LockOwner {
    /// The client, as authenticated by the replication library.
    pub client: u64,
    /// The lock owner its kernel named.
    pub owner: u64,
}

/// A lock change one owner asks for: a `kind` lock on bytes `start..=end` of `fh`
/// (`None`: unlock them). Postcard encodes `Op::SetLk(LockReq)` as it encoded the struct
/// variant with these fields before, so stored logs still decode.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
pub struct LockReq {
    /// The file.
    pub fh: FileHandle,
    /// The lock owner (on the asking client).
    pub owner: u64,
    /// The lock to take; `None` to unlock.
    pub kind: Option<LockKind>,
    /// First byte.
    pub start: u64,
    /// Last byte, inclusive ([`LOCK_END_MAX`]: to the end of the file).
    pub end: u64,
    /// The locking process's id (reported by `F_GETLK`).
    pub pid: u32,
}

/// A lock as `F_GETLK` reports it: the first lock of another owner that conflicts.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
pub struct LockInfo {
    /// Its kind.
    pub kind: LockKind,
    /// First byte.
    pub start: u64,
    /// Last byte, inclusive ([`LOCK_END_MAX`]: to the end of the file).
    pub end: u64,
    /// The holder's process id, on its own client's machine.
    pub pid: u32,
    /// The holder's client (a mount reports the pid only for its own processes).
    pub client: u64,
}

/// One lock of one file, as the replicas store it and as a mount holding the file's
/// delegation ([`crate::delegation`]) keeps it.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
pub struct Held {
    /// Its owner.
    pub owner: LockOwner,
    /// The owner's lease epoch when it was granted.
    pub epoch: u64,
    /// Its kind.
    pub kind: LockKind,
    /// First byte.
    pub start: u64,
    /// Last byte, inclusive.
    pub end: u64,
    /// The locking process's id, on its client's machine.
    pub pid: u32,
}

impl Held {
    fn overlaps(&self, start: u64, end: u64) -> bool {
        self.start <= end && start <= self.end
    }

    /// As `F_GETLK` reports it.
    pub fn info(&self) -> LockInfo {
        LockInfo {
            kind: self.kind,
            start: self.start,
            end: self.end,
            pid: self.pid,
            client: self.owner.client,
        }
    }
}

/// What a lock change starts from ([`Exec::begin_change`]).
pub(crate) struct Change {
    /// The asking owner.
    pub me: LockOwner,
    /// The caller's lease epoch, renewed.
    pub epoch: u64,
    /// Whether the lease had lapsed before.
    pub lapsed: bool,
    /// The file's locks that count.
    pub locks: Vec<Held>,
}

/// A client's lease.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) struct Lease {
    pub(crate) epoch: u64,
    pub(crate) renewed_us: u64,
}

/// Whether `a` and `b`, of different owners, cannot be held together.
fn conflicts(a: LockKind, b: LockKind) -> bool {
    a == LockKind::Write || b == LockKind::Write
}

/// `EINVAL` unless `start..=end` is a range a lock can cover.
pub(crate) fn check_range(start: u64, end: u64) -> Result<(), Errno> {
    if start > end || end > LOCK_END_MAX {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// The first lock in `locks` of another owner than `me` that conflicts with a `kind` lock
/// on `start..=end` (what `F_GETLK` reports).
pub fn first_conflict(
    locks: &[Held],
    me: LockOwner,
    kind: LockKind,
    start: u64,
    end: u64,
) -> Option<&Held> {
    locks
        .iter()
        .find(|h| h.owner != me && h.overlaps(start, end) && conflicts(h.kind, kind))
}

/// `locks` after `me` takes a `kind` lock on `start..=end` (`None`: unlocks the range) under
/// lease epoch `epoch`: POSIX semantics (the owner's locks on the range are replaced, split
/// around it, and its adjacent locks of one kind merge). `EAGAIN` if another owner's lock
/// conflicts, `EINVAL` for a range no lock can cover, `ENOLCK` beyond
/// [`MAX_LOCKS_PER_FILE`].
pub fn apply(
    locks: Vec<Held>,
    me: LockOwner,
    epoch: u64,
    kind: Option<LockKind>,
    (start, end): (u64, u64),
    pid: u32,
) -> Result<Vec<Held>, Errno> {
    check_range(start, end)?;
    if let Some(k) = kind {
        if first_conflict(&locks, me, k, start, end).is_some() {
            return Err(Errno::EAGAIN);
        }
    }
    let mut next = Vec::with_capacity(locks.len() + 2);
    for h in locks {
        if h.owner != me || !h.overlaps(start, end) {
            next.push(h);
            continue;
        }
        // The part of the owner's lock outside the range stays, split around it.
        if h.start < start {
            next.push(Held {
                end: start - 1,
                ..h
            });
        }
        if h.end > end {
            next.push(Held {
                start: end + 1,
                ..h
            });
        }
    }
    if let Some(kind) = kind {
        next.push(Held {
            owner: me,
            epoch,
            kind,
            start,
            end,
            pid,
        });
    }
    let next = merge(next);
    if next.len() > MAX_LOCKS_PER_FILE {
        return Err(Errno::ENOLCK);
    }
    Ok(next)
}

impl<S: Store + ?Sized> Exec<'_, '_, S> {
    fn lease_us(&self) -> u64 {
        u64::try_from(self.cfg.lock_lease.as_micros()).unwrap_or(u64::MAX)
    }

    pub(crate) fn load_lease(&self, client: u64) -> Res<Option<Lease>> {
        match self.txn.get(&key::lease(client))? {
            Some(b) => Ok(Some(decode(&b)?)),
            None => Ok(None),
        }
    }

    /// Lock owner `owner` of the calling client.
    pub(crate) fn owner(&self, owner: u64) -> LockOwner {
        LockOwner {
            client: self.client,
            owner,
        }
    }

    pub(crate) fn current(&self, lease: Lease) -> bool {
        lease.renewed_us.saturating_add(self.lease_us()) >= self.sb.clock_us
    }

    /// Renews the caller's lease; `true` if it had lapsed (a new epoch begins, so every lock
    /// it held is gone). Returns the epoch now current too.
    pub(crate) fn renew(&mut self) -> Res<(u64, bool)> {
        let client = self.client;
        let (lease, lapsed) = match self.load_lease(client)? {
            Some(l) if self.current(l) => (l, false),
            Some(l) => (
                Lease {
                    epoch: l.epoch + 1,
                    ..l
                },
                true,
            ),
            None => (Lease::default(), false),
        };
        let lease = Lease {
            renewed_us: self.sb.clock_us,
            ..lease
        };
        self.txn.put(key::lease(client), encode(&lease));
        if lapsed {
            // Its delegations and waiting requests went with its locks: nothing is left to
            // give back, and nobody waits.
            self.txn.delete(key::recalls(client));
            self.drop_waits();
        }
        Ok((lease.epoch, lapsed))
    }

    /// `ino`'s locks that still count (their owners' leases current, same epoch).
    pub(crate) fn valid_locks(&self, ino: u64) -> Res<Vec<Held>> {
        let stored: Vec<Held> = match self.txn.get(&key::locks(ino))? {
            Some(b) => decode(&b)?,
            None => return Ok(Vec::new()),
        };
        let mut leases: Vec<(u64, Option<Lease>)> = Vec::new();
        let mut out = Vec::with_capacity(stored.len());
        for h in stored {
            let lease = match leases.iter().find(|(c, _)| *c == h.owner.client) {
                Some((_, l)) => *l,
                None => {
                    let l = self.load_lease(h.owner.client)?;
                    leases.push((h.owner.client, l));
                    l
                }
            };
            if lease.is_some_and(|l| l.epoch == h.epoch && self.current(l)) {
                out.push(h);
            }
        }
        Ok(out)
    }

    pub(crate) fn save_locks(&mut self, ino: u64, locks: &[Held]) {
        if locks.is_empty() {
            self.txn.delete(key::locks(ino));
        } else {
            self.txn.put(key::locks(ino), encode(&locks));
        }
    }

    pub(crate) fn lock_reply(
        &self,
        fh: FileHandle,
        conflict: Option<LockInfo>,
        lapsed: bool,
    ) -> Res<Reply> {
        let attr = self.resolve(fh)?.attr(fh.ino);
        Ok(Reply::Lock {
            conflict,
            lapsed,
            attr: Some(attr),
        })
    }

    /// `F_GETLK`: the first lock of another owner that conflicts with `kind` on
    /// `start..=end`.
    pub(crate) fn getlk(
        &mut self,
        fh: FileHandle,
        owner: u64,
        kind: LockKind,
        start: u64,
        end: u64,
    ) -> Res<Reply> {
        self.resolve(fh)?;
        check_range(start, end)?;
        if self.recall_if_delegated(fh.ino)? {
            return Ok(Reply::Recall);
        }
        let me = self.owner(owner);
        let locks = self.valid_locks(fh.ino)?;
        let conflict = first_conflict(&locks, me, kind, start, end).map(Held::info);
        self.lock_reply(fh, conflict, false)
    }

    /// `F_SETLK`: takes `kind` on `start..=end` for `owner` (`None`: unlocks the range), or
    /// `EAGAIN` if another owner's lock conflicts.
    pub(crate) fn setlk(&mut self, r: LockReq) -> Res<Reply> {
        // An unlock cannot concern another client's delegation (no one else held locks
        // when it was granted).
        let Some(c) = self.begin_change(&r, r.kind.is_some())? else {
            return Ok(Reply::Recall);
        };
        let next = apply(c.locks, c.me, c.epoch, r.kind, (r.start, r.end), r.pid)?;
        self.save_locks(r.fh.ino, &next);
        self.lock_reply(r.fh, None, c.lapsed)
    }

    /// The common start of a lock change: checks `r`'s file and range, asks another client
    /// holding the file's delegation to give it back if `recall` (`None`: answer
    /// [`Reply::Recall`]), renews the caller's lease and loads the file's valid locks.
    pub(crate) fn begin_change(&mut self, r: &LockReq, recall: bool) -> Res<Option<Change>> {
        self.resolve(r.fh)?;
        check_range(r.start, r.end)?;
        if recall && self.recall_if_delegated(r.fh.ino)? {
            return Ok(None);
        }
        let me = self.owner(r.owner);
        let (epoch, lapsed) = self.renew()?;
        let locks = self.valid_locks(r.fh.ino)?;
        Ok(Some(Change {
            me,
            epoch,
            lapsed,
            locks,
        }))
    }

    /// Drops every lock `owner` holds on `fh` (a `close` by a process, the last close of an
    /// `flock`ed file).
    pub(crate) fn release_locks(&mut self, fh: FileHandle, owner: u64) -> Res<Reply> {
        self.resolve(fh)?;
        let me = self.owner(owner);
        let locks = self.valid_locks(fh.ino)?;
        let next: Vec<Held> = locks.into_iter().filter(|h| h.owner != me).collect();
        self.save_locks(fh.ino, &next);
        self.lock_reply(fh, None, false)
    }

    /// Renews the caller's lease.
    pub(crate) fn renew_lease(&mut self) -> Res<Reply> {
        let (_, lapsed) = self.renew()?;
        Ok(Reply::Lock {
            conflict: None,
            lapsed,
            attr: None,
        })
    }

    /// Drops `ino`'s lock record (the inode is being freed).
    pub(crate) fn drop_locks(&mut self, ino: u64) {
        self.txn.delete(key::locks(ino));
        self.drop_delegation(ino);
        self.drop_dir_delegation(ino);
    }
}

/// Sorts `locks` by owner and start and merges each owner's overlapping or adjacent locks
/// of one kind (their pid and epoch become the later one's, as Linux keeps one).
fn merge(mut locks: Vec<Held>) -> Vec<Held> {
    locks.sort_by_key(|h| (h.owner, h.kind, h.start));
    let mut out: Vec<Held> = Vec::with_capacity(locks.len());
    for h in locks {
        match out.last_mut() {
            Some(p)
                if p.owner == h.owner && p.kind == h.kind && h.start <= p.end.saturating_add(1) =>
            {
                p.end = p.end.max(h.end);
                p.epoch = p.epoch.max(h.epoch);
                p.pid = h.pid;
            }
            _ => out.push(h),
        }
    }
    out.sort_by_key(|h| (h.owner, h.start));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(owner: u64, kind: LockKind, start: u64, end: u64) -> Held {
        Held {
            owner: LockOwner { client: 1, owner },
            epoch: 0,
            kind,
            start,
            end,
            pid: 7,
        }
    }

    #[test]
    fn merge_joins_adjacent_locks_of_one_kind_and_owner_only() {
        let m = merge(vec![
            held(1, LockKind::Write, 4, 7),
            held(1, LockKind::Write, 0, 3),
            held(1, LockKind::Read, 8, 9),
            held(2, LockKind::Write, 8, 9),
        ]);
        assert_eq!(
            m,
            vec![
                held(1, LockKind::Write, 0, 7),
                held(1, LockKind::Read, 8, 9),
                held(2, LockKind::Write, 8, 9),
            ]
        );
        let far = merge(vec![
            held(1, LockKind::Read, 0, LOCK_END_MAX),
            held(1, LockKind::Read, 5, 9),
        ]);
        assert_eq!(far, vec![held(1, LockKind::Read, 0, LOCK_END_MAX)]);
    }

    #[test]
    fn read_locks_share_write_locks_do_not() {
        assert!(!conflicts(LockKind::Read, LockKind::Read));
        assert!(conflicts(LockKind::Read, LockKind::Write));
        assert!(conflicts(LockKind::Write, LockKind::Read));
    }
}
