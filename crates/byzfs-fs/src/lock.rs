//! Record locks shared by every client: `fcntl(2)` `F_GETLK`/`F_SETLK`/`F_SETLKW`, and
//! `flock(2)`, which the mount sends as whole-file locks (as Linux's NFS client does, so
//! an `flock` and an `fcntl` lock of one file conflict here, unlike on a local disk).
//!
//! **State.** Each inode's locks are one record in the inode's partition (so digests,
//! checkpoints and state transfer cover them), freed with the inode. A lock belongs to a
//! [`LockOwner`]: the client, as the replication library authenticated it, and the lock
//! owner the client's kernel named (a process's file table for `fcntl`, an open file for
//! `flock`). Semantics are POSIX's, decided identically at every replica by the rules of
//! [`crate::proto::lock`].
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
use crate::exec::{misrouted, Exec};
use crate::fail::Res;
use crate::key;
use crate::proto::handle::FileHandle;
use crate::proto::lock::{
    apply, check_range, first_conflict, Held, LockInfo, LockKind, LockOwner, LockReq,
};
use crate::proto::op::Op;
use crate::proto::reply::Reply;
use crate::store::Store;
use serde::{Deserialize, Serialize};

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

impl<S: Store + ?Sized> Exec<'_, '_, S> {
    /// Runs an operation of the locks family
    /// ([`Family::Locks`](crate::proto::family::Family::Locks)): these, delegations
    /// ([`crate::delegation`]) and blocking requests ([`crate::deadlock`]).
    pub(crate) fn run_locks(&mut self, op: Op) -> Res<Reply> {
        match op {
            Op::GetLk {
                fh,
                owner,
                kind,
                start,
                end,
            } => self.getlk(fh, owner, kind, start, end),
            Op::SetLk(r) => self.setlk(r),
            Op::ReleaseLocks { fh, owner } => self.release_locks(fh, owner),
            Op::RenewLease => self.renew_lease(),
            Op::LockDelegate(r) => self.lock_delegate(r),
            Op::ReturnDelegation { fh, locks } => self.return_delegation(fh, locks),
            Op::Recalls => self.recalls(),
            Op::SetLkWait(r) => self.setlk_wait(r),
            Op::CancelWait { fh, owner } => self.cancel_wait(fh, owner),
            Op::DelegateFile { file } => self.delegate_file(file),
            Op::ReturnFile { file } => self.return_file(file),
            other => misrouted(&other),
        }
    }

    pub(crate) fn lease_us(&self) -> u64 {
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
        self.drop_file_delegation(ino);
    }
}
