//! Deadlock detection for blocking POSIX locks (`F_SETLKW`) between lock owners of any
//! clients, as Linux detects it between processes of one machine: a request that would
//! wait for an owner that waits, directly or through others, for the requester fails with
//! `EDEADLK` instead of waiting for ever.
//!
//! * **Waits-for edges.** A blocking request is [`crate::Op::SetLkWait`]. If another
//!   owner's lock conflicts, the replicas record that the requester waits for that lock's
//!   owner (an edge in the requesting client's record, `11 ‖ client`, placed with its
//!   lease) and answer [`crate::Reply::Lock`] with the conflict; the client tries again
//!   later, which refreshes the edge. A grant removes it, and so does
//!   [`crate::Op::CancelWait`], which the client sends when the waiting process gets a
//!   signal.
//! * **Detection.** Before recording an edge, the replicas follow the edges from the
//!   holder (what it waits for, what that owner waits for, …, at most [`STEPS_MAX`]
//!   owners, as Linux bounds its walk). Reaching the requester means a cycle: the
//!   request gets [`crate::Reply::Deadlock`] (the client answers `EDEADLK`) and records no
//!   edge, so the others keep waiting as on Linux, where only the request that closes the
//!   cycle fails.
//! * **Validity.** An edge counts only while its client's lease is current and it was
//!   refreshed within [`WAIT_TTL`] of agreed time (a client retries at least every
//!   200 ms): a client that dies or stops retrying without cancelling cannot make others
//!   fail.
//! * **Scope.** Only `fcntl` locks wait this way: `flock` callers do not expect `EDEADLK`,
//!   and Linux does not detect deadlocks between them (the mount sends their blocking
//!   requests as [`crate::Op::SetLk`] retries). Like Linux, only the first conflicting
//!   lock's owner is followed. One difference: FUSE does not tell open-file-description
//!   locks (`F_OFD_SETLKW`) from process locks, so a cycle of OFD waits gets `EDEADLK`
//!   here, where Linux lets it hang.

use crate::encoding::{decode, encode};
use crate::exec::Exec;
use crate::fail::Res;
use crate::key;
use crate::lock::Change;
use crate::proto::errno::Errno;
use crate::proto::handle::FileHandle;
use crate::proto::lock::{apply, first_conflict, Held, LockOwner, LockReq};
use crate::proto::reply::Reply;
use crate::store::Store;
use core::time::Duration;
use serde::{Deserialize, Serialize};

/// How long an edge counts after the waiting client last refreshed it, in agreed time.
pub const WAIT_TTL: Duration = Duration::from_secs(2);
/// Most owners the walk from the holder visits (Linux: `MAX_DEADLK_ITERATIONS`, 10).
pub const STEPS_MAX: usize = 64;
/// Most waiting requests one client's record holds (`ENOLCK` beyond).
pub const WAITS_MAX: usize = 1024;

/// One waiting request: `owner` (of the record's client) waits on file `ino` for `on`.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Wait {
    pub(crate) owner: u64,
    pub(crate) ino: u64,
    pub(crate) on: LockOwner,
    /// Agreed time of the last attempt, µs.
    pub(crate) at_us: u64,
}

impl<S: Store + ?Sized> Exec<'_, '_, S> {
    fn load_waits(&self, client: u64) -> Res<Vec<Wait>> {
        match self.txn.get(&key::waits(client))? {
            Some(b) => Ok(decode(&b)?),
            None => Ok(Vec::new()),
        }
    }

    fn save_waits(&mut self, client: u64, waits: &[Wait]) {
        if waits.is_empty() {
            self.txn.delete(key::waits(client));
        } else {
            self.txn.put(key::waits(client), encode(&waits));
        }
    }

    /// `client`'s edges that still count.
    fn valid_waits(&self, client: u64) -> Res<Vec<Wait>> {
        let waits = self.load_waits(client)?;
        if waits.is_empty() || !self.load_lease(client)?.is_some_and(|l| self.current(l)) {
            return Ok(Vec::new());
        }
        let ttl = u64::try_from(WAIT_TTL.as_micros()).unwrap_or(u64::MAX);
        let now = self.sb.clock_us;
        Ok(waits
            .into_iter()
            .filter(|w| w.at_us.saturating_add(ttl) >= now)
            .collect())
    }

    /// Whether `from` waits, through valid edges, for `target`.
    fn waits_for(&self, from: LockOwner, target: LockOwner) -> Res<bool> {
        let mut seen = vec![from];
        let mut next = vec![from];
        let mut by_client: Vec<(u64, Vec<Wait>)> = Vec::new();
        while let Some(cur) = next.pop() {
            if cur == target {
                return Ok(true);
            }
            let edges = match by_client.iter().find(|(c, _)| *c == cur.client) {
                Some((_, w)) => w.clone(),
                None => {
                    let w = self.valid_waits(cur.client)?;
                    by_client.push((cur.client, w.clone()));
                    w
                }
            };
            for w in edges.iter().filter(|w| w.owner == cur.owner) {
                if !seen.contains(&w.on) {
                    if seen.len() >= STEPS_MAX {
                        return Ok(false);
                    }
                    seen.push(w.on);
                    next.push(w.on);
                }
            }
        }
        Ok(false)
    }

    /// Replaces the caller's edge for (`owner`, `ino`) by `on` (`None`: removes it).
    fn set_wait(&mut self, owner: u64, ino: u64, on: Option<LockOwner>) -> Res<()> {
        let client = self.client;
        if on.is_none() && self.txn.get(&key::waits(client))?.is_none() {
            return Ok(());
        }
        // Stale edges are dropped on the way.
        let mut waits = self.valid_waits(client)?;
        waits.retain(|w| !(w.owner == owner && w.ino == ino));
        if let Some(on) = on {
            if waits.len() >= WAITS_MAX {
                return Err(Errno::ENOLCK.into());
            }
            waits.push(Wait {
                owner,
                ino,
                on,
                at_us: self.sb.clock_us,
            });
        }
        self.save_waits(client, &waits);
        Ok(())
    }

    /// `F_SETLKW` of a POSIX owner (see the module docs): granted, busy (the conflict in
    /// the reply; an edge recorded), or a deadlock.
    pub(crate) fn setlk_wait(&mut self, r: LockReq) -> Res<Reply> {
        let (fh, owner, (start, end)) = (r.fh, r.owner, (r.start, r.end));
        let Some(kind) = r.kind else {
            return Err(Errno::EINVAL.into());
        };
        let Some(Change {
            me,
            epoch,
            lapsed,
            locks,
        }) = self.begin_change(&r, true)?
        else {
            return Ok(Reply::Recall);
        };
        let holder = first_conflict(&locks, me, kind, start, end).copied();
        let Some(holder) = holder else {
            let next = apply(locks, me, epoch, Some(kind), (start, end), r.pid)?;
            self.save_locks(fh.ino, &next);
            self.set_wait(owner, fh.ino, None)?;
            return self.lock_reply(fh, None, lapsed);
        };
        if self.waits_for(holder.owner, me)? {
            self.set_wait(owner, fh.ino, None)?;
            return Ok(Reply::Deadlock { lapsed });
        }
        self.set_wait(owner, fh.ino, Some(holder.owner))?;
        self.lock_reply(fh, Some(Held::info(&holder)), lapsed)
    }

    /// The caller's `owner` no longer waits on `fh` (its process got a signal).
    pub(crate) fn cancel_wait(&mut self, fh: FileHandle, owner: u64) -> Res<Reply> {
        self.set_wait(owner, fh.ino, None)?;
        Ok(Reply::Lock {
            conflict: None,
            lapsed: false,
            attr: None,
        })
    }

    /// Forgets every edge of the caller (its lease lapsed).
    pub(crate) fn drop_waits(&mut self) {
        self.txn.delete(key::waits(self.client));
    }
}
