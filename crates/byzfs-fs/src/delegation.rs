//! Lock delegations: one client keeps a file's record locks itself (NFSv4's delegations,
//! for locks only), so that a program taking and dropping many locks on a file no other
//! client locks (SQLite's journal protocol takes about nine per transaction) costs no
//! round trip per lock.
//!
//! * **Grant.** [`crate::Op::LockDelegate`] is an `F_SETLK` that also asks for the file's
//!   delegation. It is granted when the lock is, if no other client holds a valid lock on
//!   the file or its delegation; the reply ([`crate::Reply::Delegated`]) carries the
//!   client's own locks on the file, which it then keeps and changes locally.
//! * **Validity.** A delegation counts only while its holder's lease is current and was
//!   granted under the lease's present epoch, as its locks do ([`crate::lock`]): a client
//!   that dies holding one stops blocking the others when its lease lapses.
//! * **Recall.** Another client's `GetLk`, `SetLk` (taking a lock) or `LockDelegate` on a
//!   delegated file gets [`crate::Reply::Recall`] instead of an answer (it tries again
//!   shortly), and the file is added to the holder's recall list. The holder polls that
//!   list with the read-only [`crate::Op::Recalls`] while it holds delegations, and gives
//!   each recalled file back with [`crate::Op::ReturnDelegation`], which installs the locks
//!   it holds on it now at the replicas. From then on the file's locks are decided by the
//!   replicas again, the recaller's among them.
//! * **Revocation.** A holder that renews its lease but does not give a recalled delegation
//!   back would make the others wait for ever. The first recall stores its agreed time in
//!   the record; [`REVOKED_AFTER_LEASES`] leases later the record no longer counts, so the
//!   others' operations run, and for as long again the holder may not take it back (the
//!   same for directory and file delegations). The holder learns it at its give-back
//!   (`ENOLCK`); what it answered early meanwhile fails then, or at the replicas.
//! * **Data.** While a client holds a file's delegation no other client can lock the file,
//!   so its programs' locks need not revalidate the file's cached data; a program that
//!   writes a file without locks gets close-to-open consistency only, as without
//!   delegations.

use crate::encoding::{decode, encode};
use crate::exec::Exec;
use crate::fail::Res;
use crate::key;
use crate::proto::attr::Attr;
use crate::proto::errno::Errno;
use crate::proto::handle::FileHandle;
use crate::proto::lock::{self, Held, LockOwner, LockReq, Returned, MAX_LOCKS_PER_FILE};
use crate::proto::reply::Reply;
use crate::store::Store;
use serde::{Deserialize, Serialize};

/// Most files one client's recall list holds; a longer list is not kept (a client with
/// that many delegations recalled at once gets the rest at its next poll).
pub const MAX_RECALLS: usize = 256;

/// How many lock leases after its first recall a delegation stops counting if not given
/// back (an honest holder gives it back within a recall poll; across slow links its
/// write-back may take a while first).
pub const REVOKED_AFTER_LEASES: u64 = 2;

/// Who holds a file's delegation.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Delegation {
    pub(crate) client: u64,
    /// The holder's lease epoch when it was granted.
    pub(crate) epoch: u64,
    /// The agreed time of its first recall (µs).
    pub(crate) recalled_us: Option<u64>,
}

impl<S: Store + ?Sized> Exec<'_, '_, S> {
    /// `ino`'s delegation, if its holder's lease still covers it.
    fn valid_delegation(&self, ino: u64) -> Res<Option<Delegation>> {
        self.valid_record(&key::delegation(ino))
    }

    /// The delegation stored under `key` (a file's or a directory's), if its holder's lease
    /// still covers it — current, and granted under its present epoch — and it was not
    /// recalled more than [`REVOKED_AFTER_LEASES`] leases ago.
    pub(crate) fn valid_record(&self, key: &[u8]) -> Res<Option<Delegation>> {
        let Some(d) = self.stored_record(key)? else {
            return Ok(None);
        };
        let valid = self
            .load_lease(d.client)?
            .is_some_and(|l| l.epoch == d.epoch && self.current(l))
            && !self.revoked(d, 1);
        Ok(valid.then_some(d))
    }

    fn stored_record(&self, key: &[u8]) -> Res<Option<Delegation>> {
        match self.txn.get(key)? {
            Some(b) => Ok(Some(decode(&b)?)),
            None => Ok(None),
        }
    }

    /// Whether `d` was recalled more than `times` × [`REVOKED_AFTER_LEASES`] leases ago.
    fn revoked(&self, d: Delegation, times: u64) -> bool {
        let bound = self
            .lease_us()
            .saturating_mul(REVOKED_AFTER_LEASES)
            .saturating_mul(times);
        d.recalled_us
            .is_some_and(|t| t.saturating_add(bound) < self.sb.clock_us)
    }

    /// If another session holds the delegation stored under `key` for `ino`: puts `ino` on
    /// its recall list, notes the first recall's time in the record, and returns `true`
    /// (the caller answers [`Reply::Recall`]).
    pub(crate) fn recall_record(&mut self, key: Vec<u8>, ino: u64) -> Res<bool> {
        let Some(d) = self.valid_record(&key)? else {
            return Ok(false);
        };
        if d.client == self.client {
            return Ok(false);
        }
        self.add_recall(d.client, ino)?;
        if d.recalled_us.is_none() {
            let d = Delegation {
                recalled_us: Some(self.sb.clock_us),
                ..d
            };
            self.txn.put(key, encode(&d));
        }
        Ok(true)
    }

    /// If another client holds `ino`'s lock delegation: [`Self::recall_record`].
    pub(crate) fn recall_if_delegated(&mut self, ino: u64) -> Res<bool> {
        self.recall_record(key::delegation(ino), ino)
    }

    /// Whether the caller's own delegation under `key` was revoked lately (recalled, not
    /// given back, and no more than twice the revocation bound ago): it may not take it
    /// back yet.
    fn revoked_lately(&self, key: &[u8]) -> Res<bool> {
        Ok(self
            .stored_record(key)?
            .is_some_and(|d| d.client == self.client && self.revoked(d, 1) && !self.revoked(d, 2)))
    }

    /// Puts `ino` on `holder`'s recall list (unless it is there, or the list is full).
    pub(crate) fn add_recall(&mut self, holder: u64, ino: u64) -> Res<()> {
        let mut list = self.load_recalls(holder)?;
        if !list.contains(&ino) && list.len() < MAX_RECALLS {
            list.push(ino);
            self.txn.put(key::recalls(holder), encode(&list));
        }
        Ok(())
    }

    fn load_recalls(&self, client: u64) -> Res<Vec<u64>> {
        match self.txn.get(&key::recalls(client))? {
            Some(b) => Ok(decode(&b)?),
            None => Ok(Vec::new()),
        }
    }

    /// Grants the caller the delegation recorded under `key` for `ino` (a directory's or a
    /// file's contents': [`crate::dir_delegation`], [`crate::file_delegation`]), renewing
    /// its lease, with `attr` in the reply; unless another session holds it, which is then
    /// asked to give it back ([`Reply::Recall`]).
    pub(crate) fn grant_or_recall(&mut self, key: Vec<u8>, ino: u64, attr: Attr) -> Res<Reply> {
        if self.recall_record(key.clone(), ino)? || self.revoked_lately(&key)? {
            return Ok(Reply::Recall);
        }
        // Held already by the caller: granted again, and a recall of it still counts.
        let recalled_us = self
            .valid_record(&key)?
            .filter(|d| d.client == self.client)
            .and_then(|d| d.recalled_us);
        let (epoch, lapsed) = self.renew()?;
        let rec = Delegation {
            client: self.client,
            epoch,
            recalled_us,
        };
        self.txn.put(key, encode(&rec));
        self.forget_recall(ino)?;
        Ok(Reply::Delegated {
            lapsed,
            attr,
            mine: Vec::new(),
        })
    }

    /// Ends the caller's delegation recorded under `key` for `ino`: `ENOLCK` if it holds
    /// none (any more).
    pub(crate) fn give_back_record(&mut self, key: Vec<u8>, ino: u64) -> Res<Reply> {
        if self.valid_record(&key)?.map(|d| d.client) != Some(self.client) {
            return Err(Errno::ENOLCK.into());
        }
        self.txn.delete(key);
        self.forget_recall(ino)?;
        Ok(Reply::Done)
    }

    /// `F_SETLK` asking for the file's delegation too (see the module docs).
    pub(crate) fn lock_delegate(&mut self, r: LockReq) -> Res<Reply> {
        let fh = r.fh;
        if self.recall_if_delegated(fh.ino)? {
            return Ok(Reply::Recall);
        }
        let reply = self.setlk(r)?;
        let Reply::Lock { lapsed, attr, .. } = reply else {
            return Ok(reply);
        };
        let locks = self.valid_locks(fh.ino)?;
        let others = locks.iter().any(|h| h.owner.client != self.client);
        if others || self.revoked_lately(&key::delegation(fh.ino))? {
            return Ok(Reply::Lock {
                conflict: None,
                lapsed,
                attr,
            });
        }
        // `setlk` renewed the lease: its epoch is the present one.
        let epoch = self.load_lease(self.client)?.map_or(0, |l| l.epoch);
        let d = Delegation {
            client: self.client,
            epoch,
            recalled_us: None,
        };
        self.txn.put(key::delegation(fh.ino), encode(&d));
        // A recall of an earlier delegation of the file, not given back before the lease
        // lapsed, does not concern this one.
        self.forget_recall(fh.ino)?;
        let attr = self.resolve(fh)?.attr(fh.ino);
        Ok(Reply::Delegated {
            lapsed,
            attr,
            mine: locks
                .into_iter()
                .map(|h| Returned {
                    owner: h.owner.owner,
                    kind: h.kind,
                    start: h.start,
                    end: h.end,
                    pid: h.pid,
                })
                .collect(),
        })
    }

    /// Gives `fh`'s delegation back with the locks the client holds on it now. `ENOLCK` if
    /// the client does not hold the delegation (its lease lapsed: the reply of its next
    /// lock operation says so, and clears its recall list), `EINVAL` for a range no lock
    /// can cover.
    pub(crate) fn return_delegation(&mut self, fh: FileHandle, mine: Vec<Returned>) -> Res<Reply> {
        self.resolve(fh)?;
        if mine.len() > MAX_LOCKS_PER_FILE {
            return Err(Errno::ENOLCK.into());
        }
        for l in &mine {
            lock::check_range(l.start, l.end)?;
        }
        let held = self
            .valid_delegation(fh.ino)?
            .is_some_and(|d| d.client == self.client);
        if !held {
            return Err(Errno::ENOLCK.into());
        }
        self.forget_recall(fh.ino)?;
        let (epoch, _) = self.renew()?;
        let mut next: Vec<Held> = self
            .valid_locks(fh.ino)?
            .into_iter()
            .filter(|h| h.owner.client != self.client)
            .collect();
        for l in mine {
            let me = LockOwner {
                client: self.client,
                owner: l.owner,
            };
            next = lock::apply(next, me, epoch, Some(l.kind), (l.start, l.end), l.pid)?;
        }
        self.save_locks(fh.ino, &next);
        self.txn.delete(key::delegation(fh.ino));
        self.lock_reply(fh, None, false)
    }

    /// Takes `ino` off the caller's recall list.
    pub(crate) fn forget_recall(&mut self, ino: u64) -> Res<()> {
        let list = self.load_recalls(self.client)?;
        if !list.contains(&ino) {
            return Ok(());
        }
        let list: Vec<u64> = list.into_iter().filter(|&i| i != ino).collect();
        if list.is_empty() {
            self.txn.delete(key::recalls(self.client));
        } else {
            self.txn.put(key::recalls(self.client), encode(&list));
        }
        Ok(())
    }

    /// The files whose delegation the caller must give back (read-only).
    pub(crate) fn recalls(&self) -> Res<Reply> {
        Ok(Reply::Recalls(self.load_recalls(self.client)?))
    }

    /// Drops `ino`'s delegation record (the inode is being freed).
    pub(crate) fn drop_delegation(&mut self, ino: u64) {
        self.txn.delete(key::delegation(ino));
    }
}
