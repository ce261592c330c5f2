//! Record locks as the protocol carries them, and the rules that decide them: POSIX's, the
//! same at every replica and at a mount that holds a file's delegation and decides its
//! locks itself (`byzfs-fuse`'s `delegations.rs`). How the replicas keep locks, their
//! leases and their delegations is [`crate::lock`]'s.
//!
//! A read lock conflicts only with another owner's write lock, a write lock with any other
//! owner's lock; an owner's new lock replaces its own locks on the range (split around it),
//! and its adjacent or overlapping locks of one kind merge.

use super::errno::Errno;
use super::handle::FileHandle;
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

/// A lock a client holding a file's delegation reports when it gives it back.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
pub struct Returned {
    /// The lock owner on that client.
    pub owner: u64,
    /// Its kind.
    pub kind: LockKind,
    /// First byte.
    pub start: u64,
    /// Last byte, inclusive.
    pub end: u64,
    /// The locking process's id.
    pub pid: u32,
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
