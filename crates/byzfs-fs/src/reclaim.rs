//! Space given back in bounded steps: the reclaim queue, and where a file's blocks are.
//!
//! **Why.** Every replica executes every operation, with every other request waiting behind
//! it, and its cost is paid again by the checkpoint after it (undo records of what it
//! changed) and by a rollback. Removing a 1 GiB file by deleting its 65,536 blocks in one
//! operation took about 48 s at each replica and stalled the whole cluster, and its rollback
//! cost as much again. So no operation deletes more than [`STEP_BLOCKS`] blocks (or
//! extended attributes) of its own: the rest goes to a queue, replicated like everything
//! else, that [`crate::Op::Reclaim`] works through [`STEP_BLOCKS`] at a time. The mount
//! sends those steps in the background after a removal or truncation, one at a time between
//! the user's operations, and when it starts (a mount killed mid-way leaves the queue to the
//! next one). The cost of any operation is therefore bounded by a constant whatever the
//! size of the files it touches (ARCHITECTURE.md "Bounded work"; the test
//! `every_operation_does_bounded_work` measures each operation on large inputs).
//!
//! **Where a file's blocks are** (`DataRec`, key `12 ‖ ino`): under a *data id*, its inode
//! number unless a truncation changed it. Absent, the record means "under the inode number,
//! no stale tail", so small files (the common case) store nothing extra.
//!
//! **What a deferred removal or truncation leaves**, in order of preference:
//! * the blocks to delete fit the operation's budget: deleted at once, as before;
//! * the file goes (last link, rename over it): its inode record goes at once and its data
//!   id is queued whole (`Doomed::Blocks` with `owner` 0); inode numbers are never
//!   reused, so nothing can see those blocks again;
//! * a truncation to zero: the file gets a fresh data id (from the inode counter) and the old
//!   one is queued whole, so the file is at once empty and writable;
//! * a truncation to a smaller non-zero size: the size changes at once, and the blocks past
//!   it (the *stale tail*) are queued with the file as `owner`. Reads stop at the size, so
//!   they never see the stale tail; an operation that would grow the file over it (a write
//!   past the end, a truncation up, `fallocate`) deletes what is left of it if that fits its
//!   budget, and otherwise fails with [`crate::Errno::EBUSY`] having changed nothing: the
//!   client sends `Op::Reclaim` for that file until it answers `more: false` and tries
//!   again (the mount does this by itself).
//!
//! **Space.** The superblock's `used_bytes` (what `statfs` and `ENOSPC` go by) counts the
//! bytes actually stored, so it falls as the queue is worked through, as a local file
//! system's free space grows while it frees a large file in the background. A file with a
//! stale tail keeps counting those bytes in its `used` (`st_blocks`) until they go.

use crate::data;
use crate::encoding::{decode, encode};
use crate::exec::Exec;
use crate::fail::Res;
use crate::inode::{self, Inode};
use crate::key;
use crate::proto::errno::Errno;
use crate::proto::handle::FileHandle;
use crate::proto::reply::Reply;
use crate::store::Store;
use serde::{Deserialize, Serialize};

/// Most blocks (16 KiB each) or extended attributes one operation deletes: 1 MiB of data,
/// as much as one write stores, so the undo records a checkpoint keeps of a removal are no
/// larger than those of writing the file.
/// A removal or truncation within it is done at once; beyond it, in queued steps of this
/// size.
pub const STEP_BLOCKS: u64 = 64;

/// Where a file's blocks are stored (key `12 ‖ ino`).
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct DataRec {
    /// The data id the blocks are keyed by (`crate::key::block`).
    pub id: u64,
    /// The queue entry deleting this file's stale tail, if a truncation left one.
    pub stale: Option<u64>,
}

/// The reclaim queue's counters (key `14`).
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) struct Queue {
    /// The number the next entry gets.
    pub next: u64,
    /// Entries in the queue.
    pub entries: u64,
}

/// What a queue entry (key `13 ‖ number`) deletes.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Doomed {
    /// Every block of data id `data` at index `from` or above. `owner`: the live file
    /// whose stale tail this is (its `used` and [`DataRec`] follow), or 0.
    Blocks {
        /// The data id.
        data: u64,
        /// The first block index to delete.
        from: u64,
        /// The file whose stale tail this is, or 0.
        owner: u64,
    },
    /// Every extended attribute of removed inode `ino`.
    Xattrs {
        /// The removed inode.
        ino: u64,
    },
}

/// The first key above every queue entry.
fn queue_end() -> Vec<u8> {
    key::reclaim(u64::MAX)
}

impl<S: Store + ?Sized> Exec<'_, '_, S> {
    /// Where `ino`'s blocks are.
    pub(crate) fn data_rec(&self, ino: u64) -> Res<DataRec> {
        match self.txn.get(&key::data(ino))? {
            Some(b) => Ok(decode(&b)?),
            None => Ok(DataRec {
                id: ino,
                stale: None,
            }),
        }
    }

    fn save_data_rec(&mut self, ino: u64, r: DataRec) {
        if r.id == ino && r.stale.is_none() {
            self.txn.delete(key::data(ino));
        } else {
            self.txn.put(key::data(ino), encode(&r));
        }
    }

    fn queue(&self) -> Res<Queue> {
        match self.txn.get(&key::reclaim_queue())? {
            Some(b) => Ok(decode(&b)?),
            None => Ok(Queue::default()),
        }
    }

    fn save_queue(&mut self, q: Queue) {
        if q == Queue::default() {
            self.txn.delete(key::reclaim_queue());
        } else {
            self.txn.put(key::reclaim_queue(), encode(&q));
        }
    }

    /// Queues `d`; returns its entry number.
    fn enqueue(&mut self, d: Doomed) -> Res<u64> {
        let mut q = self.queue()?;
        let n = q.next;
        q.next += 1;
        q.entries += 1;
        self.txn.put(key::reclaim(n), encode(&d));
        self.save_queue(q);
        Ok(n)
    }

    fn dequeue(&mut self, n: u64) -> Res<()> {
        if self.txn.get(&key::reclaim(n))?.is_none() {
            return Ok(());
        }
        self.txn.delete(key::reclaim(n));
        let mut q = self.queue()?;
        q.entries = q.entries.saturating_sub(1);
        self.save_queue(q);
        Ok(())
    }

    fn load_entry(&self, n: u64) -> Res<Option<Doomed>> {
        match self.txn.get(&key::reclaim(n))? {
            Some(b) => Ok(Some(decode(&b)?)),
            None => Ok(None),
        }
    }

    /// The data of regular file `ino`, whose inode is being freed: deleted now if it fits
    /// the budget, queued whole otherwise. Takes the bytes deleted now off `used_bytes`.
    pub(crate) fn drop_data(&mut self, ino: u64) -> Res<()> {
        let rec = self.data_rec(ino)?;
        if data::count_from(self.txn, rec.id, 0, self.budget)? <= self.budget {
            let d = data::delete_from(self.txn, rec.id, 0, self.budget)?;
            self.budget -= d.blocks;
            self.sb.used_bytes = self.sb.used_bytes.saturating_sub(d.bytes);
            if let Some(e) = rec.stale {
                self.dequeue(e)?;
            }
        } else {
            // A stale-tail entry of this file stays queued: it finds its owner gone and
            // deletes what the whole-id entry has not yet.
            self.enqueue(Doomed::Blocks {
                data: rec.id,
                from: 0,
                owner: 0,
            })?;
        }
        self.txn.delete(key::data(ino));
        Ok(())
    }

    /// The extended attributes of `ino`, whose inode is being freed: deleted now if they fit
    /// the budget, queued otherwise. Each leaves `used_bytes` as it is deleted.
    pub(crate) fn drop_xattrs_bounded(&mut self, ino: u64) -> Res<()> {
        if self.delete_xattrs_upto(ino, true)?.1 {
            return Ok(());
        }
        self.enqueue(Doomed::Xattrs { ino })?;
        Ok(())
    }

    /// Deletes `ino`'s extended attributes if all of them fit the budget (`all` true), or
    /// as many as it allows if `all` is false. Returns how many went and whether none is
    /// left.
    fn delete_xattrs_upto(&mut self, ino: u64, all: bool) -> Res<(u64, bool)> {
        let start = key::xattr(ino, &[]);
        let cap = usize::try_from(self.budget + 1).unwrap_or(usize::MAX);
        let found = self.txn.range(&start, &key::xattr_end(ino), cap)?;
        let done = found.len() as u64 <= self.budget;
        if all && !done {
            return Ok((0, false));
        }
        let mut gone = 0;
        for (k, v) in found.into_iter().take(cap - 1) {
            // The attribute's cost, as `setxattr` charged it: name and value bytes.
            let cost = (k.len() - start.len() + v.len()) as u64;
            self.sb.used_bytes = self.sb.used_bytes.saturating_sub(cost);
            self.txn.delete(k);
            gone += 1;
        }
        self.budget -= gone;
        Ok((gone, done))
    }

    /// Shrinks regular file `ino` (inode `i`, not yet saved) to `size`, below its size.
    /// Returns the change in stored bytes made now (for [`Exec::charge`]); what is
    /// deferred leaves `used_bytes` when the queue deletes it.
    pub(crate) fn shrink(&mut self, ino: u64, i: &mut Inode, size: u64) -> Res<i64> {
        let mut rec = self.data_rec(ino)?;
        let mut delta = data::cut_block(self.txn, rec.id, size)?;
        // A stale tail, if any, starts at or above `from`: the file has not grown past the
        // size that left it (growth deletes it first), and `size` is below that.
        let from = data::first_block_past(size);
        if data::count_from(self.txn, rec.id, from, self.budget)? <= self.budget {
            let d = data::delete_from(self.txn, rec.id, from, self.budget)?;
            self.budget -= d.blocks;
            delta -= d.bytes as i64;
            if let Some(e) = rec.stale.take() {
                self.dequeue(e)?;
            }
            i.used = i.used.saturating_add_signed(delta);
        } else if from == 0 {
            // Empty now: a fresh data id, and the old one goes whole (its stale-tail entry,
            // if any, is covered by it). `used_bytes` keeps the old blocks until they go.
            if let Some(e) = rec.stale.take() {
                self.dequeue(e)?;
            }
            self.enqueue(Doomed::Blocks {
                data: rec.id,
                from: 0,
                owner: 0,
            })?;
            rec.id = self.sb.next_ino;
            self.sb.next_ino += 1;
            i.used = 0;
        } else {
            let queued = match rec.stale {
                Some(e) => self.load_entry(e)?.map(|d| (e, d)),
                None => None,
            };
            match queued {
                // The tail grows downwards: the same entry, from the new size.
                Some((e, Doomed::Blocks { data, owner, .. })) => {
                    let d = Doomed::Blocks { data, from, owner };
                    self.txn.put(key::reclaim(e), encode(&d));
                }
                // None yet (or a record that names no queued tail): a new entry, so that no
                // block past the size is ever left without one.
                _ => {
                    rec.stale = Some(self.enqueue(Doomed::Blocks {
                        data: rec.id,
                        from,
                        owner: ino,
                    })?);
                }
            }
            // The tail's bytes stay in `used` until the queue deletes them.
            i.used = i.used.saturating_add_signed(delta);
        }
        self.save_data_rec(ino, rec);
        i.size = size;
        Ok(delta)
    }

    /// Before regular file `ino` (inode `i`, not yet saved) grows past its size: deletes
    /// its stale tail if it fits the budget, or answers `EBUSY` (nothing changed: the
    /// client reclaims that file's tail with `Op::Reclaim` and tries again). Returns the
    /// change in stored bytes (for [`Exec::charge`]).
    pub(crate) fn before_growth(&mut self, ino: u64, i: &mut Inode) -> Res<i64> {
        let mut rec = self.data_rec(ino)?;
        let Some(e) = rec.stale else {
            return Ok(0);
        };
        let Some(Doomed::Blocks { data, from, .. }) = self.load_entry(e)? else {
            rec.stale = None;
            self.save_data_rec(ino, rec);
            return Ok(0);
        };
        if data::count_from(self.txn, data, from, self.budget)? > self.budget {
            return Err(Errno::EBUSY.into());
        }
        let d = data::delete_from(self.txn, data, from, self.budget)?;
        self.budget -= d.blocks;
        self.dequeue(e)?;
        rec.stale = None;
        self.save_data_rec(ino, rec);
        i.used = i.used.saturating_sub(d.bytes);
        Ok(-(d.bytes as i64))
    }

    /// [`crate::Op::Reclaim`]: works through the queue (or only `file`'s stale tail) for up
    /// to the budget; answers what it deleted and whether work is left.
    pub(crate) fn reclaim(&mut self, file: Option<FileHandle>) -> Res<Reply> {
        let mut freed = 0;
        let more = match file {
            Some(fh) => {
                self.resolve(fh)?;
                if let Some(e) = self.data_rec(fh.ino)?.stale {
                    freed += self.work(e)?;
                }
                self.data_rec(fh.ino)?.stale.is_some()
            }
            None => {
                while self.budget > 0 {
                    let head = self.txn.range(&key::reclaim(0), &queue_end(), 1)?;
                    let Some((k, _)) = head.first() else {
                        break;
                    };
                    let n = tail_u64(k);
                    freed += self.work(n)?;
                    if self.load_entry(n)?.is_some() {
                        break;
                    }
                }
                self.queue()?.entries > 0
            }
        };
        Ok(Reply::Reclaimed {
            blocks: freed,
            more,
        })
    }

    /// Works on entry `n` for up to the budget; drops it when done. Returns the blocks (or
    /// attributes) deleted.
    fn work(&mut self, n: u64) -> Res<u64> {
        let Some(d) = self.load_entry(n)? else {
            return Ok(0);
        };
        match d {
            Doomed::Blocks { data, from, owner } => {
                let del = data::delete_from(self.txn, data, from, self.budget)?;
                self.budget -= del.blocks;
                self.sb.used_bytes = self.sb.used_bytes.saturating_sub(del.bytes);
                if owner != 0 {
                    self.settle_owner(owner, data, n, del)?;
                }
                if del.done {
                    self.dequeue(n)?;
                }
                Ok(del.blocks)
            }
            Doomed::Xattrs { ino } => {
                let (gone, done) = self.delete_xattrs_upto(ino, false)?;
                if done {
                    self.dequeue(n)?;
                }
                Ok(gone)
            }
        }
    }

    /// The live file `owner` whose stale tail (entry `n`, of data id `data`) lost `del`:
    /// its `used` falls, and its record forgets the entry once it is done.
    fn settle_owner(&mut self, owner: u64, data: u64, n: u64, del: data::Deleted) -> Res<()> {
        let rec = self.data_rec(owner)?;
        if rec.id != data || rec.stale != Some(n) {
            // Removed, or emptied since (its old blocks then went to a whole-id entry).
            return Ok(());
        }
        if let Some(mut i) = inode::load(self.txn, owner)? {
            i.used = i.used.saturating_sub(del.bytes);
            self.save(owner, &i);
        }
        if del.done {
            self.save_data_rec(
                owner,
                DataRec {
                    id: rec.id,
                    stale: None,
                },
            );
        }
        Ok(())
    }
}

/// The last 8 bytes of a key as a big-endian `u64` (a queue entry's number).
fn tail_u64(k: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&k[k.len() - 8..]);
    u64::from_be_bytes(b)
}
